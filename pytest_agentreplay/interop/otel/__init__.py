"""Export a recorded run as OpenTelemetry spans following the GenAI semantic conventions.

This folder owns:

- ``spans.py``: a run's history -> spans (``SpanData``), the span layout and the deterministic ids;
- ``otlp.py``: those spans as an OTLP/JSON ``ExportTraceServiceRequest`` (``agentreplay export-otel``);
- ``sdk.py``: the same spans as OpenTelemetry SDK ``ReadableSpan`` objects, sent through an SDK exporter
  (``agentreplay export-otel --exporter``; needs the optional ``otel`` extra, imported only then).
"""

from __future__ import annotations

from .otlp import any_value, cassette_to_otlp, key_values, run_to_otlp
from .sdk import export_with_sdk, make_exporter, sdk_spans
from .spans import (
    KIND_CLIENT,
    KIND_INTERNAL,
    SCOPE_NAME,
    STATUS_ERROR,
    STATUS_UNSET,
    SpanData,
    run_spans,
    trace_id_for,
    ts_to_ns,
)

__all__ = [
    "KIND_CLIENT",
    "KIND_INTERNAL",
    "SCOPE_NAME",
    "STATUS_ERROR",
    "STATUS_UNSET",
    "SpanData",
    "any_value",
    "cassette_to_otlp",
    "export_with_sdk",
    "key_values",
    "make_exporter",
    "run_spans",
    "run_to_otlp",
    "sdk_spans",
    "trace_id_for",
    "ts_to_ns",
]
