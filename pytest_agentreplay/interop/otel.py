"""Export a recorded run as OpenTelemetry spans following the GenAI semantic conventions.

Span layout (https://opentelemetry.io/docs/specs/semconv/gen-ai/):

- root ``invoke_agent {agent}`` (``gen_ai.operation.name = invoke_agent``, ``gen_ai.agent.name``);
- ``chat {model}`` per model call (kind CLIENT): ``gen_ai.operation.name = chat``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens`` and the request's decoding settings (``gen_ai.request.*``);
- ``execute_tool {name}`` per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type``), ending at its result or effect;
- HTTP exchanges outside a tool call as HTTP client spans (``{METHOD}``, ``http.request.method``,
  ``url.full``, ``http.response.status_code``);
- retrievals, policy decisions, approvals, state updates and errors as span events of the root.

Nothing is named ``llm.*``; attributes this project adds are under ``agentreplay.*``. Ids are
deterministic: the trace id comes from the events' ``trace_id`` when they carry one, else from the
run id, so exporting the same cassette twice yields the same spans.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import __name__ as _package
from ..core.events import Event, RunMeta

if TYPE_CHECKING:
    from ..cassette.store import LoadedCassette

SCOPE_NAME = _package
KIND_INTERNAL = 1
KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
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
    """A span independent of the output form (OTLP JSON or SDK ``ReadableSpan``)."""

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
    """ISO-8601 timestamp (``...Z`` or with offset) to unix nanoseconds."""
    text = ts.strip().replace("Z", "+00:00")
    whole, _, rest = text.partition(".")
    fraction = ""
    offset = ""
    if rest:
        match = re.match(r"(\d*)(.*)", rest)
        assert match is not None
        fraction, offset = match.group(1), match.group(2)
    else:
        # No fraction: the offset may follow the seconds directly.
        match = re.match(r"(.*T\d{2}:\d{2}:\d{2})(.*)", whole)
        if match:
            whole, offset = match.group(1), match.group(2)
    moment = datetime.fromisoformat(whole + (offset or "+00:00"))
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return int(moment.timestamp()) * 1_000_000_000 + nanos


def _span_id(run_id: str, key: str) -> str:
    return hashlib.sha256(f"{run_id}:{key}".encode()).hexdigest()[:16]


def trace_id_for(run: RunMeta, events: Sequence[Event]) -> str:
    for event in events:
        if event.trace_id and _HEX32.fullmatch(event.trace_id.lower()) and set(event.trace_id) != {"0"}:
            return event.trace_id.lower()
    return hashlib.sha256(f"trace:{run.run_id}".encode()).hexdigest()[:32]


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != [] and v != ""}


def _chat_span(event: Event, run_id: str, parent: str, end_ns: int) -> SpanData:
    data = event.data
    decision = data.get("decision") if isinstance(data.get("decision"), Mapping) else {}
    assert isinstance(decision, Mapping)
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    latency = data.get("latency_ms")
    start_ns = end_ns - int(float(latency) * 1_000_000) if isinstance(latency, int | float) else end_ns
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
    decoding = data.get("decoding") if isinstance(data.get("decoding"), Mapping) else {}
    assert isinstance(decoding, Mapping)
    for key, name in _DECODING_ATTRIBUTES.items():
        value = decoding.get(key)
        if value is not None and name not in attributes:
            attributes[name] = [str(v) for v in value] if isinstance(value, list) else value
    calls = decision.get("tool_calls") or []
    if calls:
        attributes["agentreplay.tool_calls"] = [str(c.get("name")) for c in calls if isinstance(c, Mapping)]
    attributes["agentreplay.event.seq"] = event.seq
    if data.get("streamed"):
        attributes["agentreplay.streamed"] = True
    span = SpanData(
        name=f"chat {model}" if model else "chat",
        span_id=_span_id(run_id, f"seq{event.seq}"),
        start_ns=min(start_ns, end_ns),
        end_ns=end_ns,
        kind=KIND_CLIENT,
        parent_id=parent,
        attributes=_clean(attributes),
    )
    status = data.get("status")
    if isinstance(status, int) and status >= 400:
        span.status_code = STATUS_ERROR
        span.status_message = f"HTTP {status}"
        span.attributes["error.type"] = str(status)
    return span


def _http_span(event: Event, run_id: str, parent: str, end_ns: int) -> SpanData:
    data = event.data
    method = str(data.get("method") or "HTTP").upper()
    latency = data.get("latency_ms")
    start_ns = end_ns - int(float(latency) * 1_000_000) if isinstance(latency, int | float) else end_ns
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.full": data.get("url"),
        "http.response.status_code": data.get("status"),
        "agentreplay.event.seq": event.seq,
        "agentreplay.event.type": event.type,
    }
    if event.effect is not None:
        attributes["agentreplay.effect.kind"] = event.effect.kind
        attributes["agentreplay.effect.committed"] = event.effect.committed
        if event.effect.receipt is not None:
            attributes["agentreplay.effect.receipt"] = str(event.effect.receipt)
    if event.tool is not None and event.tool.idempotency_key:
        attributes["agentreplay.idempotency_key"] = event.tool.idempotency_key
    span = SpanData(
        name=method,
        span_id=_span_id(run_id, f"seq{event.seq}"),
        start_ns=min(start_ns, end_ns),
        end_ns=end_ns,
        kind=KIND_CLIENT,
        parent_id=parent,
        attributes=_clean(attributes),
    )
    status = data.get("status")
    if isinstance(status, int) and status >= 400:
        span.status_code = STATUS_ERROR
        span.attributes["error.type"] = str(status)
    return span


def _root_event(event: Event) -> tuple[str, dict[str, Any]]:
    data = event.data
    attributes: dict[str, Any] = {"agentreplay.event.seq": event.seq}
    if event.type == "retrieval":
        attributes.update(
            {
                "agentreplay.retrieval.query": data.get("query"),
                "agentreplay.retrieval.corpus_version": data.get("corpus_version"),
                "agentreplay.retrieval.document_ids": [str(d) for d in data.get("document_ids") or []],
            }
        )
    elif event.type == "policy.decision":
        attributes.update(
            {
                "agentreplay.policy.name": data.get("policy"),
                "agentreplay.policy.version": event.policy_version,
                "agentreplay.policy.verdict": data.get("verdict"),
                "agentreplay.policy.reason": data.get("reason"),
            }
        )
    elif event.type == "approval":
        attributes.update(
            {
                "agentreplay.approval.status": data.get("status"),
                "agentreplay.approval.by": data.get("by"),
                "agentreplay.approval.subject": data.get("subject"),
            }
        )
    elif event.type == "error":
        attributes["error.type"] = str(data.get("type") or "error")
        attributes["exception.message"] = str(data.get("message") or data.get("error") or "")
    if event.state_hash:
        attributes["agentreplay.state_hash"] = event.state_hash
    name = "exception" if event.type == "error" else f"agentreplay.{event.type}"
    return name, _clean(attributes)


def run_spans(run: RunMeta, events: Sequence[Event]) -> list[SpanData]:
    """The spans of one run, root first, then in the order the steps started."""
    run_id = run.run_id
    times = [ts_to_ns(e.ts) for e in events]
    start = min(times) if times else 0
    end = max(times) if times else 0
    agent = run.agent or (events[0].data.get("agent") if events and events[0].type == "run.start" else None)
    root = SpanData(
        name=f"invoke_agent {agent}" if agent else "invoke_agent",
        span_id=_span_id(run_id, "root"),
        start_ns=start,
        end_ns=end,
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
    open_tools: list[tuple[str, SpanData]] = []
    for event, ns in zip(events, times, strict=True):
        if event.type == "model.call":
            spans.append(_chat_span(event, run_id, root.span_id, ns))
            decision = event.data.get("decision")
            if isinstance(decision, Mapping):
                for call in decision.get("tool_calls") or []:
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
            open_tools.append((name, span))
        elif (
            event.type in ("tool.result", "effect")
            and event.tool is not None
            and any(n == event.tool.name for n, _ in open_tools)
        ):
            index = next(i for i, (n, _) in enumerate(open_tools) if n == event.tool.name)
            _, span = open_tools.pop(index)
            span.end_ns = max(ns, span.start_ns)
            if "error" in event.data:
                span.status_code = STATUS_ERROR
                span.status_message = str(event.data["error"])[:200]
                span.attributes["error.type"] = str(event.data["error"]).split(":", 1)[0][:100]
            if event.effect is not None:
                span.attributes["agentreplay.effect.kind"] = event.effect.kind
                span.attributes["agentreplay.effect.committed"] = event.effect.committed
                if event.effect.receipt is not None:
                    span.attributes["agentreplay.effect.receipt"] = str(event.effect.receipt)
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


# -- OTLP JSON -----------------------------------------------------------------------------------


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue`` in the protobuf JSON mapping (64-bit integers as strings)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def _otlp_span(span: SpanData, trace_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": key_values(span.attributes),
        "status": {
            "code": span.status_code,
            **({"message": span.status_message} if span.status_message else {}),
        },
    }
    if span.parent_id:
        out["parentSpanId"] = span.parent_id
    if span.events:
        out["events"] = [
            {"name": name, "timeUnixNano": str(ns), "attributes": key_values(attrs)}
            for name, ns, attrs in span.events
        ]
    return out


def run_to_otlp(
    run: RunMeta, events: Sequence[Event], *, service_name: str = "pytest-agentreplay"
) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` holding the run's spans."""
    from ..core.constants import FORMAT_VERSION

    trace_id = trace_id_for(run, events)
    spans = run_spans(run, events)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values({"service.name": service_name})},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE_NAME, "version": str(FORMAT_VERSION)},
                        "spans": [_otlp_span(span, trace_id) for span in spans],
                    }
                ],
            }
        ]
    }


def cassette_to_otlp(cassette: LoadedCassette, *, service_name: str = "pytest-agentreplay") -> dict[str, Any]:
    return run_to_otlp(cassette.run, cassette.events, service_name=service_name)


# -- OpenTelemetry SDK ---------------------------------------------------------------------------


def _sdk(name: str) -> Any:
    from ..exceptions import ConfigError

    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigError(
            f"--exporter needs the OpenTelemetry SDK ({name} is not importable)",
            fixes=[
                "install the optional extra: pip install -e '.[otel]' (opentelemetry-api, opentelemetry-sdk)",
                "or print OTLP JSON instead: agentreplay export-otel CASSETTE > spans.json",
            ],
        ) from None


def make_exporter(name: str, *, endpoint: str | None = None) -> Any:
    """``console`` (the SDK's ConsoleSpanExporter) or ``otlp`` (OTLP/HTTP; honours OTEL_EXPORTER_* env)."""
    if name == "console":
        return _sdk("opentelemetry.sdk.trace.export").ConsoleSpanExporter()
    module = _sdk("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    return module.OTLPSpanExporter(endpoint=endpoint) if endpoint else module.OTLPSpanExporter()


def sdk_spans(
    run: RunMeta, events: Sequence[Event], *, service_name: str = "pytest-agentreplay"
) -> list[Any]:
    """The run as SDK ``ReadableSpan`` objects, ready for any ``SpanExporter``."""
    from ..core.constants import FORMAT_VERSION

    trace_api = _sdk("opentelemetry.trace")
    sdk_trace = _sdk("opentelemetry.sdk.trace")
    resources = _sdk("opentelemetry.sdk.resources")
    util = _sdk("opentelemetry.sdk.util.instrumentation")
    trace_id = int(trace_id_for(run, events), 16)
    resource = resources.Resource.create({"service.name": service_name})
    scope = util.InstrumentationScope(SCOPE_NAME, str(FORMAT_VERSION))
    kinds = {KIND_INTERNAL: trace_api.SpanKind.INTERNAL, KIND_CLIENT: trace_api.SpanKind.CLIENT}
    flags = trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED)
    out = []
    for span in run_spans(run, events):
        context = trace_api.SpanContext(trace_id, int(span.span_id, 16), is_remote=False, trace_flags=flags)
        parent = (
            trace_api.SpanContext(trace_id, int(span.parent_id, 16), is_remote=False, trace_flags=flags)
            if span.parent_id
            else None
        )
        status = (
            trace_api.Status(trace_api.StatusCode.ERROR, span.status_message or None)
            if span.status_code == STATUS_ERROR
            else trace_api.Status(trace_api.StatusCode.UNSET)
        )
        attributes = {k: (tuple(v) if isinstance(v, list) else v) for k, v in span.attributes.items()}
        span_events = [
            sdk_trace.Event(name, {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}, ns)
            for name, ns, attrs in span.events
        ]
        out.append(
            sdk_trace.ReadableSpan(
                name=span.name,
                context=context,
                parent=parent,
                resource=resource,
                attributes=attributes,
                events=span_events,
                kind=kinds[span.kind],
                status=status,
                start_time=span.start_ns,
                end_time=span.end_ns,
                instrumentation_scope=scope,
            )
        )
    return out


def export_with_sdk(
    cassette: LoadedCassette,
    exporter: str | Any,
    *,
    endpoint: str | None = None,
    service_name: str = "pytest-agentreplay",
) -> int:
    """Send the run's spans through an SDK exporter (a name or an exporter object); returns the span count."""
    from ..exceptions import AgentReplayError

    spans = sdk_spans(cassette.run, cassette.events, service_name=service_name)
    target = make_exporter(exporter, endpoint=endpoint) if isinstance(exporter, str) else exporter
    try:
        result = target.export(spans)
    finally:
        if isinstance(exporter, str):
            target.shutdown()
    name = getattr(result, "name", str(result))
    if name not in ("SUCCESS", "True"):
        raise AgentReplayError(
            f"the {exporter if isinstance(exporter, str) else type(exporter).__name__} exporter "
            f"reported {name}",
            cassette=cassette.path,
            fixes=["check the collector endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or --endpoint)"],
        )
    return len(spans)
