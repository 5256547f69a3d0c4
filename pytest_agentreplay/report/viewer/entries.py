"""The timeline list of a run: one entry per event with its head line and its details by event type,
above a toolbar of filters the page script drives."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...core.events import Event, PayloadRef
from ..timeline import describe
from .markup import PayloadResolver, css_token, esc, kv, pretty


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
    parts.append(_tool_calls_table(decision.get("tool_calls") or []))
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
        classes = [
            "entry",
            f"type-{css_token(event.type)}",
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
