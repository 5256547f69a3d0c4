"""Session drift reports (Markdown for pull requests, JSON with a published schema, HTML) and the viewer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..exceptions import ReportError
from .status import TestStatus
from .summary import NetworkGuard, SessionReport, counts, next_steps

if TYPE_CHECKING:
    from .comparison_table import Comparison


def build_report(
    statuses: Iterable[TestStatus],
    *,
    unused: Sequence[str] = (),
    network: NetworkGuard | None = None,
    comparison: Comparison | None = None,
) -> SessionReport:
    """What every format renders: the statuses the terminal and JUnit show, redacted."""
    from ..redaction import default_redactor  # heavy: ~100 ms, paid by sessions that write a report

    # Node ids (a parametrize id), failure messages and drift values can hold a key: reports are files
    # too, so they show what a cassette would store.
    redactor = default_redactor()
    tests = [TestStatus.from_wire(redactor.redact(s.to_wire())) for s in statuses]
    shown = [redactor.redact_string(str(p), keys=False) for p in unused]
    if comparison is not None:
        comparison = type(comparison).from_dict(redactor.redact(comparison.to_dict()))
    steps = next_steps(tests, unused=shown)
    return SessionReport(tests, shown, counts(tests, unused=shown), steps, network, comparison)


def render_report(suffix: str, report: SessionReport) -> str:
    """``report`` as the file with this suffix holds it: JSON, HTML, else Markdown."""
    # heavy: the renderers load the diff package and the viewer (~0.5 s), which every pytest start-up
    # would pay (the controller imports this package); a session renders at most a report or two.
    if suffix == ".json":
        from .json_report import render_json

        return render_json(report)
    if suffix == ".html":
        from .html_report import render_html

        return render_html(report)
    from .markdown import render_markdown

    return render_markdown(report)


def write_report(
    path: Path,
    statuses: Iterable[TestStatus],
    *,
    unused: Sequence[str] = (),
    step_summary: bool = True,
    network: NetworkGuard | None = None,
    comparison: Comparison | None = None,
) -> None:
    """Write the report at ``path`` atomically, and append the Markdown one to ``$GITHUB_STEP_SUMMARY``;
    ``ReportError`` when either fails (no folder is created: it was checked at start-up)."""
    from ..cassette.atomic import atomic_write_bytes  # heavy: ~100 ms at every pytest start-up otherwise

    path = Path(path)
    report = build_report(statuses, unused=unused, network=network, comparison=comparison)
    text = render_report(path.suffix.lower(), report)
    if not path.parent.is_dir():
        raise _not_written(path, f"its folder {path.parent} does not exist")
    try:
        atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as exc:
        raise _not_written(path, f"{type(exc).__name__}: {exc}") from exc
    # GitHub Actions shows the file ``$GITHUB_STEP_SUMMARY`` names on the run's page: the Markdown goes there.
    if step_summary and (target := os.environ.get("GITHUB_STEP_SUMMARY")):
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(render_report(".md", report))
        except OSError as exc:
            raise _not_written(Path(target), f"{type(exc).__name__}: {exc}", "$GITHUB_STEP_SUMMARY") from exc


def _not_written(path: Path, problem: str, what: str = "the agentreplay report") -> ReportError:
    return ReportError(
        f"{what} was not written: {path}",
        evidence=[problem, "the tests ran; only the report is missing"],
        place=str(path),
        fixes=[
            f"make sure {path.parent} exists and is writable for the whole session",
            "or name another path with --agentreplay-report",
        ],
    )
