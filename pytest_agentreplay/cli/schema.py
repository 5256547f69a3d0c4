"""``agentreplay schema``: the JSON Schema of the cassette format, or of the JSON drift report."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK


def run(args: argparse.Namespace) -> int:
    from ..core.canonical import dumps_pretty

    if args.report:
        from ..report.json_report import report_json_schema

        sys.stdout.write(dumps_pretty(report_json_schema()))
        return EXIT_OK
    from ..core.events import cassette_json_schema

    sys.stdout.write(dumps_pretty(cassette_json_schema()))
    return EXIT_OK
