"""Export a recorded run as OpenTelemetry spans following the GenAI semantic conventions: ``spans.py``
builds them, ``otlp.py`` writes OTLP/JSON (``agentreplay export-otel``), ``sdk.py`` sends them through an
SDK exporter (the optional ``otel`` extra, imported only then).
"""

from __future__ import annotations

from .otlp import cassette_to_otlp
from .sdk import export_with_sdk

__all__ = ["cassette_to_otlp", "export_with_sdk"]
