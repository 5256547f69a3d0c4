"""The ``agentreplay`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .exceptions import AgentReplayError


def _cmd_schema(args: argparse.Namespace) -> int:
    from .canonical import dumps_pretty
    from .events import cassette_json_schema

    sys.stdout.write(dumps_pretty(cassette_json_schema()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentreplay",
        description="Inspect, verify and convert pytest-agentreplay cassettes.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    schema = sub.add_parser(
        "schema",
        help="print the JSON Schema of the cassette format",
        description="Print the JSON Schema of the current cassette format.",
        epilog="example: agentreplay schema > cassette.schema.json",
    )
    schema.set_defaults(func=_cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except AgentReplayError as exc:
        sys.stderr.write(f"agentreplay {args.command}: {exc}\n")
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
