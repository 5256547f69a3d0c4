"""Per-test JUnit XML properties (``<property name="agentreplay.cassette" ...>``).

pytest's junitxml writes ``item.user_properties`` (what ``record_property`` appends to) as properties
of the test case, so the plugin extends them from the outcome at report time::

    item.user_properties.extend(junit_properties(outcome_dict))
"""

from __future__ import annotations

from collections.abc import Mapping

from ..redaction import default_redactor

PROPERTY_PREFIX = "agentreplay."
# ``message`` is the whole failure message the terminal showed (XML keeps its line breaks as &#10;).
FIELDS = ("status", "cause", "cassette", "mode", "regressions", "expected", "reruns", "message")


def junit_properties(outcome: Mapping[str, object]) -> list[tuple[str, str]]:
    """``[("agentreplay.cassette", ...), ("agentreplay.mode", ...), ...]`` for one test outcome."""
    props = [
        (PROPERTY_PREFIX + name, str(outcome[name]))
        for name in FIELDS
        if name in outcome and outcome[name] is not None and not (name == "reruns" and not outcome[name])
    ]
    if outcome.get("message") is not None:
        # A file like the reports: it shows the message as a cassette would store it.
        redact = default_redactor().redact_string
        props = [(name, redact(value) if name.endswith(".message") else value) for name, value in props]
    return props


def add_junit_properties(item: object, outcome: Mapping[str, object]) -> None:
    """Append the properties to ``item.user_properties`` once (safe to call again for the same item)."""
    props = getattr(item, "user_properties", None)
    if props is None:
        return
    present = {name for name, _ in props}
    props.extend(p for p in junit_properties(outcome) if p[0] not in present)
