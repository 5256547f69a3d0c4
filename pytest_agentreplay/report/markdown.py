"""The Markdown drift report: written to be posted as a pull-request comment or a GitHub step summary.

Values come from cassettes and agent output, so every cell is HTML-escaped inside ``<code>`` (GitHub
renders HTML in Markdown) with pipes and newlines neutralised: a payload cannot break the table.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable
from pathlib import Path

from ..core.canonical import display_text
from ..diff.result import Difference, DriftResult
from ..diff.text import ABSENT
from .locate import Locator
from .status import RED, Status, TestStatus
from .summary import PYTEST_WORDS, SessionReport, differences_text, plural

# A difference's place in its cassette file, ``cassettes/test_x/test_y.json:123`` (None when unknown).
Where = Callable[[Difference], str | None]

CELL_LIMIT = 80
MAX_ROWS_PER_TEST = 50
ICONS = {
    **dict.fromkeys(RED, "❌"),
    Status.UPDATED: "✏️",
    Status.REPLAYED: "✅",
    Status.RECORDED: "🎙️",
    Status.AUDITED: "🔍",
    Status.SKIPPED: "⏭️",
    Status.XFAILED: "⏭️",
    Status.XPASSED: "⚠️",
}


def notable(test: TestStatus) -> bool:
    """A test a report details: red, updated, or with differences."""
    return test.red or test.status == Status.UPDATED or bool(test.regressions or test.expected)


def cell_code(value: object, limit: int = CELL_LIMIT) -> str:
    """A value as inline code safe inside a Markdown table cell."""
    text = display_text(value)
    text = " ".join(text.split()) if "\n" in text or "\r" in text else text
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "<code>" + html.escape(text).replace("|", "&#124;").replace("`", "&#96;") + "</code>"


def display_path(path: object) -> str:
    """A cassette path relative to the working directory (the rootdir in a pytest run) when below it."""
    text = str(path)
    with contextlib.suppress(ValueError):  # not below it
        return Path(text).relative_to(Path.cwd()).as_posix() if Path(text).is_absolute() else text
    return text


def _plain(text: str) -> str:
    return html.escape(text).replace("|", "&#124;")


def _event(diff: Difference) -> str:
    rec, rep = diff.seq_recorded, diff.seq_replayed
    where = f"#{rec}" if rec is not None else ""
    if rep is not None and rep != rec:
        where += f"→#{rep}" if where else f"replayed #{rep}"
    label = diff.label
    label = f"{diff.event_type} {label}".strip() if not label.startswith(diff.event_type) else label
    return f"{_plain(where)} {_plain(label)}".strip()


def cassette_lines(cassette: str, status: Status, locator: Locator) -> Where:
    """Where each difference of a test sits in its cassette (for an updated test, the value written; a
    field the stored side lacks, the object it is added to)."""
    updated = status == Status.UPDATED
    shown = display_path(cassette)

    def where(diff: Difference) -> str | None:
        seq = diff.seq_replayed if updated else diff.seq_recorded
        if seq is None or not cassette:
            return None
        tokens = diff.path_tokens
        if (diff.replayed if updated else diff.recorded) is ABSENT and len(tokens) > 1:
            tokens = tokens[:-1]
        line = locator.locate(cassette, seq, tokens)
        return None if line is None else f"{shown}:{line}"

    return where


def drift_table(drift: DriftResult, where: Where) -> list[str]:
    if not drift.differences:
        return ["No reported differences."]
    # Regressions first: they are what the reviewer must look at.
    ordered = sorted(drift.differences, key=lambda d: not d.is_regression)
    shown_rows = ordered[:MAX_ROWS_PER_TEST]
    places = [where(d) for d in shown_rows]
    located = any(places)  # a column for the cassette line only when the file could be read
    rows = [
        "| event | change | field |"
        + (" cassette line |" if located else "")
        + " recorded | replayed | verdict | rule |",
        "|---|---|---|" + ("---|" if located else "") + "---|---|---|---|",
    ]
    for diff, place in zip(shown_rows, places, strict=True):
        verdict = f"**{diff.verdict}**" if diff.is_regression else diff.verdict
        at = (f" {cell_code(place, 300)} |" if place else " — |") if located else ""
        summary = f"<br>{_plain(diff.summary)}" if diff.summary else ""
        rule = f"{cell_code(diff.rule.selector, 50)} ({_plain(diff.rule.source)})"
        rows.append(
            f"| {_event(diff)} | {_plain(diff.kind)} | {cell_code(diff.path or '(event)', 60)}{summary} |{at}"
            f" {_side(diff.recorded)} | {_side(diff.replayed)} | {verdict} | {rule} |"
        )
    if len(ordered) > MAX_ROWS_PER_TEST:
        more = len(ordered) - MAX_ROWS_PER_TEST
        rows += ["", f"… and {more} more difference(s); see the JSON or HTML report."]
    return rows


def _side(value: object) -> str:
    return "*(absent)*" if value is ABSENT else cell_code(value)


def render_markdown(report: SessionReport) -> str:
    summary = report.summary
    lines = ["## Agent replay report", ""]
    order: tuple[str, ...] = ("drifted", "failed", "updated", "replayed", "recorded", "audited")
    order += tuple(word for word in PYTEST_WORDS if summary.get(word))
    counts = [f"**{summary[a]} {a}**" if a in RED and summary[a] else f"{summary[a]} {a}" for a in order]
    counts.append(f"{summary['unused']} unused")
    verdict = "❌" if any(summary[a] for a in RED) else "✅"
    lines += [f"{verdict} " + " · ".join(counts) + f" — {differences_text(summary)}", ""]
    if (network := report.network) is not None:
        lines += [f"Network guard: **{network.level}**, isolation {network.isolation_text}", ""]
    if report.comparison is not None:
        from .comparison_table import markdown_table

        lines += markdown_table(report.comparison.tests)
        if (not_spent := report.comparison.not_spent_text()) is not None:
            lines += [f"Replay did not spend: {not_spent}", ""]
    tests = [t for t in report.tests if notable(t)]
    failures = [t for t in tests if t.status in (Status.FAILED, Status.ERROR) and t.message]
    if tests:
        lines += [
            "| result | test | cassette | mode | regressions | expected |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {ICONS[t.status]} {_plain(t.label())} | {cell_code(t.nodeid, 300)} "
            f"| {cell_code(display_path(t.cassette), 300)} "
            f"| {_plain(t.mode)} | {t.regressions} | {t.expected} |"
            for t in tests
        ]
        lines.append("")
        for t in failures:
            headline = ((t.message or "").strip().splitlines() or [""])[0]
            lines.append(f"- {cell_code(t.nodeid, 300)}: {cell_code(headline, 300)}")
        if failures:
            lines.append("")
    else:
        lines += ["No test drifted or failed.", ""]
    locator = Locator()  # each cassette read once for the report
    for t in tests:
        if t.drift is None and not t.message:
            continue
        counted = f"{plural(t.regressions, 'regression')}, {t.expected} expected"
        lines += [
            "<details>",
            f"<summary>{ICONS[t.status]} <code>{html.escape(t.nodeid)}</code>: "
            f"{counted if t.drift is not None else html.escape(t.label())}</summary>",
            "",
        ]
        if t.message:  # the whole message, pre-formatted: its layout makes it readable
            lines += ["<pre>", *html.escape(t.message.strip("\n")).splitlines(), "</pre>", ""]
        cassette = html.escape(display_path(t.cassette))
        lines += [f"Cassette <code>{cassette}</code>, mode {_plain(t.mode)}.", ""]
        if t.drift is not None:
            lines += [*drift_table(t.drift, cassette_lines(t.cassette, t.status, locator)), ""]
        lines += ["</details>", ""]
    if report.unused:
        lines += ["Unused cassettes: " + ", ".join(cell_code(u, 120) for u in report.unused), ""]
    pending = [t.pending for t in report.tests if t.pending]
    if pending:
        shown = ", ".join(cell_code(display_path(p), 120) for p in pending)
        lines += ["Pending drift (`agentreplay review`): " + shown, ""]
    if report.next_steps:
        lines += ["**Next steps**", "", *(f"- `{step.replace('`', '')}`" for step in report.next_steps), ""]
    return "\n".join(lines).rstrip("\n") + "\n"
