"""The spans of a run as OTLP/JSON: an ``ExportTraceServiceRequest`` in the protobuf JSON mapping, what
``agentreplay export-otel`` prints and any OTLP/HTTP collector accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.constants import FORMAT_VERSION
from .spans import SCOPE_NAME, SpanData, run_spans, trace_id_for

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
    """Attributes as an OTLP ``KeyValue`` list."""
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
    """An OTLP/JSON ``ExportTraceServiceRequest`` holding the spans of a cassette's run."""
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
