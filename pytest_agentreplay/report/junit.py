"""Per-test JUnit XML properties (``agentreplay.*``), which the plugin appends to
``report.user_properties`` for pytest's junitxml to write.
"""

from __future__ import annotations

from ..redaction import default_redactor
from .status import TestStatus

PROPERTY_PREFIX = "agentreplay."


def junit_properties(status: TestStatus) -> list[tuple[str, str]]:
    """``[("agentreplay.status", ...), ("agentreplay.cassette", ...), ...]`` for one test."""
    values: dict[str, object] = {
        "status": status.status,
        "cause": status.cause,
        "cassette": status.cassette,
        "mode": status.mode,
        "regressions": status.regressions,
        "expected": status.expected,
        "reruns": status.reruns or None,
        "pending": status.pending,
        # The whole failure message the terminal showed (XML keeps its line breaks as &#10;), as a cassette
        # would store it: the XML is a file like the reports.
        "message": None if status.message is None else default_redactor().redact_string(status.message),
    }
    return [(PROPERTY_PREFIX + name, str(value)) for name, value in values.items() if value is not None]
