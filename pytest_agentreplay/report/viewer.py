"""The HTML run viewer: one self-contained page (inline CSS and JS, no network) showing a run.

It shows the run as a timeline (model decisions, tool calls and results, retrievals, policy and
approval checkpoints, state hashes, effects with idempotency keys and receipts), a sequence picture
with one lane per actor (inline SVG), and, for a drift, the recorded and replayed values side by
side with the differing fields marked. Everything from the cassette is escaped: payloads are
untrusted. The page needs no JavaScript to be readable; the script only adds filters.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.constants import ACTORS
from ..core.events import Event, PayloadRef, RunMeta

if TYPE_CHECKING:
    from ..cassette.store import LoadedCassette

PayloadResolver = Callable[[PayloadRef], Any]

MAX_PAYLOAD_CHARS = 20_000
LANE_WIDTH = 120
ROW_HEIGHT = 24
ACTOR_COLORS = {
    "model": "#8250df",
    "runtime": "#0969da",
    "tool": "#1a7f37",
    "human": "#bf8700",
    "policy": "#cf222e",
}

CSS = """
:root { --bg:#fff; --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --card:#f6f8fa;
  --model:#8250df; --runtime:#0969da; --tool:#1a7f37; --human:#bf8700; --policy:#cf222e;
  --reg:#cf222e; --exp:#9a6700; --ok:#1a7f37; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; padding: 24px; max-width: 1400px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 18px; margin: 28px 0 8px;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px;
  overflow: auto; max-height: 420px; white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--card); }
.meta { color: var(--muted); }
.meta span { margin-right: 14px; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px;
  border: 1px solid var(--line);
  background: var(--card); margin-right: 4px; }
.badge.regression, .badge.missing-key, .badge.problem { color: #fff; background: var(--reg);
  border-color: var(--reg); }
.badge.expected { color: #fff; background: var(--exp); border-color: var(--exp); }
.badge.committed { color: #fff; background: var(--ok); border-color: var(--ok); }
.problems { border: 1px solid var(--reg); border-radius: 6px; padding: 8px 12px; background: #ffebe9; }
.toolbar { position: sticky; top: 0; background: var(--bg); padding: 6px 0; z-index: 2;
  border-bottom: 1px solid var(--line); }
.toolbar button { font: inherit; margin: 2px; padding: 2px 10px; border: 1px solid var(--line);
  border-radius: 6px;
  background: var(--card); cursor: pointer; }
.toolbar button.active { background: var(--runtime); color: #fff; border-color: var(--runtime); }
ol.timeline { list-style: none; padding: 0; margin: 8px 0; }
li.entry { border: 1px solid var(--line); border-left: 5px solid var(--runtime); border-radius: 6px;
  margin: 6px 0; padding: 6px 10px; }
li.entry.actor-model { border-left-color: var(--model);
  } li.entry.actor-tool { border-left-color: var(--tool); }
li.entry.actor-human { border-left-color: var(--human);
  } li.entry.actor-policy { border-left-color: var(--policy); }
li.entry.drifted { box-shadow: 0 0 0 2px var(--reg); }
li.entry.hidden { display: none; }
li.entry:target { background: #fff8c5; }
.head { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.seq { font-weight: 600; min-width: 3em; }
.etype { font-weight: 600; }
.summary { color: var(--fg); }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 4px 0; }
.kv dt { color: var(--muted); } .kv dd { margin: 0; }
details > summary { cursor: pointer; color: var(--muted); }
svg.sequence { border: 1px solid var(--line); border-radius: 6px; background: #fff; max-width: 100%; }
svg.sequence text { font: 11px ui-monospace, Menlo, Consolas, monospace; }
.drift-pair { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; border: 1px solid var(--line);
  border-radius: 6px; padding: 8px; margin: 8px 0; }
.drift-pair .side h4 { margin: 0 0 4px; font-size: 13px; }
.drift-pair .full { grid-column: 1 / span 2; }
.drift-field { border-radius: 4px; padding: 4px 6px; margin: 4px 0; background: #fff8c5;
  border: 1px solid #d4a72c; }
.drift-field.regression { background: #ffebe9; border-color: var(--reg); }
.drift-field .path { font-weight: 600; }
.absent { color: var(--muted); font-style: italic; }
"""

# Records script errors and console errors into attributes on <html>, so a headless browser's
# DOM dump shows them (the browser test relies on it); harmless for a reader.
ERROR_PROBE = """
(function () {
  var root = document.documentElement, errors = [];
  function note(msg) {
    errors.push(String(msg));
    root.setAttribute('data-js-errors', JSON.stringify(errors));
  }
  window.addEventListener('error', function (e) { note(e.message || 'error'); });
  window.addEventListener('unhandledrejection', function (e) { note('unhandled rejection: ' + e.reason); });
  var original = console.error;
  console.error = function () {
    note(Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
  root.setAttribute('data-js-errors', '[]');
})();
"""

SCRIPT = """
(function () {
  var root = document.documentElement;
  function entries(scope) { return Array.prototype.slice.call(scope.querySelectorAll('li.entry')); }
  Array.prototype.forEach.call(document.querySelectorAll('.toolbar'), function (bar) {
    var scope = bar.parentNode;
    bar.addEventListener('click', function (ev) {
      var button = ev.target.closest('button');
      if (!button) { return; }
      var action = button.getAttribute('data-action');
      if (action === 'filter') {
        var wanted = button.getAttribute('data-type');
        Array.prototype.forEach.call(bar.querySelectorAll('button[data-action=filter]'), function (b) {
          b.classList.toggle('active', b === button);
        });
        entries(scope).forEach(function (li) {
          li.classList.toggle('hidden', wanted !== '*' && li.getAttribute('data-type') !== wanted);
        });
      } else if (action === 'expand' || action === 'collapse') {
        Array.prototype.forEach.call(scope.querySelectorAll('li.entry details'), function (d) {
          d.open = action === 'expand';
        });
      } else if (action === 'drifted') {
        entries(scope).forEach(function (li) {
          li.classList.toggle('hidden', !li.classList.contains('drifted'));
        });
      }
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll('svg.sequence [data-target]'), function (node) {
    node.addEventListener('click', function () {
      var target = document.getElementById(node.getAttribute('data-target'));
      if (target) {
        target.scrollIntoView({block: 'center'});
        if (history.replaceState) { history.replaceState(null, '', '#' + target.id); }
      }
    });
  });
  root.setAttribute('data-ready', '1');
})();
"""


def esc(value: Any) -> str:
    """HTML-escape any value (strings as they are, everything else as compact JSON or repr)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    return html.escape(text, quote=True)


def pretty(value: Any, limit: int = MAX_PAYLOAD_CHARS) -> str:
    """A ``<pre>`` block with the value as indented JSON (escaped, capped in length)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
        except (TypeError, ValueError):
            text = repr(value)
    note = ""
    if len(text) > limit:
        note = f'\n<span class="absent">… {len(text) - limit} more characters not shown</span>'
        text = text[:limit]
    return f"<pre>{html.escape(text)}{note}</pre>"


def _kv(rows: Iterable[tuple[str, Any]]) -> str:
    cells = []
    for key, value in rows:
        if value is None or value == "" or value == [] or value == {}:
            continue
        shown = esc(value)
        cells.append(f"<dt>{html.escape(key)}</dt><dd class=mono>{shown}</dd>")
    return f'<dl class="kv">{"".join(cells)}</dl>' if cells else ""


def _css_token(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)


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


def _tool_calls_table(calls: Sequence[Mapping[str, Any]]) -> str:
    if not calls:
        return ""
    rows = "".join(
        f"<tr><td class=mono>{esc(c.get('name'))}</td><td class=mono>{esc(c.get('id') or '')}</td>"
        f"<td>{pretty(c.get('arguments'), 4000)}</td></tr>"
        for c in calls
        if isinstance(c, Mapping)
    )
    return f"<table class=tool-calls><tr><th>tool call</th><th>id</th><th>arguments</th></tr>{rows}</table>"


def _details(event: Event, resolve: PayloadResolver | None) -> str:
    data = event.data
    tool = event.tool
    parts: list[str] = []
    if event.type == "model.call":
        decision = data.get("decision") or {}
        usage = data.get("usage") or {}
        parts.append(
            _kv(
                [
                    ("provider", data.get("provider")),
                    ("endpoint", data.get("endpoint")),
                    ("model", data.get("model")),
                    ("response model", data.get("response_model")),
                    ("streamed", data.get("streamed")),
                    ("stop reason", decision.get("stop_reason") if isinstance(decision, Mapping) else None),
                    ("usage", usage),
                    ("decoding", data.get("decoding")),
                    ("response id", data.get("response_id")),
                    ("latency ms", data.get("latency_ms")),
                ]
            )
        )
        if isinstance(decision, Mapping):
            if decision.get("text"):
                parts.append(
                    '<div class="decision-text"><b>text</b>' + pretty(decision.get("text"), 8000) + "</div>"
                )
            parts.append(_tool_calls_table(decision.get("tool_calls") or []))
    elif event.type in ("tool.call", "tool.result"):
        parts.append(
            _kv(
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
        badges = []
        if effect is not None and effect.committed:
            badges.append('<span class="badge committed">committed</span>')
        elif effect is not None:
            badges.append('<span class="badge">not committed</span>')
        if not key:
            badges.append('<span class="badge missing-key">no idempotency key</span>')
        parts.append("".join(badges))
        parts.append(
            _kv(
                [
                    ("kind", effect.kind if effect else None),
                    ("target", effect.target if effect else None),
                    ("idempotency key", key),
                    ("receipt", effect.receipt if effect else None),
                    ("tool", tool.name if tool else None),
                    ("status", data.get("status")),
                ]
            )
        )
    elif event.type == "retrieval":
        parts.append(
            _kv(
                [
                    ("query", data.get("query")),
                    ("corpus version", data.get("corpus_version")),
                    ("document ids", data.get("document_ids")),
                    ("scores", data.get("scores")),
                ]
            )
        )
    elif event.type == "policy.decision":
        parts.append(
            _kv(
                [
                    ("policy", data.get("policy")),
                    ("version", event.policy_version),
                    ("verdict", data.get("verdict")),
                    ("reason", data.get("reason")),
                ]
            )
        )
    elif event.type == "approval":
        parts.append(
            _kv(
                [
                    ("status", data.get("status")),
                    ("by", data.get("by")),
                    ("subject", data.get("subject")),
                    ("reason", data.get("reason")),
                ]
            )
        )
    elif event.type == "http":
        parts.append(
            _kv(
                [
                    ("method", data.get("method")),
                    ("url", data.get("url")),
                    ("status", data.get("status")),
                    ("classification", data.get("classification")),
                ]
            )
        )
    if event.state_hash:
        parts.append(_kv([("state hash", event.state_hash)]))
    parts.append(_payload_block("input", event.input_ref, resolve))
    parts.append(_payload_block("output", event.output_ref, resolve))
    parts.append(f"<details><summary>event data</summary>{pretty(data, 8000)}</details>")
    return "".join(p for p in parts if p)


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
    """The run as a sequence picture: one lane per actor, one row per event (inline SVG)."""
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
    if event.type == "model.call":
        return str(event.data.get("model") or "")
    if event.type in ("tool.call", "tool.result", "effect") and event.tool is not None:
        return event.tool.name
    if event.type == "policy.decision":
        return str(event.data.get("verdict") or "")
    if event.type == "approval":
        return str(event.data.get("status") or "")
    return ""


def drifted_seqs(drift: Mapping[str, Any] | None) -> set[int]:
    """Recorded seq numbers that carry a reported difference."""
    seqs: set[int] = set()
    for diff in (drift or {}).get("differences", []) or []:
        seq = diff.get("seq_recorded")
        if isinstance(seq, int):
            seqs.add(seq)
    return seqs


def render_timeline_html(
    events: Sequence[Event],
    *,
    resolve: PayloadResolver | None = None,
    anchor: str = "",
    drifted: Iterable[int] = (),
) -> str:
    from .timeline import describe

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
        classes = [
            "entry",
            f"type-{_css_token(event.type)}",
            f"actor-{event.actor}",
            f"class-{event.event_class}",
        ]
        badge = ""
        if event.seq in marked:
            classes.append("drifted")
            badge = '<span class="badge regression drift-marker">drift</span>'
        items.append(
            f'<li id="{html.escape(anchor)}ev-{event.seq}" class="{" ".join(classes)}" '
            f'data-seq="{event.seq}" '
            f'data-type="{esc(event.type)}"><div class="head"><span class="seq">#{event.seq}</span>'
            f'<span class="etype">{esc(event.type)}</span><span class="badge">{esc(event.actor)}</span>'
            f'<span class="badge">{esc(event.event_class)}</span>{badge}'
            f'<span class="summary">{esc(describe(event))}</span>'
            f'<span class="meta mono">{esc(event.ts)}</span></div>{_details(event, resolve)}</li>'
        )
    return f'<div class="toolbar">{"".join(buttons)}</div><ol class="timeline">{"".join(items)}</ol>'


def _value_block(diff: Mapping[str, Any], side: str) -> str:
    if diff.get(f"{side}_absent") or side not in diff:
        return '<span class="absent">(absent)</span>'
    return pretty(diff.get(side), 6000)


def render_drift_html(drift: Mapping[str, Any], *, anchor: str = "") -> str:
    """Recorded and replayed side by side, one card per event pair, each differing field marked."""
    differences = list(drift.get("differences") or [])
    counts = drift.get("counts") or {}
    head = (
        '<p class="drift-counts"><span class="badge regression">'
        f"{int(counts.get('regression', 0))} regression(s)"
        f'</span><span class="badge expected">{int(counts.get("expected", 0))} expected</span>'
        f'<span class="badge">mode {esc(drift.get("mode", "?"))}</span>'
        f'<span class="badge">{int(counts.get("ignored", 0))} ignored</span></p>'
    )
    if not differences:
        return head + "<p>No reported differences.</p>"
    groups: dict[tuple[Any, Any, str], list[Mapping[str, Any]]] = {}
    for diff in differences:
        key = (
            diff.get("seq_recorded"),
            diff.get("seq_replayed"),
            str(diff.get("label") or diff.get("event_type")),
        )
        groups.setdefault(key, []).append(diff)
    cards = []
    for (seq_rec, seq_rep, label), diffs in groups.items():
        kinds = sorted({str(d.get("kind")) for d in diffs})
        rec_title = f"recorded #{seq_rec}" if seq_rec is not None else "recorded (no such event)"
        rep_title = f"replayed #{seq_rep}" if seq_rep is not None else "replayed (no such event)"
        if isinstance(seq_rec, int):
            rec_title = f'<a href="#{html.escape(anchor)}ev-{seq_rec}">{html.escape(rec_title)}</a>'
        else:
            rec_title = html.escape(rec_title)
        left, right = [], []
        for diff in diffs:
            verdict = str(diff.get("verdict"))
            rule = diff.get("rule") or {}
            rule_text = (
                f"{rule.get('selector', '?')} ({rule.get('source', '?')})"
                if isinstance(rule, Mapping)
                else str(rule)
            )
            field_head = (
                f'<div class="path mono">{esc(diff.get("path") or "(event)")}</div>'
                f'<span class="badge {esc(verdict)}">{esc(verdict)}</span>'
                f'<span class="badge">{esc(diff.get("kind"))}</span>'
                f'<span class="meta">rule {esc(rule_text)}</span>'
            )
            cls = f"drift-field {_css_token(verdict)}"
            left.append(
                f'<div class="{cls}" data-side="recorded">{field_head}{_value_block(diff, "recorded")}</div>'
            )
            right.append(
                f'<div class="{cls}" data-side="replayed">{field_head}{_value_block(diff, "replayed")}</div>'
            )
        cards.append(
            f'<div class="drift-pair" data-kinds="{esc(" ".join(kinds))}"><h3 class="full">{esc(label)}</h3>'
            f'<div class="side recorded"><h4>{rec_title}</h4>{"".join(left)}</div>'
            f'<div class="side replayed"><h4>{html.escape(rep_title)}</h4>{"".join(right)}</div></div>'
        )
    return head + "".join(cards)


def render_run_section(
    run: RunMeta,
    events: Sequence[Event],
    *,
    resolve: PayloadResolver | None = None,
    problems: Sequence[str] = (),
    drift: Mapping[str, Any] | None = None,
    anchor: str = "",
    heading_level: int = 2,
) -> str:
    """The viewer body for one run; ``anchor`` prefixes element ids so several runs fit in one page."""
    h = f"h{heading_level}"
    meta = [
        ("run", run.run_id),
        ("agent", run.agent),
        ("test", run.test),
        ("provider", run.provider),
        ("model", run.model),
        ("code version", run.code_version),
        ("corpus version", run.corpus_version),
        ("recorded", run.recorded_at),
    ]
    meta_html = "".join(f"<span><b>{html.escape(k)}</b> {esc(v)}</span>" for k, v in meta if v)
    extra = _kv(
        [
            ("decoding", run.decoding),
            ("tool schema versions", run.tool_schema_versions),
            ("policy versions", run.policy_versions),
            ("labels", run.labels),
        ]
    )
    counts: dict[str, int] = {}
    for event in events:
        counts[event.type] = counts.get(event.type, 0) + 1
    count_html = "".join(f'<span class="badge">{esc(t)} x {n}</span>' for t, n in sorted(counts.items()))
    parts = [f'<section class="run" data-run="{esc(run.run_id)}">', f'<p class="meta">{meta_html}</p>', extra]
    parts.append(f'<p class="counts">{count_html}</p>')
    if problems:
        items = "".join(f"<li>{esc(p)}</li>" for p in problems)
        parts.append(f'<div class="problems"><b>{len(problems)} audit problem(s)</b><ul>{items}</ul></div>')
    if drift is not None:
        parts.append(f'<{h} class="drift-title">Drift: recorded vs replayed</{h}>')
        parts.append(f'<div class="drift">{render_drift_html(drift, anchor=anchor)}</div>')
    parts.append(f"<{h}>Sequence</{h}>")
    parts.append(render_sequence_svg(events, anchor=anchor))
    parts.append(f"<{h}>Timeline ({len(events)} events)</{h}>")
    parts.append(render_timeline_html(events, resolve=resolve, anchor=anchor, drifted=drifted_seqs(drift)))
    parts.append("</section>")
    return "".join(p for p in parts if p)


def page(title: str, body: str) -> str:
    """A complete self-contained HTML document (inline CSS and JS; no external resource)."""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style><script>{ERROR_PROBE}</script></head>"
        f"<body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def render_cassette_page(
    cassette: LoadedCassette,
    *,
    drift: Mapping[str, Any] | None = None,
    problems: Sequence[str] | None = None,
) -> str:
    """The viewer page of one loaded cassette (audit problems are computed when not given)."""
    if problems is None:
        from ..replay.audit import audit_problems

        problems = audit_problems(cassette)
    title = f"agent run {cassette.run.test or cassette.run.run_id}"
    body = (
        f"<h1>{esc(title)}</h1><p class=meta>cassette <code>{esc(str(cassette.path))}</code></p>"
        + render_run_section(
            cassette.run, cassette.events, resolve=cassette.payload, problems=problems, drift=drift
        )
    )
    return page(title, body)


def write_html(path: Path, text: str) -> None:
    from ..cassette.atomic import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
