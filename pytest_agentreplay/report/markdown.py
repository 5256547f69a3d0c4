"""The Markdown drift report: written to be posted as a pull-request comment or a GitHub step summary.

Values come from cassettes and agent output, so every cell is HTML-escaped inside ``<code>`` (GitHub
renders HTML in Markdown) with pipes and newlines neutralised: a payload cannot break the table.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path

from ..core.canonical import display_text
from ..core.documents import Document
from ..diff.result import summary_of
from ..diff.rules import split_path
from .locate import Locator
from .summary import PYTEST_WORDS, differences_text

# A difference's place in its cassette file, ``cassettes/test_x/test_y.json:123`` (None when unknown).
Where = Callable[[Mapping[str, object]], str | None]

CELL_LIMIT = 80
MAX_ROWS_PER_TEST = 50
ICONS = {
    "drifted": "❌",
    "failed": "❌",
    "error": "❌",
    "updated": "✏️",
    "replayed": "✅",
    "recorded": "🎙️",
    "audited": "🔍",
    "skipped": "⏭️",
    "xfailed": "⏭️",
    "xpassed": "⚠️",
}
NOTABLE = ("drifted", "failed", "error", "updated")
RED = ("drifted", "failed", "error")


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
    candidate = Path(text)
    if candidate.is_absolute():
        try:
            return candidate.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return text
    return text


def _plain(text: str) -> str:
    return html.escape(text).replace("|", "&#124;")


def _side(diff: Mapping[str, object], side: str) -> str:
    if diff.get(f"{side}_absent") or side not in diff:
        return "*(absent)*"
    return cell_code(diff.get(side))


def _rule(diff: Mapping[str, object]) -> str:
    rule = diff.get("rule")
    if isinstance(rule, Mapping):
        return f"{cell_code(rule.get('selector', '?'), 50)} ({_plain(str(rule.get('source', '?')))})"
    return cell_code(rule, 50)


def _summary(diff: Mapping[str, object]) -> str:
    summary = summary_of(diff)
    return f"<br>{_plain(summary)}" if summary else ""


def _event(diff: Mapping[str, object]) -> str:
    rec, rep = diff.get("seq_recorded"), diff.get("seq_replayed")
    where = f"#{rec}" if rec is not None else ""
    if rep is not None and rep != rec:
        where += f"→#{rep}" if where else f"replayed #{rep}"
    event_type = str(diff.get("event_type") or "")
    label = str(diff.get("label") or "")
    label = f"{event_type} {label}".strip() if not label.startswith(event_type) else label
    return f"{_plain(where)} {_plain(label)}".strip()


def _path_tokens(diff: Mapping[str, object]) -> tuple[str, ...]:
    tokens = diff.get("path_tokens")
    if isinstance(tokens, list | tuple) and all(isinstance(t, str) for t in tokens):
        return tuple(tokens)
    path = diff.get("path")
    return split_path(path) if isinstance(path, str) else ()


def cassette_lines(cassette: str, status: str, locator: Locator | None = None) -> Where:
    """Where each difference of a test sits in its cassette: the line holding the recorded value (for an
    updated test, the file holds the replayed history: the line of the value written). A field the
    stored side lacks sits in the object (or list) the update adds it to."""
    locator = locator if locator is not None else Locator()
    side = "replayed" if status == "updated" else "recorded"
    shown = display_path(cassette)

    def where(diff: Mapping[str, object]) -> str | None:
        seq = diff.get(f"seq_{side}")
        if not isinstance(seq, int) or isinstance(seq, bool) or not cassette:
            return None
        tokens = _path_tokens(diff)
        if diff.get(f"{side}_absent") and len(tokens) > 1:
            tokens = tokens[:-1]
        line = locator.locate(cassette, seq, tokens)
        return None if line is None else f"{shown}:{line}"

    return where


def drift_table(drift: Document, where: Where | None = None) -> list[str]:
    differences = list(drift.get("differences") or [])
    if not differences:
        return ["No reported differences."]
    # Regressions first: they are what the reviewer must look at.
    ordered = sorted(differences, key=lambda d: 0 if d.get("verdict") == "regression" else 1)
    shown_rows = ordered[:MAX_ROWS_PER_TEST]
    places = [where(d) if where is not None else None for d in shown_rows]
    located = any(places)  # a column for the cassette line only when the file could be read
    rows = [
        "| event | change | field |"
        + (" cassette line |" if located else "")
        + " recorded | replayed | verdict | rule |",
        "|---|---|---|" + ("---|" if located else "") + "---|---|---|---|",
    ]
    for diff, place in zip(shown_rows, places, strict=True):
        verdict = str(diff.get("verdict", "?"))
        shown = f"**{verdict}**" if verdict == "regression" else verdict
        at = (f" {cell_code(place, 300)} |" if place else " — |") if located else ""
        rows.append(
            f"| {_event(diff)} | {_plain(str(diff.get('kind', '?')))} "
            f"| {cell_code(diff.get('path') or '(event)', 60)}{_summary(diff)} |{at}"
            f" {_side(diff, 'recorded')} | {_side(diff, 'replayed')} | {shown} | {_rule(diff)} |"
        )
    if len(ordered) > MAX_ROWS_PER_TEST:
        rows.append("")
        rows.append(
            f"… and {len(ordered) - MAX_ROWS_PER_TEST} more difference(s); see the JSON or HTML report."
        )
    return rows


def message_block(message: str) -> list[str]:
    """The whole failure message, pre-formatted: its layout (evidence indented, fixes numbered, commands
    on their own lines) is what makes it readable. Escaped, so no line of it can end the block."""
    return ["<pre>", *html.escape(message.strip("\n")).splitlines(), "</pre>"]


def _label(test: Document) -> str:
    status = str(test["status"])
    return f"{status} ({test['cause']})" if status in ("failed", "error") and test.get("cause") else status


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_markdown(doc: Document) -> str:
    summary = doc["summary"]
    tests: list[Document] = list(doc["tests"])
    lines = ["## Agent replay report", ""]
    order: tuple[str, ...] = ("drifted", "failed", "updated", "replayed", "recorded", "audited")
    order += tuple(word for word in PYTEST_WORDS if summary.get(word))
    counts = [f"**{summary[a]} {a}**" if a in RED and summary[a] else f"{summary[a]} {a}" for a in order]
    counts.append(f"{summary['unused']} unused")
    verdict = "❌" if any(summary.get(a) for a in RED) else "✅"
    lines.append(f"{verdict} " + " · ".join(counts) + f" — {differences_text(summary)}")
    lines.append("")
    network = doc.get("network")
    if isinstance(network, Mapping):
        why = f" ({network['reason']})" if network.get("reason") else ""
        lines += [f"Network guard: **{network['level']}**, isolation {network['isolation']}{why}", ""]
    notable = [t for t in tests if t["status"] in NOTABLE or t["regressions"] or t["expected"]]
    if notable:
        lines += [
            "| result | test | cassette | mode | regressions | expected |",
            "|---|---|---|---|---|---|",
        ]
        for t in notable:
            icon = ICONS.get(str(t["status"]), "")
            lines.append(
                f"| {icon} {_plain(_label(t))} | {cell_code(t['nodeid'], 300)} "
                f"| {cell_code(display_path(t['cassette']), 300)} "
                f"| {_plain(str(t['mode']))} | {t['regressions']} | {t['expected']} |"
            )
        lines.append("")
        for t in notable:
            if t["status"] in ("failed", "error") and t.get("message"):
                headline = (str(t["message"]).strip().splitlines() or [""])[0]
                lines.append(f"- {cell_code(t['nodeid'], 300)}: {cell_code(headline, 300)}")
        if any(t["status"] in ("failed", "error") and t.get("message") for t in notable):
            lines.append("")
    else:
        lines += ["No test drifted or failed.", ""]
    locator = Locator()  # each cassette read once for the report
    for t in notable:
        drift = t.get("drift")
        if not isinstance(drift, Mapping) and not t.get("message"):
            continue
        icon = ICONS.get(str(t["status"]), "")
        counted = f"{_plural(int(t['regressions']), 'regression')}, {t['expected']} expected"
        lines.append("<details>")
        lines.append(
            f"<summary>{icon} <code>{html.escape(str(t['nodeid']))}</code>: "
            f"{counted if isinstance(drift, Mapping) else html.escape(_label(t))}</summary>"
        )
        lines.append("")
        if t.get("message"):
            lines.extend(message_block(str(t["message"])))
            lines.append("")
        cassette = html.escape(display_path(t["cassette"]))
        lines.append(f"Cassette <code>{cassette}</code>, mode {_plain(str(t['mode']))}.")
        lines.append("")
        if isinstance(drift, dict):
            lines.extend(drift_table(drift, cassette_lines(str(t["cassette"]), str(t["status"]), locator)))
            lines.append("")
        lines.append("</details>")
        lines.append("")
    unused = list(doc.get("unused") or [])
    if unused:
        lines.append("Unused cassettes: " + ", ".join(cell_code(u, 120) for u in unused))
        lines.append("")
    steps = list(doc.get("next_steps") or [])
    if steps:
        lines.append("**Next steps**")
        lines.append("")
        lines.extend(f"- `{step.replace('`', '')}`" for step in steps)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
