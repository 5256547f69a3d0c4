"""``agentreplay export-otel``: a recorded run as OpenTelemetry spans (OTLP JSON, or through an exporter)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cassette.read import load_cassette
from ..interop.otel import cassette_to_otlp, export_with_sdk
from .common import EXIT_OK, err


def run(args: argparse.Namespace) -> int:
    loaded = load_cassette(Path(args.cassette))
    if args.exporter:
        count = export_with_sdk(loaded, args.exporter, endpoint=args.endpoint)
        err(f"exported {count} span(s) through the {args.exporter} exporter")
        return EXIT_OK
    sys.stdout.write(json.dumps(cassette_to_otlp(loaded, service_name=args.service_name), indent=2) + "\n")
    return EXIT_OK
