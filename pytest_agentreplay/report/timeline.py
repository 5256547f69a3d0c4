"""The audit view: a run rendered as a readable timeline, one line per event (plus detail lines)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.documents import items_in, object_in
from ..core.events import Event, RunMeta
from ..runtime.data import describe_data

_WIDTH = 100


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call(call: object) -> str:
    if isinstance(call, Mapping):
        return f"{call.get('name')}({_short(call.get('arguments'), 40)})"
    return _short(call, 40)


def describe(event: Event) -> str:
    """One-line summary of what the event says, by type."""
    data = event.data
    tool = event.tool
    if event.type == "model.call":
        decision = object_in(data.get("decision"))
        what = ", ".join(_call(c) for c in items_in(decision.get("tool_calls")))
        text = decision.get("text")
        said = f" says {_short(text, 50)!s}" if text else ""
        chose = f" -> {what}" if what else ""
        usage = object_in(data.get("usage"))
        tokens = f" [{usage.get('input_tokens', '?')}/{usage.get('output_tokens', '?')} tok]" if usage else ""
        streamed = " (stream)" if data.get("streamed") else ""
        return f"{data.get('provider', '?')} {data.get('model', '?')}{streamed}{chose}{said}{tokens}"
    if event.type == "tool.call":
        name = tool.name if tool else "?"
        attempt = data.get("attempt", 1)
        retry = f" attempt {attempt}" if attempt and attempt > 1 else ""
        return f"{name}({_short(data.get('arguments', {}), 60)}){retry}"
    if event.type == "tool.result":
        name = tool.name if tool else "?"
        return f"{name} failed: {_short(data['error'], 60)}" if "error" in data else f"{name} returned"
    if event.type == "effect":
        effect = event.effect
        key = tool.idempotency_key if tool and tool.idempotency_key else "NO idempotency key"
        if effect is None:
            return "effect (no details)"
        state = "committed" if effect.committed else "not committed"
        target = f" {effect.target}" if effect.target else ""
        return f"{effect.kind}{target} {state}, receipt {_short(effect.receipt, 30)}, key {key}"
    if event.type == "retrieval":
        docs = ", ".join(map(str, items_in(data.get("document_ids"))))
        return f"{_short(data.get('query', ''), 40)!r} corpus {data.get('corpus_version')} -> [{docs}]"
    if event.type == "policy.decision":
        version = f" v{event.policy_version}" if event.policy_version else ""
        reason = f" ({_short(data['reason'], 40)})" if data.get("reason") else ""
        return f"{data.get('policy')}{version}: {data.get('verdict')}{reason}"
    if event.type == "approval":
        by = f" by {data['by']}" if data.get("by") else ""
        return f"{data.get('status')}{by}" + (f" for {data['subject']}" if data.get("subject") else "")
    if event.type == "state.update":
        label = f"{data['label']} " if data.get("label") else ""
        return f"{label}state {event.state_hash[:12] if event.state_hash else '?'}"
    if event.type == "http":
        return f"{data.get('method')} {data.get('url')} -> {data.get('status')}"
    if event.type == "run.start":
        return f"agent {data.get('agent') or '?'}"
    if event.type == "run.end":
        error = f": {_short(data['error'], 60)}" if data.get("error") else ""
        return f"{data.get('status', '?')}{error}"
    if event.type == "runtime.values":
        return describe_data(data)
    return _short(data)


def render_timeline(run: RunMeta, events: Iterable[Event], *, title: str) -> str:
    lines = [title]
    meta = [
        f"{k}={v}"
        for k, v in (("agent", run.agent), ("model", run.model), ("recorded", run.recorded_at))
        if v
    ]
    if meta:
        lines.append("  " + "  ".join(meta))
    lines.append("-" * min(_WIDTH, max(len(lines[0]), 40)))
    for event in events:
        head = f"{event.seq:>4}  {event.type:<15} {event.actor:<7} {event.event_class:<8} "
        lines.append(head + describe(event))
    return "\n".join(lines)
