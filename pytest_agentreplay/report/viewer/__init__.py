"""The HTML run viewer: one self-contained page (inline CSS and JS; the Content-Security-Policy allows
nothing external) showing a run's drift side by side, its sequence picture (inline SVG) and its timeline.
Everything from a cassette is escaped (:func:`esc`, :func:`pretty`, :func:`kv`): payloads are untrusted."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cassette.atomic import atomic_write_bytes
from ...core.canonical import display_text
from ...core.constants import ACTORS
from ...core.events import Event, PayloadRef, RunMeta
from ...diff.result import Difference, DriftResult
from ...diff.text import ABSENT
from ...replay.audit import audit_advice
from ..timeline import describe

if TYPE_CHECKING:
    from ...cassette.read import LoadedCassette

PayloadResolver = Callable[[PayloadRef], Any]

MAX_PAYLOAD_CHARS = 20_000


def esc(value: Any) -> str:
    """HTML-escape any value (strings as they are, everything else as compact JSON or repr)."""
    return html.escape(display_text(value), quote=True)


def pretty(value: Any, limit: int = MAX_PAYLOAD_CHARS) -> str:
    """A ``<pre>`` block with the value as indented JSON (escaped, capped in length)."""
    text = display_text(value, indent=2)
    note = ""
    if len(text) > limit:
        note = f'\n<span class="absent">… {len(text) - limit} more characters not shown</span>'
        text = text[:limit]
    return f"<pre>{html.escape(text)}{note}</pre>"


def kv(rows: Iterable[tuple[str, Any]]) -> str:
    """A ``<dl class="kv">`` of the rows with a value (empty values are left out; no rows, no list)."""
    cells = []
    for key, value in rows:
        if value is None or value == "" or value == [] or value == {}:
            continue
        cells.append(f"<dt>{html.escape(key)}</dt><dd class=mono>{esc(value)}</dd>")
    return f'<dl class="kv">{"".join(cells)}</dl>' if cells else ""


def css_token(text: str) -> str:
    """``text`` usable in a class name: every character but letters and digits becomes ``-``."""
    return "".join(ch if ch.isalnum() else "-" for ch in text)


LANE_WIDTH = 120
ROW_HEIGHT = 24
# The ``data`` field a row of the picture names its event by.
_HINTS = {"model.call": "model", "policy.decision": "verdict", "approval": "status"}
ACTOR_COLORS = {
    "model": "#8250df",
    "runtime": "#0969da",
    "tool": "#1a7f37",
    "human": "#bf8700",
    "policy": "#cf222e",
}


def _arrow(event: Event) -> tuple[str, str]:
    """(from lane, to lane) of the event's arrow in the sequence picture."""
    actor = event.actor
    if event.type == "tool.call":
        return "runtime", "tool"
    if event.type == "approval" and actor == "runtime":
        return "runtime", "human"
    if actor == "runtime":
        return "runtime", "runtime"
    inbound = event.type in ("tool.result", "retrieval", "http", "approval", "policy.decision", "error")
    return (actor, "runtime") if inbound else ("runtime", actor)


def render_sequence_svg(events: Sequence[Event], *, anchor: str = "") -> str:
    lanes = list(ACTORS)
    x_of = {lane: 60 + i * LANE_WIDTH for i, lane in enumerate(lanes)}
    top = 34
    height = top + ROW_HEIGHT * max(len(events), 1) + 16
    width = 60 + LANE_WIDTH * (len(lanes) - 1) + 260
    out = [
        f'<svg class="sequence" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="sequence of the run">'
        '<defs><marker id="arrowhead" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#57606a"/></marker></defs>'
    ]
    for lane in lanes:
        x = x_of[lane]
        out.append(
            f'<g class="lane" data-lane="{lane}"><text x="{x}" y="18" text-anchor="middle" '
            f'font-weight="bold" fill="{ACTOR_COLORS[lane]}">{lane}</text>'
            f'<line x1="{x}" y1="26" x2="{x}" y2="{height - 6}" stroke="#d0d7de" stroke-dasharray="4 3"/></g>'
        )
    label_x = x_of[lanes[-1]] + 24
    for row, event in enumerate(events):
        y = top + ROW_HEIGHT * row + ROW_HEIGHT // 2
        src, dst = _arrow(event)
        color = ACTOR_COLORS.get(event.actor, "#57606a")
        target = f"{anchor}ev-{event.seq}"
        out.append(
            f'<g class="seq-row" data-seq="{event.seq}" data-target="{html.escape(target)}" '
            'style="cursor:pointer">'
        )
        out.append(f"<title>{esc(f'{event.seq} {event.type} ({event.actor})')}</title>")
        if src != dst:
            x1, x2 = x_of[src], x_of[dst]
            shrink = -6 if x2 > x1 else 6
            out.append(
                f'<line x1="{x1}" y1="{y}" x2="{x2 + shrink}" y2="{y}" stroke="{color}" stroke-width="1.5" '
                'marker-end="url(#arrowhead)"/>'
            )
        out.append(f'<circle cx="{x_of[event.actor]}" cy="{y}" r="5" fill="{color}"/>')
        out.append(
            f'<text x="{label_x}" y="{y + 4}" fill="#1f2328">{event.seq:>3} {esc(event.type)}'
            f"{esc(' ' + _sequence_hint(event))}</text></g>"
        )
    out.append("</svg>")
    return "".join(out)


def _sequence_hint(event: Event) -> str:
    if event.type in ("tool.call", "tool.result", "effect") and event.tool is not None:
        return event.tool.name
    key = _HINTS.get(event.type)
    return str(event.data.get(key) or "") if key else ""


def drifted_seqs(drift: DriftResult | None) -> set[int]:
    """Recorded seq numbers that carry a reported difference."""
    seqs: set[int] = set()
    for diff in drift.differences if drift is not None else ():
        # A change every later model call resends is reported once: each call carrying it is marked.
        seqs.update(s for s in (diff.seq_recorded, *(rec for rec, _ in diff.carriers)) if s is not None)
    return seqs


def _value_block(value: object) -> str:
    return '<span class="absent">(absent)</span>' if value is ABSENT else pretty(value, 6000)


def render_drift_html(drift: DriftResult, *, anchor: str, h: str) -> str:
    """The drift section: its ``h`` title, then the counts and one card per event pair."""
    head = (
        f'<{h} class="drift-title">Drift: recorded vs replayed</{h}><div class="drift">'
        '<p class="drift-counts"><span class="badge regression">'
        f"{len(drift.regressions)} regression(s)"
        f'</span><span class="badge expected">{len(drift.expected)} expected</span>'
        f'<span class="badge">mode {esc(drift.mode)}</span>'
        f'<span class="badge">{drift.ignored} ignored</span></p>'
    )
    if not drift.differences:
        return head + "<p>No reported differences.</p></div>"
    groups: dict[tuple[int | None, int | None, str], list[Difference]] = {}
    for diff in drift.differences:
        key = (diff.seq_recorded, diff.seq_replayed, diff.label or diff.event_type)
        groups.setdefault(key, []).append(diff)
    cards = []
    for (seq_rec, seq_rep, label), diffs in groups.items():
        kinds = sorted({d.kind for d in diffs})
        rec_title = html.escape(f"recorded #{seq_rec}" if seq_rec is not None else "recorded (no such event)")
        rep_title = f"replayed #{seq_rep}" if seq_rep is not None else "replayed (no such event)"
        if seq_rec is not None:
            rec_title = f'<a href="#{html.escape(anchor)}ev-{seq_rec}">{rec_title}</a>'
        left: list[str] = []
        right: list[str] = []
        for diff in diffs:
            summary = diff.summary
            field_head = (
                (f'<div class="change-summary">{esc(summary)}</div>' if summary else "")
                + f'<div class="path mono">{esc(diff.path or "(event)")}</div>'
                f'<span class="badge {esc(diff.verdict)}">{esc(diff.verdict)}</span>'
                f'<span class="badge">{esc(diff.kind)}</span>'
                f'<span class="meta">rule {esc(f"{diff.rule.selector} ({diff.rule.source})")}</span>'
            )
            cls = f"drift-field {css_token(diff.verdict)}"
            for side, value, out in (("recorded", diff.recorded, left), ("replayed", diff.replayed, right)):
                out.append(f'<div class="{cls}" data-side="{side}">{field_head}{_value_block(value)}</div>')
        cards.append(
            f'<div class="drift-pair" data-kinds="{esc(" ".join(kinds))}"><h3 class="full">{esc(label)}</h3>'
            f'<div class="side recorded"><h4>{rec_title}</h4>{"".join(left)}</div>'
            f'<div class="side replayed"><h4>{html.escape(rep_title)}</h4>{"".join(right)}</div></div>'
        )
    return head + "".join(cards) + "</div>"


def _payload_block(label: str, ref: PayloadRef | None, resolve: PayloadResolver | None) -> str:
    if ref is None:
        return ""
    where = f"blob {ref.sha256[:12]}…" if ref.sha256 else "inline"
    tags = f'<span class="badge">{esc(ref.data_class)}</span><span class="badge">{esc(where)}</span>'
    if ref.media_type:
        tags += f'<span class="badge">{esc(ref.media_type)}</span>'
    if ref.sha256 is None:
        body = pretty(ref.inline)
    elif resolve is None:
        body = '<p class="absent">payload stored in the blob store (not loaded)</p>'
    else:
        try:
            body = pretty(resolve(ref))
        except Exception as exc:  # a missing blob must not stop the page
            headline = getattr(exc, "headline", str(exc))
            body = f'<p class="absent">payload unavailable: {esc(headline)}</p>'
    return f"<details><summary>{html.escape(label)} {tags}</summary>{body}</details>"


def _tool_calls_table(calls: object) -> str:
    # Free-form data: tool calls that are no list are shown only in the event's data below.
    if not isinstance(calls, list) or not calls:
        return ""
    rows = "".join(
        f"<tr><td class=mono>{esc(c.get('name'))}</td><td class=mono>{esc(c.get('id') or '')}</td>"
        f"<td>{pretty(c.get('arguments'), 4000)}</td></tr>"
        for c in calls
        if isinstance(c, Mapping)
    )
    return f"<table class=tool-calls><tr><th>tool call</th><th>id</th><th>arguments</th></tr>{rows}</table>"


# The ``data`` fields a type's details list, in order, each labelled by its key with spaces.
_DATA_FIELDS = {
    "model.call": "provider endpoint model response_model streamed stop_reason usage decoding response_id "
    "latency_ms",
    "retrieval": "query corpus_version document_ids scores",
    "policy.decision": "policy version verdict reason",
    "approval": "status by subject reason",
    "http": "method url status classification",
}


def _details(event: Event, resolve: PayloadResolver | None) -> str:
    data = event.data
    tool = event.tool
    parts: list[str] = []
    decision = data.get("decision") if event.type == "model.call" else None
    decision = decision if isinstance(decision, Mapping) else {}
    # Fields said outside ``data``: the decision's stop reason, the policy's version.
    found = {**data, "stop_reason": decision.get("stop_reason"), "version": event.policy_version}
    if event.type in _DATA_FIELDS:
        parts.append(kv((key.replace("_", " "), found.get(key)) for key in _DATA_FIELDS[event.type].split()))
    if decision.get("text"):
        parts.append('<div class="decision-text"><b>text</b>' + pretty(decision.get("text"), 8000) + "</div>")
    parts.append(_tool_calls_table(decision.get("tool_calls")))
    if event.type in ("tool.call", "tool.result"):
        parts.append(
            kv(
                [
                    ("tool", tool.name if tool else None),
                    ("schema version", tool.schema_version if tool else None),
                    ("idempotency key", tool.idempotency_key if tool else None),
                    ("attempt", data.get("attempt")),
                    ("effect", data.get("effect")),
                ]
            )
        )
        if "arguments" in data:
            parts.append("<b>arguments</b>" + pretty(data["arguments"], 8000))
        if "error" in data:
            parts.append("<b>error</b>" + pretty(data["error"], 4000))
    elif event.type == "effect":
        effect = event.effect
        key = tool.idempotency_key if tool else None
        if effect is not None and effect.committed:
            parts.append('<span class="badge committed">committed</span>')
        elif effect is not None:
            parts.append('<span class="badge">not committed</span>')
        if not key:
            parts.append('<span class="badge missing-key">no idempotency key</span>')
        # The effect's fields (none without one), the key, the tool's name and the status.
        fields = [(name, getattr(effect, name, None)) for name in ("kind", "target")]
        fields += [("idempotency key", key), ("receipt", getattr(effect, "receipt", None))]
        parts.append(kv([*fields, ("tool", tool.name if tool else None), ("status", data.get("status"))]))
    if event.state_hash:
        parts.append(kv([("state hash", event.state_hash)]))
    parts.append(_payload_block("input", event.input_ref, resolve))
    parts.append(_payload_block("output", event.output_ref, resolve))
    parts.append(f"<details><summary>event data</summary>{pretty(data, 8000)}</details>")
    return "".join(p for p in parts if p)


def render_timeline_html(
    events: Sequence[Event],
    *,
    resolve: PayloadResolver | None = None,
    anchor: str = "",
    drifted: Iterable[int] = (),
) -> str:
    """The toolbar (filter by type, expand, collapse, drifting only) and one entry per event; the seqs in
    ``drifted`` are marked; ``anchor`` prefixes element ids."""
    marked = set(drifted)
    types = sorted({e.type for e in events})
    buttons = ['<button data-action="filter" data-type="*" class="active">all</button>']
    buttons += [f'<button data-action="filter" data-type="{esc(t)}">{esc(t)}</button>' for t in types]
    buttons += [
        '<button data-action="expand">expand all</button>',
        '<button data-action="collapse">collapse all</button>',
    ]
    if marked:
        buttons.append('<button data-action="drifted">drifting only</button>')
    items = []
    for event in events:
        classes = f"entry type-{css_token(event.type)} actor-{event.actor} class-{event.event_class}"
        badge = ""
        if event.seq in marked:
            classes += " drifted"
            badge = '<span class="badge regression drift-marker">drift</span>'
        items.append(
            f'<li id="{html.escape(anchor)}ev-{event.seq}" class="{classes}" '
            f'data-seq="{event.seq}" '
            f'data-type="{esc(event.type)}"><div class="head"><span class="seq">#{event.seq}</span>'
            f'<span class="etype">{esc(event.type)}</span><span class="badge">{esc(event.actor)}</span>'
            f'<span class="badge">{esc(event.event_class)}</span>{badge}'
            f'<span class="summary">{esc(describe(event))}</span>'
            f'<span class="meta mono">{esc(event.ts)}</span></div>{_details(event, resolve)}</li>'
        )
    return f'<div class="toolbar">{"".join(buttons)}</div><ol class="timeline">{"".join(items)}</ol>'


# The run header's fields the page shows, each labelled by its name with spaces: in its head line, and
# in the list below it.
_META_FIELDS = ("agent", "test", "provider", "model", "code_version", "corpus_version")
_EXTRA_FIELDS = ("decoding", "tool_schema_versions", "policy_versions", "labels")


@cache
def asset(name: str) -> str:
    """A file of this folder (package data), read once per process; inlined verbatim into each page."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


def render_run_section(
    run: RunMeta,
    events: Sequence[Event],
    *,
    resolve: PayloadResolver | None = None,
    problems: Sequence[str] = (),
    drift: DriftResult | None = None,
    anchor: str = "",
    heading_level: int = 2,
) -> str:
    """The viewer body for one run; ``anchor`` prefixes element ids so several runs fit in one page."""
    h = f"h{heading_level}"
    named = [(key.replace("_", " "), getattr(run, key)) for key in _META_FIELDS]
    meta = [("run", run.run_id), *named, ("recorded", run.recorded_at)]
    meta_html = "".join(f"<span><b>{html.escape(k)}</b> {esc(v)}</span>" for k, v in meta if v)
    extra = kv((key.replace("_", " "), getattr(run, key)) for key in _EXTRA_FIELDS)
    counts = Counter(event.type for event in events)
    count_html = "".join(f'<span class="badge">{esc(t)} x {n}</span>' for t, n in sorted(counts.items()))
    items = "".join(f"<li>{esc(p)}</li>" for p in problems)
    return "".join(
        [
            f'<section class="run" data-run="{esc(run.run_id)}"><p class="meta">{meta_html}</p>{extra}',
            f'<p class="counts">{count_html}</p>',
            f'<div class="problems"><b>{len(problems)} audit problem(s)</b><ul>{items}</ul></div>'
            if items
            else "",
            render_drift_html(drift, anchor=anchor, h=h) if drift is not None else "",
            f"<{h}>Sequence</{h}>{render_sequence_svg(events, anchor=anchor)}",
            f"<{h}>Timeline ({len(events)} events)</{h}>",
            render_timeline_html(events, resolve=resolve, anchor=anchor, drifted=drifted_seqs(drift)),
            "</section>",
        ]
    )


def page(title: str, body: str) -> str:
    """A complete self-contained HTML document. The error probe runs first, marking script errors on
    ``<html>`` for a headless browser's DOM dump (the browser test); ``viewer.js`` last, only adding the
    filters: the page is readable without it."""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>\n{asset('viewer.css')}</style>"
        f"<script>\n{asset('error_probe.js')}</script></head>"
        f"<body>{body}<script>\n{asset('viewer.js')}</script></body></html>\n"
    )


def render_cassette_page(
    cassette: LoadedCassette,
    *,
    drift: DriftResult | None = None,
    problems: Sequence[str] | None = None,
) -> str:
    """The viewer page of one loaded cassette (audit problems are computed when not given)."""
    if problems is None:
        problems = [*cassette.verify(), *audit_advice(cassette)]
    title = f"agent run {cassette.run.test or cassette.run.run_id}"
    body = (
        f"<h1>{esc(title)}</h1><p class=meta>cassette <code>{esc(str(cassette.path))}</code></p>"
        + render_run_section(
            cassette.run, cassette.events, resolve=cassette.payload, problems=problems, drift=drift
        )
    )
    return page(title, body)


def write_html(path: Path, text: str) -> None:
    """Write a page (UTF-8, atomically), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
