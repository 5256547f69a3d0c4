"""Session drift reports (Markdown for pull requests, JSON with a published schema, HTML) and the viewer."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.documents import Document
from ..exceptions import ReportError
from .status import TestStatus
from .summary import NetworkGuard, SessionReport, counts, next_steps

if TYPE_CHECKING:
    from .comparison_table import Comparison

SCHEMA_FILE = "schema.json"
REPORT_FORMAT = "pytest-agentreplay-report"
# 3: pytest's own outcomes as statuses (error, xfailed, xpassed), reruns, and the summary's differences
# split by what they do to the run (expected differences named so).
REPORT_VERSION = 3


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
        return render_json(report)
    if suffix == ".html":
        from .html_report import render_html

        return render_html(report)
    from .markdown import render_markdown

    return render_markdown(report)


def render_json(report: SessionReport) -> str:
    """The JSON report (:func:`report_json_schema`)."""
    from ..core.canonical import dumps_pretty  # heavy: the canonical JSON encoder, for a JSON report only

    doc: Document = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "summary": report.summary,
        "tests": [t.to_dict() for t in report.tests],
        "unused": report.unused,
        "next_steps": report.next_steps,
    }
    if report.network is not None:
        doc["network"] = report.network._asdict()
    if report.comparison is not None:
        doc["comparison"] = report.comparison.to_dict()
    return dumps_pretty(doc)


def report_json_schema() -> Document:
    """The JSON Schema (draft 2020-12) every JSON report validates against (``report/schema.json``)."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: Document = json.loads(text)
    return schema


def validate_report(doc: object) -> list[str]:
    """Schema problems of a report document (empty when valid); needs ``jsonschema``."""
    jsonschema: Any = importlib.import_module("jsonschema")
    validator = jsonschema.Draft202012Validator(report_json_schema())
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


# A replayed value can hold text no UTF-8 can (a lone surrogate the agent passed to record_policy): the
# report shows it escaped, as the terminal does (``\\ud800``), and stays valid UTF-8 (in JSON, the escape).
_UNENCODABLE = "backslashreplace"


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
        atomic_write_bytes(path, text.encode("utf-8", _UNENCODABLE))
    except OSError as exc:
        raise _not_written(path, f"{type(exc).__name__}: {exc}") from exc
    # GitHub Actions shows the file ``$GITHUB_STEP_SUMMARY`` names on the run's page: the Markdown goes there.
    if step_summary and (target := os.environ.get("GITHUB_STEP_SUMMARY")):
        try:
            with open(target, "a", encoding="utf-8", errors=_UNENCODABLE) as fh:
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
