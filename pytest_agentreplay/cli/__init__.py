"""The ``agentreplay`` command line: its parser, built from one table of commands (each one's help,
description, examples and arguments, bound to the function that runs it), and :func:`main`.

Exit codes: 0 ok; 1 problems found (drift with regressions, verification problems, audit problems);
2 usage error or unreadable input. Errors are this package's messages (headline, evidence, location,
numbered fixes), never tracebacks.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..core.constants import REPLAY_MODES
from ..exceptions import AgentReplayError
from .common import EXIT_OK, EXIT_USAGE, err

__all__ = ["build_parser", "main"]


Argument = tuple[tuple[str, ...], dict[str, Any]]


def _arg(*flags: str, **options: Any) -> Argument:
    """An ``add_argument`` call; ``exclusive=True`` puts it in the command's mutually exclusive group."""
    return flags, options


def _flag(*flags: str, **options: Any) -> Argument:
    return flags, {"action": "store_true", **options}


# help, description, examples, arguments, and what runs it: ``module:function`` (as entry points name one).
_Command = tuple[str, str, tuple[str, ...], tuple[Argument, ...], str]


def _command(
    help: str, description: str, examples: tuple[str, ...], *arguments: Argument, run: str
) -> _Command:
    return help, description, examples, arguments, run


_PATHS = _arg("paths", nargs="+", metavar="PATH")
_CASSETTE = _arg("cassette", metavar="CASSETTE")
_PENDING = (
    _arg("paths", nargs="*", metavar="PATH", help="pending files, their cassettes, or folders (default .)"),
    _arg("-k", metavar="EXPR", help="only tests whose node id matches, as pytest -k"),
    _arg(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="pending files downloaded from CI, for the cassettes under the current folder",
    ),
)
_ALL = _flag("--all", help="every pending file under PATH (default .)")

COMMANDS: dict[str, _Command] = {
    "show": _command(
        "render a recorded run: the audit view",
        "Render a cassette as a timeline with its audit (hash chain, receipts, blobs, secrets). "
        "Exit 1 when the audit finds problems.",
        (
            "agentreplay show cassettes/tests/test_agent/test_refund.json",
            "agentreplay show run.json --html run.html",
            "agentreplay show run.json --json | jq '.events[].type'",
        ),
        _CASSETTE,
        _arg("--html", metavar="OUT", help="write the self-contained HTML run viewer to OUT", exclusive=True),
        _flag("--json", help="print the run, its events and problems as JSON", exclusive=True),
        _arg(
            "--drift",
            metavar="JSON",
            help="with --html: a drift result (JSON, e.g. from `agentreplay diff --json`)",
        ),
        run="view:show",
    ),
    "diff": _command(
        "drift between two cassettes under the project's rules",
        "Compare the history of cassette B with cassette A (the recorded one) under the diff rules of "
        "[tool.agentreplay] in ./pyproject.toml. Exit 1 on regressions.",
        (
            "agentreplay diff old/test_refund.json cassettes/tests/test_agent/test_refund.json",
            "agentreplay diff a.json b.json --mode model-comparison --json",
        ),
        _arg("a", metavar="A", help="the recorded (expected) cassette"),
        _arg("b", metavar="B", help="the cassette compared with it"),
        _arg(
            "--mode", choices=REPLAY_MODES, help="replay mode whose default rules apply (default regression)"
        ),
        _flag("--json", help="print the drift result as JSON"),
        run="view:diff",
    ),
    "verify": _command(
        "check cassettes: schema, event digests, receipts, blobs, secrets",
        "Verify cassette files or every cassette under folders (recursively): the schema, the event digests "
        "(edits, reordering, insertion, truncation; the first bad event is named), committed effects with "
        "payload blobs present and decodable to their recorded bytes, and no secret-shaped value: "
        "problems, exit 1. Committed writes without a receipt or an idempotency key are warnings (advice: "
        "exit 0) unless --strict.",
        ("agentreplay verify cassettes/", "agentreplay verify cassettes/tests/test_agent/test_refund.json"),
        _PATHS,
        _flag("-v", "--verbose", help="also list cassettes without problems"),
        _flag(
            "--strict",
            help="fail (exit 1) on advice too: committed writes without a receipt or an idempotency key",
        ),
        run="cassettes:verify",
    ),
    "migrate": _command(
        "rewrite cassettes in the current format version",
        "Upgrade cassettes written in an older format version to the current one, atomically (a file is "
        "validated fully before it is replaced). Exit 2 when a file cannot be read.",
        ("agentreplay migrate cassettes/", "agentreplay migrate cassettes/ --dry-run"),
        _PATHS,
        _flag("--dry-run", help="list what would change, write nothing"),
        run="cassettes:migrate",
    ),
    "prune": _command(
        "remove payload blobs by data class and age",
        "Remove payload blobs from the blob store. The store is shared by every cassette below the folder "
        "holding it, so all of those are read (any format version), whatever folder is given; if one cannot "
        "be read, nothing is removed. A blob's data class comes from the references to it in the cassettes; "
        "a blob a cassette still references is kept unless --include-referenced is given, and a blob a "
        "cassette outside the given folder references is always kept. Unreferenced blobs have no data "
        "class: they are removed by age alone.",
        (
            "agentreplay prune --dry-run",
            "agentreplay prune --older-than 30",
            "agentreplay prune --data-class personal --older-than 90 --include-referenced",
        ),
        _arg(
            "--cassette-dir",
            metavar="DIR",
            help="cassette folder (default: [tool.agentreplay] or ./cassettes)",
        ),
        _arg(
            "--data-class",
            action="append",
            choices=("public", "internal", "personal"),
            help="only referenced blobs of this data class (repeatable)",
        ),
        _arg("--older-than", type=float, metavar="DAYS", help="only blobs older than DAYS days"),
        _flag("--include-referenced", help="also remove blobs cassettes still reference"),
        _flag("--dry-run", help="list what would be removed, remove nothing"),
        run="cassettes:prune",
    ),
    "import-vcr": _command(
        "convert vcrpy / pytest-recording cassettes",
        "Convert vcrpy and pytest-recording cassettes (YAML or JSON; gzip, base64 and SSE bodies) into "
        "this format: one cassette per input file, each exchange classified as a model call, a read or "
        "a write effect, redacted and saved with its blobs. A file in pytest-recording's layout "
        "(<test dir>/cassettes/<module>/[<Class>.]<test>.yaml) is written where the plugin looks for its "
        "test (<out>/<test dir>/<module>/[<Class>.]<test>.json) and records the test's node id; every "
        "imported run is labelled source=vcr, so the rules for imported recordings apply.",
        (
            "agentreplay import-vcr tests/cassettes/ --out cassettes",
            "agentreplay import-vcr tests/cassettes/ --out imported --layout mirror",
            "agentreplay import-vcr tests/cassettes/ --layout '{module_path}/{name}.json'",
        ),
        _PATHS,
        _arg(
            "--out",
            metavar="DIR",
            help="folder to write the converted cassettes to "
            "(default: [tool.agentreplay] cassette_dir or ./cassettes)",
        ),
        _arg(
            "--layout",
            default="test",
            metavar="LAYOUT",
            help="test (default: where the plugin looks for each file's test), mirror (the input's relative "
            "paths), or a template with {module_path} {module} {cls} {test} {name} {stem} {relpath}",
        ),
        run="cassettes:import_vcr",
    ),
    "export-otel": _command(
        "export a run as OpenTelemetry spans (gen_ai.* conventions)",
        "Print the run as OTLP JSON (resourceSpans) following the OpenTelemetry GenAI semantic conventions, "
        "or send it through an OpenTelemetry SDK exporter with --exporter (needs the otel extra).",
        (
            "agentreplay export-otel cassettes/tests/test_agent/test_refund.json > spans.json",
            "agentreplay export-otel run.json --exporter otlp --endpoint http://localhost:4318/v1/traces",
        ),
        _CASSETTE,
        _arg("--exporter", choices=("console", "otlp"), help="export through an OpenTelemetry SDK exporter"),
        _arg("--endpoint", metavar="URL", help="with --exporter otlp: the collector endpoint"),
        _arg("--service-name", default="pytest-agentreplay", help="service.name resource attribute"),
        run="view:export_otel",
    ),
    "textconv": _command(
        "print a cassette with its blob-stored payloads inlined (a git diff driver)",
        "Print the cassette as canonical JSON with every payload the blob store holds inlined next to its "
        "sha256, so `git diff` shows what changed inside a payload, not only a new hash. Set it up once "
        "per clone with `agentreplay git-setup`.",
        ("agentreplay textconv cassettes/tests/test_agent/test_refund.json",),
        _CASSETTE,
        _arg("--blob-dir", metavar="DIR", help="the blob store (default: the cassette folder's .blobs)"),
        run="git:textconv",
    ),
    "git-setup": _command(
        "route cassette diffs through textconv (git config and .gitattributes), once per clone",
        "Set git's diff driver for cassettes in this clone (`git config diff.agentreplay.textconv` with this "
        "interpreter's absolute path, so it works from any shell, virtualenv activated or not) and add "
        "`<cassette dir>/**/*.json diff=agentreplay` to the repository's .gitattributes. Idempotent.",
        ("agentreplay git-setup", "agentreplay git-setup --cassette-dir tests/cassettes"),
        _arg("--repo", default=".", metavar="PATH", help="a folder inside the repository"),
        _arg(
            "--cassette-dir",
            default="cassettes",
            metavar="DIR",
            help="the cassette folder, from the repo's top",
        ),
        run="git:git_setup",
    ),
    "review": _command(
        "go through pending drift one test at a time: accept, reject or skip",
        "Show each pending drift (a drifting test's <cassette>.pending.json) as its failure did, then the "
        "cassette lines accepting would change, and read one key: a accept, r reject, s skip, q quit. "
        "Accepting writes what --agentreplay-update would have written for that test.",
        (
            "agentreplay review",
            "agentreplay review cassettes/test_agent/ -k refund",
            "agentreplay review --from ci-artifacts/  # pending files downloaded from CI",
        ),
        *_PENDING,
        run="review:review",
    ),
    "accept": _command(
        "accept pending drift without asking",
        "Write each pending drift into its cassette (what --agentreplay-update would have written) and "
        "remove the pending file. Refused when the cassette changed since the drift was found.",
        ("agentreplay accept cassettes/test_agent/test_refund.pending.json", "agentreplay accept --all"),
        *_PENDING,
        _ALL,
        run="review:decide",
    ),
    "reject": _command(
        "reject pending drift without asking",
        "Remove each pending drift file; its cassette stays as it is.",
        ("agentreplay reject cassettes/test_agent/test_refund.json", "agentreplay reject --all"),
        *_PENDING,
        _ALL,
        run="review:decide",
    ),
    "schema": _command(
        "print the JSON Schema of the cassette format",
        "Print the JSON Schema of the current cassette format, or with --report of the JSON drift report.",
        ("agentreplay schema > cassette.schema.json", "agentreplay schema --report > report.schema.json"),
        _flag("--report", help="the schema of the JSON drift report instead"),
        run="view:schema",
    ),
}


def _run(module: str, function: str, args: argparse.Namespace) -> int:
    # The command's module is imported when it runs, not when the parser is built: together the modules
    # load the cassette reader, the diff, the report viewer and replay's audit (~0.15 s), and git runs
    # ``textconv`` once per changed cassette.
    return int(getattr(importlib.import_module(f"{__package__}.{module}"), function)(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentreplay",
        description="Inspect, verify and convert pytest-agentreplay cassettes.",
        epilog=(
            "exit codes: 0 ok, 1 problems found (drift, verification or audit problems), "
            "2 usage error or unreadable input\nexample: agentreplay verify cassettes/"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help, description, examples, arguments, run) in COMMANDS.items():
        one = sub.add_parser(
            name,
            help=help,
            description=description,
            epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module, function = run.split(":")
        one.set_defaults(func=partial(_run, module, function))
        group = None
        for flags, options in arguments:
            if options.get("exclusive"):
                group = group or one.add_mutually_exclusive_group()
                group.add_argument(*flags, **{k: v for k, v in options.items() if k != "exclusive"})
            else:
                one.add_argument(*flags, **options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # `agentreplay show x | head`: stop quietly, and keep Python from complaining at exit.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (AgentReplayError, OSError) as exc:
        err(f"agentreplay {args.command}: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("agentreplay: interrupted")
        return 130
