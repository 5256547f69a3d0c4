"""``agentreplay schema``: the JSON Schema of the cassette format, or of the JSON drift report."""

from __future__ import annotations

import argparse
import sys

from ..core.canonical import dumps_pretty
from ..report import report_json_schema
from .common import EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.report:
        sys.stdout.write(dumps_pretty(report_json_schema()))
        return EXIT_OK
    # heavy: pydantic builds the records; every command's module is imported to parse the arguments, and
    # `agentreplay textconv` (git's diff driver, run per file) must not pay for it.
    from ..core.events import cassette_json_schema

    sys.stdout.write(dumps_pretty(cassette_json_schema()))
    return EXIT_OK
