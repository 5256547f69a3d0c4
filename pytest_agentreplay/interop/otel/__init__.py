"""Export a recorded run as OpenTelemetry GenAI spans (built by ``spans.py``): OTLP/JSON
(:func:`cassette_to_otlp`, what ``agentreplay export-otel`` prints) or SDK ``ReadableSpan`` objects sent
through an exporter (:func:`export_with_sdk`; the optional ``otel`` extra, imported only when asked for).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...core.constants import FORMAT_VERSION
from ...core.events import Event, RunMeta
from ...exceptions import AgentReplayError, ConfigError
from .spans import KIND_CLIENT, KIND_INTERNAL, SCOPE_NAME, STATUS_ERROR, SpanData, run_spans, trace_id_for

if TYPE_CHECKING:
    from ...cassette.read import LoadedCassette


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


def cassette_to_otlp(cassette: LoadedCassette, *, service_name: str = "pytest-agentreplay") -> dict[str, Any]:
    trace_id = trace_id_for(cassette.run, cassette.events)
    spans = run_spans(cassette.run, cassette.events)
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


# -- through the OpenTelemetry SDK ----------------------------------------------------------------------


def _sdk(name: str) -> Any:
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
    trace_api = _sdk("opentelemetry.trace")
    sdk_trace = _sdk("opentelemetry.sdk.trace")
    resources = _sdk("opentelemetry.sdk.resources")
    util = _sdk("opentelemetry.sdk.util.instrumentation")
    trace_id = int(trace_id_for(run, events), 16)
    resource = resources.Resource.create({"service.name": service_name})
    scope = util.InstrumentationScope(SCOPE_NAME, str(FORMAT_VERSION))
    kinds = {KIND_INTERNAL: trace_api.SpanKind.INTERNAL, KIND_CLIENT: trace_api.SpanKind.CLIENT}
    flags = trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED)

    def context(span_id: str) -> Any:
        return trace_api.SpanContext(trace_id, int(span_id, 16), is_remote=False, trace_flags=flags)

    def tupled(attributes: dict[str, Any]) -> dict[str, Any]:  # the SDK's attribute values are not lists
        return {k: (tuple(v) if isinstance(v, list) else v) for k, v in attributes.items()}

    out = []
    for span in run_spans(run, events):
        status = (
            trace_api.Status(trace_api.StatusCode.ERROR, span.status_message or None)
            if span.status_code == STATUS_ERROR
            else trace_api.Status(trace_api.StatusCode.UNSET)
        )
        out.append(
            sdk_trace.ReadableSpan(
                name=span.name,
                context=context(span.span_id),
                parent=context(span.parent_id) if span.parent_id else None,
                resource=resource,
                attributes=tupled(span.attributes),
                events=[sdk_trace.Event(name, tupled(attrs), ns) for name, ns, attrs in span.events],
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
    """Send the run's spans through an SDK exporter (a name or an object); returns the span count."""
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
