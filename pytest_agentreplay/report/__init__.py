"""Session drift reports (Markdown for pull requests, JSON with a published schema, HTML) and the viewer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.documents import Document
from ..exceptions import ReportError
from .status import StatusLike, TestStatus, as_statuses
from .summary import counts, next_steps

REPORT_FORMAT = "pytest-agentreplay-report"
# 3: pytest's own outcomes as statuses (error, xfailed, xpassed), reruns, and the summary's differences
# split by what they do to the run (expected differences named so).
REPORT_VERSION = 3
SUFFIXES = (".md", ".json", ".html")


def build_report(
    given: Iterable[StatusLike], *, unused: Sequence[str] = (), network: Document | None = None
) -> Document:
    """The report document every format renders (and the JSON format is): see ``report/schema.json``.

    ``given`` are the per-test statuses of :func:`pytest_agentreplay.report.status.decide` (or their JSON
    form): the same status the terminal and JUnit show, so no report can call a failed test green.
    """
    from ..redaction import default_redactor  # heavy: ~100 ms, paid by sessions that write a report

    # Node ids (a parametrize id), failure messages and drift values can hold a key: reports are files
    # too, so they show what a cassette would store.
    redactor = default_redactor()
    statuses: list[TestStatus] = [
        TestStatus.from_mapping(redactor.redact(s.to_dict())) for s in as_statuses(given)
    ]
    unused = [redactor.redact_string(str(p), keys=False) for p in unused]
    doc: Document = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "summary": counts(statuses, unused=unused),
        "tests": [s.to_dict() for s in statuses],
        "unused": [str(p) for p in unused],
        "next_steps": next_steps(statuses, unused=unused),
    }
    if network is not None:
        # Which level guarded the session (guard/session_namespace.py): namespace, python guard or none.
        doc["network"] = dict(network)
    return doc


def render_report(
    suffix: str,
    statuses: Iterable[StatusLike],
    *,
    unused: Sequence[str] = (),
    network: Document | None = None,
) -> str:
    doc = build_report(statuses, unused=unused, network=network)
    # heavy: the renderers load the diff package and the viewer (~0.5 s), which every pytest start-up
    # would pay (the controller imports this package); a session renders at most a report or two.
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
    given: Iterable[StatusLike],
    *,
    unused: Sequence[str] = (),
    step_summary: bool = True,
    network: Document | None = None,
) -> None:
    """Write the report at ``path`` (atomically); with ``$GITHUB_STEP_SUMMARY`` set, also append the
    Markdown report to that file. Raises ``ReportError`` when either cannot be written: no folder is
    created (the path's folder was checked at start-up; one missing now was removed during the session)."""
    from ..cassette.atomic import atomic_write_bytes  # heavy: ~100 ms at every pytest start-up otherwise

    statuses = as_statuses(given)
    path = Path(path)
    text = render_report(path.suffix.lower(), statuses, unused=unused, network=network)
    if not path.parent.is_dir():
        raise _not_written(path, f"its folder {path.parent} does not exist")
    try:
        atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as exc:
        raise _not_written(path, f"{type(exc).__name__}: {exc}") from exc
    if step_summary:
        try:
            append_step_summary(statuses, unused=unused, network=network)
        except OSError as exc:
            target = os.environ.get("GITHUB_STEP_SUMMARY", "")
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


def append_step_summary(
    statuses: Iterable[StatusLike], *, unused: Sequence[str] = (), network: Document | None = None
) -> Path | None:
    """Append the Markdown report to the file GitHub Actions names in ``$GITHUB_STEP_SUMMARY``."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    text = render_report(".md", statuses, unused=unused, network=network)
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return Path(target)
