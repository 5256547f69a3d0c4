"""Export a recorded run as OpenTelemetry spans following the GenAI semantic conventions.

This folder owns:

- ``spans.py``: a run's history -> spans (``SpanData``), the span layout and the deterministic ids;
- ``otlp.py``: those spans as an OTLP/JSON ``ExportTraceServiceRequest`` (``agentreplay export-otel``);
- ``sdk.py``: the same spans as OpenTelemetry SDK ``ReadableSpan`` objects, sent through an SDK exporter
  (``agentreplay export-otel --exporter``; needs the optional ``otel`` extra, imported only then).
"""

from __future__ import annotations

from .otlp import cassette_to_otlp
from .sdk import export_with_sdk

__all__ = ["cassette_to_otlp", "export_with_sdk"]
