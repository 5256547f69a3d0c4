"""The ``agentreplay`` argument parser: one subcommand per command module, each bound to its ``run``."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence

from ..core.constants import REPLAY_MODES

DATA_CLASS_CHOICES = ("public", "internal", "personal")


def _command(module: str, function: str = "run") -> Callable[[argparse.Namespace], int]:
    """The ``func`` of a subcommand: its module is imported when the command runs, not when the parser is
    built (together the modules load the cassette reader, the diff, the report viewer and replay's audit,
    ~0.15 s, and git runs ``textconv`` once per changed cassette)."""

    def run(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(f"{__package__}.{module}"), function)(args))

    return run


def _sub(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    description: str,
    examples: Sequence[str],
    module: str | None = None,
) -> argparse.ArgumentParser:
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if module is None:
        parser.set_defaults(func=_command(name.replace("-", "_")))
    else:
        parser.set_defaults(func=_command(module, name))
    return parser


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

    show = _sub(
        sub,
        "show",
        "render a recorded run: the audit view",
        "Render a cassette as a timeline with its audit (hash chain, receipts, blobs, secrets). "
        "Exit 1 when the audit finds problems.",
        [
            "agentreplay show cassettes/tests/test_agent/test_refund.json",
            "agentreplay show run.json --html run.html",
            "agentreplay show run.json --json | jq '.events[].type'",
        ],
    )
    show.add_argument("cassette", metavar="CASSETTE")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--html", metavar="OUT", help="write the self-contained HTML run viewer to OUT")
    fmt.add_argument("--json", action="store_true", help="print the run, its events and problems as JSON")
    show.add_argument(
        "--drift",
        metavar="JSON",
        help="with --html: a drift result (JSON, e.g. from `agentreplay diff --json`)",
    )

    diff = _sub(
        sub,
        "diff",
        "drift between two cassettes under the project's rules",
        "Compare the history of cassette B with cassette A (the recorded one) under the diff rules of "
        "[tool.agentreplay] in ./pyproject.toml. Exit 1 on regressions.",
        [
            "agentreplay diff old/test_refund.json cassettes/tests/test_agent/test_refund.json",
            "agentreplay diff a.json b.json --mode model-comparison --json",
        ],
    )
    diff.add_argument("a", metavar="A", help="the recorded (expected) cassette")
    diff.add_argument("b", metavar="B", help="the cassette compared with it")
    diff.add_argument(
        "--mode", choices=REPLAY_MODES, help="replay mode whose default rules apply (default regression)"
    )
    diff.add_argument("--json", action="store_true", help="print the drift result as JSON")

    verify = _sub(
        sub,
        "verify",
        "check cassettes: schema, event digests, receipts, blobs, secrets",
        "Verify cassette files or every cassette under folders (recursively): the schema, the event digests "
        "(edits, reordering, insertion, truncation; the first bad event is named), committed effects with "
        "payload blobs present and decodable to their recorded bytes, and no secret-shaped value: "
        "problems, exit 1. Committed writes without a receipt or an idempotency key are warnings (advice: "
        "exit 0) unless --strict.",
        ["agentreplay verify cassettes/", "agentreplay verify cassettes/tests/test_agent/test_refund.json"],
    )
    verify.add_argument("paths", nargs="+", metavar="PATH")
    verify.add_argument("-v", "--verbose", action="store_true", help="also list cassettes without problems")
    verify.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) on advice too: committed writes without a receipt or an idempotency key",
    )

    migrate = _sub(
        sub,
        "migrate",
        "rewrite cassettes in the current format version",
        "Upgrade cassettes written in an older format version to the current one, atomically (a file is "
        "validated fully before it is replaced). Exit 2 when a file cannot be read.",
        ["agentreplay migrate cassettes/", "agentreplay migrate cassettes/ --dry-run"],
    )
    migrate.add_argument("paths", nargs="+", metavar="PATH")
    migrate.add_argument("--dry-run", action="store_true", help="list what would change, write nothing")

    prune = _sub(
        sub,
        "prune",
        "remove payload blobs by data class and age",
        "Remove payload blobs from the blob store. The store is shared by every cassette below the folder "
        "holding it, so all of those are read (any format version), whatever folder is given; if one cannot "
        "be read, nothing is removed. A blob's data class comes from the references to it in the cassettes; "
        "a blob a cassette still references is kept unless --include-referenced is given, and a blob a "
        "cassette outside the given folder references is always kept. Unreferenced blobs have no data "
        "class: they are removed by age alone.",
        [
            "agentreplay prune --dry-run",
            "agentreplay prune --older-than 30",
            "agentreplay prune --data-class personal --older-than 90 --include-referenced",
        ],
    )
    prune.add_argument(
        "--cassette-dir", metavar="DIR", help="cassette folder (default: [tool.agentreplay] or ./cassettes)"
    )
    prune.add_argument(
        "--data-class",
        action="append",
        choices=DATA_CLASS_CHOICES,
        help="only referenced blobs of this data class (repeatable)",
    )
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="only blobs older than DAYS days")
    prune.add_argument(
        "--include-referenced", action="store_true", help="also remove blobs cassettes still reference"
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")

    vcr = _sub(
        sub,
        "import-vcr",
        "convert vcrpy / pytest-recording cassettes",
        "Convert vcrpy and pytest-recording cassettes (YAML or JSON; gzip, base64 and SSE bodies) into "
        "this format: one cassette per input file, each exchange classified as a model call, a read or "
        "a write effect, redacted and saved with its blobs. A file in pytest-recording's layout "
        "(<test dir>/cassettes/<module>/[<Class>.]<test>.yaml) is written where the plugin looks for its "
        "test (<out>/<test dir>/<module>/[<Class>.]<test>.json) and records the test's node id; every "
        "imported run is labelled source=vcr, so the rules for imported recordings apply.",
        [
            "agentreplay import-vcr tests/cassettes/ --out cassettes",
            "agentreplay import-vcr tests/cassettes/ --out imported --layout mirror",
            "agentreplay import-vcr tests/cassettes/ --layout '{module_path}/{name}.json'",
        ],
    )
    vcr.add_argument("paths", nargs="+", metavar="PATH")
    vcr.add_argument(
        "--out",
        metavar="DIR",
        help="folder to write the converted cassettes to "
        "(default: [tool.agentreplay] cassette_dir or ./cassettes)",
    )
    vcr.add_argument(
        "--layout",
        default="test",
        metavar="LAYOUT",
        help="test (default: where the plugin looks for each file's test), mirror (the input's relative "
        "paths), or a template with {module_path} {module} {cls} {test} {name} {stem} {relpath}",
    )

    otel = _sub(
        sub,
        "export-otel",
        "export a run as OpenTelemetry spans (gen_ai.* conventions)",
        "Print the run as OTLP JSON (resourceSpans) following the OpenTelemetry GenAI semantic conventions, "
        "or send it through an OpenTelemetry SDK exporter with --exporter (needs the otel extra).",
        [
            "agentreplay export-otel cassettes/tests/test_agent/test_refund.json > spans.json",
            "agentreplay export-otel run.json --exporter otlp --endpoint http://localhost:4318/v1/traces",
        ],
    )
    otel.add_argument("cassette", metavar="CASSETTE")
    otel.add_argument(
        "--exporter", choices=("console", "otlp"), help="export through an OpenTelemetry SDK exporter"
    )
    otel.add_argument("--endpoint", metavar="URL", help="with --exporter otlp: the collector endpoint")
    otel.add_argument("--service-name", default="pytest-agentreplay", help="service.name resource attribute")

    textconv = _sub(
        sub,
        "textconv",
        "print a cassette with its blob-stored payloads inlined (a git diff driver)",
        "Print the cassette as canonical JSON with every payload the blob store holds inlined next to its "
        "sha256, so `git diff` shows what changed inside a payload, not only a new hash. Set it up once "
        "per clone with `agentreplay git-setup`.",
        ["agentreplay textconv cassettes/tests/test_agent/test_refund.json"],
    )
    textconv.add_argument("cassette", metavar="CASSETTE")
    textconv.add_argument(
        "--blob-dir", metavar="DIR", help="the blob store (default: the cassette folder's .blobs)"
    )

    git_setup = _sub(
        sub,
        "git-setup",
        "route cassette diffs through textconv (git config and .gitattributes), once per clone",
        "Set git's diff driver for cassettes in this clone (`git config diff.agentreplay.textconv` with this "
        "interpreter's absolute path, so it works from any shell, virtualenv activated or not) and add "
        "`<cassette dir>/**/*.json diff=agentreplay` to the repository's .gitattributes. Idempotent.",
        ["agentreplay git-setup", "agentreplay git-setup --cassette-dir tests/cassettes"],
    )
    git_setup.add_argument("--repo", default=".", metavar="PATH", help="a folder inside the repository")
    git_setup.add_argument(
        "--cassette-dir", default="cassettes", metavar="DIR", help="the cassette folder, from the repo's top"
    )

    review = _sub(
        sub,
        "review",
        "go through pending drift one test at a time: accept, reject or skip",
        "Show each pending drift (a drifting test's <cassette>.pending.json) as its failure did, then the "
        "cassette lines accepting would change, and read one key: a accept, r reject, s skip, q quit. "
        "Accepting writes what --agentreplay-update would have written for that test.",
        [
            "agentreplay review",
            "agentreplay review cassettes/test_agent/ -k refund",
            "agentreplay review --from ci-artifacts/  # pending files downloaded from CI",
        ],
        module="review",
    )
    accept = _sub(
        sub,
        "accept",
        "accept pending drift without asking",
        "Write each pending drift into its cassette (what --agentreplay-update would have written) and "
        "remove the pending file. Refused when the cassette changed since the drift was found.",
        ["agentreplay accept cassettes/test_agent/test_refund.pending.json", "agentreplay accept --all"],
        module="review",
    )
    reject = _sub(
        sub,
        "reject",
        "reject pending drift without asking",
        "Remove each pending drift file; its cassette stays as it is.",
        ["agentreplay reject cassettes/test_agent/test_refund.json", "agentreplay reject --all"],
        module="review",
    )
    for command in (review, accept, reject):
        command.add_argument(
            "paths", nargs="*", metavar="PATH", help="pending files, their cassettes, or folders (default .)"
        )
        command.add_argument("-k", metavar="EXPR", help="only tests whose node id matches, as pytest -k")
        command.add_argument(
            "--from",
            dest="from_dir",
            metavar="DIR",
            help="pending files downloaded from CI, for the cassettes under the current folder",
        )
    for command in (accept, reject):
        command.add_argument("--all", action="store_true", help="every pending file under PATH (default .)")

    schema = _sub(
        sub,
        "schema",
        "print the JSON Schema of the cassette format",
        "Print the JSON Schema of the current cassette format, or with --report of the JSON drift report.",
        ["agentreplay schema > cassette.schema.json", "agentreplay schema --report > report.schema.json"],
    )
    schema.add_argument("--report", action="store_true", help="the schema of the JSON drift report instead")
    return parser
