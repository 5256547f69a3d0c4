"""Session drift reports (Markdown for pull requests, JSON with a published schema, HTML) and the viewer."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPORT_FORMAT = "pytest-agentreplay-report"
REPORT_VERSION = 1
SUFFIXES = (".md", ".json", ".html")


def build_report(
    outcomes: Sequence[dict[str, Any]], *, unused: Sequence[str] = (), missing: Sequence[str] = ()
) -> dict[str, Any]:
    """The report document every format renders (and the JSON format is): see ``report/schema.json``."""
    from ..summary import counts, next_steps

    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "summary": counts(outcomes, unused=unused, missing=missing),
        "tests": [_normalise(o) for o in outcomes],
        "unused": [str(p) for p in unused],
        "missing": [str(n) for n in missing],
        "next_steps": next_steps(outcomes, unused=unused, missing=missing),
    }


def _normalise(outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeid": str(outcome.get("nodeid", "")),
        "cassette": str(outcome.get("cassette", "")),
        "action": str(outcome.get("action", "")),
        "mode": str(outcome.get("mode", "")),
        "regressions": int(outcome.get("regressions") or 0),
        "expected": int(outcome.get("expected") or 0),
        "drift": outcome.get("drift"),
    }


def render_report(
    suffix: str,
    outcomes: Sequence[dict[str, Any]],
    *,
    unused: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> str:
    doc = build_report(outcomes, unused=unused, missing=missing)
    if suffix == ".json":
        from .json_report import render_json

        return render_json(doc)
    if suffix == ".html":
        from .html_report import render_html

        return render_html(doc)
    from .markdown import render_markdown

    return render_markdown(doc)


def write_report(
    path: Path,
    outcomes: Sequence[dict[str, Any]],
    *,
    unused: Sequence[str] = (),
    missing: Sequence[str] = (),
    step_summary: bool = True,
) -> None:
    """Write the report at ``path`` (atomically); with ``$GITHUB_STEP_SUMMARY`` set, also append the
    Markdown report to that file."""
    from ..atomic import atomic_write_bytes

    path = Path(path)
    text = render_report(path.suffix.lower(), outcomes, unused=unused, missing=missing)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    if step_summary:
        append_step_summary(outcomes, unused=unused, missing=missing)


def append_step_summary(
    outcomes: Sequence[dict[str, Any]], *, unused: Sequence[str] = (), missing: Sequence[str] = ()
) -> Path | None:
    """Append the Markdown report to the file GitHub Actions names in ``$GITHUB_STEP_SUMMARY``."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    text = render_report(".md", outcomes, unused=unused, missing=missing)
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return Path(target)
