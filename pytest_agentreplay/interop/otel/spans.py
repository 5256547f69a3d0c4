"""A recorded run as spans of the GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/
gen-ai/), independent of the output form. Project attributes are under ``agentreplay.*``; ids are
deterministic (same cassette, same spans)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...core.documents import items_in, object_in
from ...core.events import Event, RunMeta

SCOPE_NAME = __name__.split(".", 1)[0]  # the instrumentation scope: the top package's name
KIND_INTERNAL = 1
KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
# A latency no span can start from (about 31,700 years): its nanoseconds overflow a float (1e308 ms) or name
# no time at all; such a span starts at its event, as one without a latency does.
_MAX_LATENCY_MS = 1e15
_DECODING_ATTRIBUTES = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",
}


@dataclass
class SpanData:
    name: str
    span_id: str
    start_ns: int
    end_ns: int
    kind: int = KIND_INTERNAL
    parent_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    status_code: int = STATUS_UNSET
    status_message: str = ""


def ts_to_ns(ts: str) -> int:
    """ISO-8601 timestamp (UTC without an offset) to unix nanoseconds, every digit of its fraction kept
    (``datetime`` keeps six)."""
    text = ts.strip()
    moment = datetime.fromisoformat(text).replace(microsecond=0)
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    fraction = re.search(r"\.(\d+)", text)
    nanos = int((fraction.group(1) + "000000000")[:9]) if fraction else 0
    return int(moment.timestamp()) * 1_000_000_000 + nanos


def _span_id(run_id: str, key: str) -> str:
    return hashlib.sha256(f"{run_id}:{key}".encode()).hexdigest()[:16]


def trace_id_for(run: RunMeta, events: Sequence[Event]) -> str:
    """The events' own trace id when they carry a valid one, else one derived from the run id."""
    for event in events:
        if event.trace_id and _HEX32.fullmatch(event.trace_id.lower()) and set(event.trace_id) != {"0"}:
            return event.trace_id.lower()
    return hashlib.sha256(f"trace:{run.run_id}".encode()).hexdigest()[:32]


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != [] and v != ""}


def _chat_span(event: Event, run_id: str, parent: str, end_ns: int) -> SpanData:
    data = event.data
    decision = object_in(data.get("decision"))
    usage = object_in(data.get("usage"))
    model = data.get("model") or data.get("response_model")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": data.get("provider"),
        "gen_ai.request.model": data.get("model"),
        "gen_ai.response.model": data.get("response_model"),
        "gen_ai.response.id": data.get("response_id"),
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.output.type": "text" if decision.get("text") else None,
    }
    stop = decision.get("stop_reason")
    if stop:
        attributes["gen_ai.response.finish_reasons"] = [str(stop)]
    decoding = object_in(data.get("decoding"))
    for key, name in _DECODING_ATTRIBUTES.items():
        value = decoding.get(key)
        if value is not None and name not in attributes:
            attributes[name] = [str(v) for v in value] if isinstance(value, list) else value
    calls = items_in(decision.get("tool_calls"))
    if calls:
        attributes["agentreplay.tool_calls"] = [str(c.get("name")) for c in calls if isinstance(c, Mapping)]
    attributes["agentreplay.event.seq"] = event.seq
    if data.get("streamed"):
        attributes["agentreplay.streamed"] = True
    name = f"chat {model}" if model else "chat"
    return _client_span(name, event, run_id, parent, end_ns, attributes, status_message=True)


def _http_span(event: Event, run_id: str, parent: str, end_ns: int) -> SpanData:
    data = event.data
    method = str(data.get("method") or "HTTP").upper()
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.full": data.get("url"),
        "http.response.status_code": data.get("status"),
        "agentreplay.event.seq": event.seq,
        "agentreplay.event.type": event.type,
        **_effect_attributes(event),
    }
    if event.tool is not None and event.tool.idempotency_key:
        attributes["agentreplay.idempotency_key"] = event.tool.idempotency_key
    return _client_span(method, event, run_id, parent, end_ns, attributes, status_message=False)


def _effect_attributes(event: Event) -> dict[str, Any]:
    effect = event.effect
    if effect is None:
        return {}
    receipt = {"agentreplay.effect.receipt": str(effect.receipt)} if effect.receipt is not None else {}
    return {
        "agentreplay.effect.kind": effect.kind,
        "agentreplay.effect.committed": effect.committed,
        **receipt,
    }


def _client_span(
    name: str,
    event: Event,
    run_id: str,
    parent: str,
    end_ns: int,
    attributes: dict[str, Any],
    *,
    status_message: bool,
) -> SpanData:
    """The client span of one exchange, started its latency before its event; an HTTP error status marks it
    failed (and with ``status_message`` names it)."""
    latency = event.data.get("latency_ms")
    start_ns = end_ns
    if isinstance(latency, int | float) and abs(latency) < _MAX_LATENCY_MS:
        start_ns -= int(float(latency) * 1_000_000)
    span = SpanData(
        name=name,
        span_id=_span_id(run_id, f"seq{event.seq}"),
        start_ns=min(start_ns, end_ns),
        end_ns=end_ns,
        kind=KIND_CLIENT,
        parent_id=parent,
        attributes=_clean(attributes),
    )
    status = event.data.get("status")
    if isinstance(status, int) and status >= 400:
        span.status_code = STATUS_ERROR
        if status_message:
            span.status_message = f"HTTP {status}"
        span.attributes["error.type"] = str(status)
    return span


# A root span event's attributes, by event type: ``<prefix>.<name>`` for each name.
_ROOT_EVENT_FIELDS = {
    "retrieval": ("agentreplay.retrieval", "query corpus_version document_ids"),
    "policy.decision": ("agentreplay.policy", "name version verdict reason"),
    "approval": ("agentreplay.approval", "status by subject"),
}


def _root_event(event: Event) -> tuple[str, dict[str, Any]]:
    data = event.data
    attributes: dict[str, Any] = {"agentreplay.event.seq": event.seq}
    if event.type in _ROOT_EVENT_FIELDS:
        prefix, names = _ROOT_EVENT_FIELDS[event.type]
        ids = [str(d) for d in items_in(data.get("document_ids"))]
        found = {**data, "name": data.get("policy"), "version": event.policy_version, "document_ids": ids}
        attributes.update({f"{prefix}.{name}": found.get(name) for name in names.split()})
    if event.type == "error":
        attributes["error.type"] = str(data.get("type") or "error")
        attributes["exception.message"] = str(data.get("message") or data.get("error") or "")
    if event.state_hash:
        attributes["agentreplay.state_hash"] = event.state_hash
    name = "exception" if event.type == "error" else f"agentreplay.{event.type}"
    return name, _clean(attributes)


def run_spans(run: RunMeta, events: Sequence[Event]) -> list[SpanData]:
    run_id = run.run_id
    times = [ts_to_ns(e.ts) for e in events]
    agent = run.agent or (events[0].data.get("agent") if events and events[0].type == "run.start" else None)
    root = SpanData(
        name=f"invoke_agent {agent}" if agent else "invoke_agent",
        span_id=_span_id(run_id, "root"),
        start_ns=min(times, default=0),
        end_ns=max(times, default=0),
        attributes=_clean(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.agent.id": run_id,
                "gen_ai.provider.name": run.provider,
                "gen_ai.request.model": run.model,
                "agentreplay.run_id": run_id,
                "agentreplay.test": run.test,
                "agentreplay.code_version": run.code_version,
            }
        ),
    )
    first_ref = events[0].span_id if events else None
    if first_ref and _HEX16.fullmatch(first_ref.lower()) and set(first_ref) != {"0"}:
        root.parent_id = first_ref.lower()
    spans = [root]
    # Tool call ids the model chose, per tool name, in the order it chose them.
    pending_ids: dict[str, list[str]] = {}
    # The open tool spans by tool name, oldest first: a result ends the oldest call of its tool.
    open_tools: dict[str, list[SpanData]] = {}
    for event, ns in zip(events, times, strict=True):
        if event.type == "model.call":
            spans.append(_chat_span(event, run_id, root.span_id, ns))
            for call in items_in(object_in(event.data.get("decision")).get("tool_calls")):
                if isinstance(call, Mapping) and call.get("name") and call.get("id"):
                    pending_ids.setdefault(str(call["name"]), []).append(str(call["id"]))
        elif event.type == "tool.call":
            name = event.tool.name if event.tool else str(event.data.get("name") or "tool")
            call_id = event.data.get("call_id")
            if call_id is None and pending_ids.get(name):
                call_id = pending_ids[name].pop(0)
            span = SpanData(
                name=f"execute_tool {name}",
                span_id=_span_id(run_id, f"seq{event.seq}"),
                start_ns=ns,
                end_ns=ns,
                parent_id=root.span_id,
                attributes=_clean(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.type": "function",
                        "agentreplay.tool.schema_version": event.tool.schema_version if event.tool else None,
                        "agentreplay.idempotency_key": event.tool.idempotency_key if event.tool else None,
                        "agentreplay.tool.attempt": event.data.get("attempt"),
                        "agentreplay.event.seq": event.seq,
                    }
                ),
            )
            spans.append(span)
            open_tools.setdefault(name, []).append(span)
        elif (
            event.type in ("tool.result", "effect")
            and event.tool is not None
            and open_tools.get(event.tool.name)
        ):
            span = open_tools[event.tool.name].pop(0)
            span.end_ns = max(ns, span.start_ns)
            if "error" in event.data:
                span.status_code = STATUS_ERROR
                span.status_message = str(event.data["error"])[:200]
                span.attributes["error.type"] = str(event.data["error"]).split(":", 1)[0][:100]
            span.attributes.update(_effect_attributes(event))
        elif event.type in ("http", "effect"):
            spans.append(_http_span(event, run_id, root.span_id, ns))
        elif event.type in ("retrieval", "policy.decision", "approval", "state.update", "error"):
            name, attributes = _root_event(event)
            root.events.append((name, ns, attributes))
        elif event.type == "run.end" and event.data.get("status") not in (None, "ok"):
            root.status_code = STATUS_ERROR
            root.status_message = str(event.data.get("error") or event.data.get("status"))[:200]
    # The root covers its children (a model call's span starts its latency before its event).
    root.start_ns = min(span.start_ns for span in spans)
    root.end_ns = max(span.end_ns for span in spans)
    return spans
