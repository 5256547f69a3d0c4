"""Hook specifications of pytest-agentreplay, added to pytest through ``pytest_addhooks``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_agentreplay_classify_exchange(request: dict[str, Any], response: dict[str, Any]) -> str | None:
    """Classify an HTTP exchange before it becomes an event.

    ``request`` and ``response`` are the stored payload shapes (method, url, headers, body; status, headers,
    body). Return ``"model"``, ``"read"``, ``"write"`` or ``"ignore"`` to decide, or None to let the built-in
    classifier decide. The first non-None result wins.
    """


@pytest.hookspec
def pytest_agentreplay_redact_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """Redact one event (its JSON form, payloads inline) before it is written.

    Return a replacement dict or None to keep it. Runs after the built-in redaction and before the final
    secret scan, which still refuses to write anything shaped like a secret.
    """


@pytest.hookspec
def pytest_agentreplay_diff_rules(item: pytest.Item, mode: str) -> list[dict[str, Any]] | None:
    """Add diff rules for a test (highest precedence). Same shape as ``[tool.agentreplay.rules]`` entries."""


@pytest.hookspec(firstresult=True)
def pytest_agentreplay_cassette_path(item: pytest.Item, default: Path) -> Path | None:
    """Choose the cassette path of a test; return None to keep ``default``."""
