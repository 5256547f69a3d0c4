"""The ``agentreplay`` command line: show, diff, verify, migrate, prune, import-vcr, export-otel, textconv,
schema.

Exit codes: 0 ok; 1 problems found (drift with regressions, verification problems, audit problems);
2 usage error or unreadable input. Errors are this package's messages (headline, evidence, location,
numbered fixes), never tracebacks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.constants import BLOB_DIR_NAME, DEFAULT_CASSETTE_DIR, FORMAT_NAME, REPLAY_MODES
from .exceptions import AgentReplayError, CassetteError, CassetteIntegrityError, ConfigError

if TYPE_CHECKING:
    from .cassette.store import LoadedCassette

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
DATA_CLASS_CHOICES = ("public", "internal", "personal")


class UsageError(AgentReplayError):
    """Bad command-line input (a path that does not exist, a bad value)."""


def _out(text: str = "") -> None:
    sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))


def _err(text: str) -> None:
    sys.stderr.write(text + ("\n" if not text.endswith("\n") else ""))


# -- helpers -------------------------------------------------------------------------------------


def _is_hidden_store(path: Path) -> bool:
    return BLOB_DIR_NAME in path.parts or any(part.startswith(".agentreplay-tmp-") for part in path.parts)


def iter_files(paths: Sequence[str], suffixes: tuple[str, ...], *, command: str) -> list[Path]:
    """Files given directly, plus files with one of ``suffixes`` found recursively in given directories."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file() or (os.path.lexists(path) and not path.is_dir()):
            # A FIFO, device or dangling symlink named explicitly: the command reports why it cannot read it.
            found.append(path)
        elif path.is_dir():
            for child in sorted(path.rglob("*")):
                if (
                    child.is_file()
                    and child.suffix.lower() in suffixes
                    and not _is_hidden_store(child.relative_to(path))
                ):
                    found.append(child)
        else:
            raise UsageError(
                f"{raw}: no such file or directory",
                fixes=[f"check the path; example: agentreplay {command} cassettes/"],
            )
    return found


def _project_table() -> dict[str, Any]:
    from .core.config import read_pyproject_table

    return read_pyproject_table(Path.cwd())


def _load_unchecked(path: Path) -> LoadedCassette | None:
    """Load a cassette whose integrity check fails, so the other checks can still run on it."""
    from pydantic import ValidationError

    from .cassette.blobs import BlobStore
    from .cassette.migrations import migrate_document
    from .cassette.store import LoadedCassette, decode_stored_events, default_blob_dir, read_cassette_bytes
    from .core.constants import FORMAT_VERSION
    from .core.events import CASSETTE_ADAPTER

    store = BlobStore(default_blob_dir(path))
    try:
        raw = json.loads(read_cassette_bytes(path))
        if raw.get("version") != FORMAT_VERSION:
            raw = migrate_document(raw, str(path))
        doc = CASSETTE_ADAPTER.validate_python({**raw, "events": decode_stored_events(raw, path, store)})
    except (
        OSError,
        ValueError,
        ValidationError,
        AgentReplayError,
        AttributeError,
        KeyError,
        TypeError,
        RecursionError,
    ):
        return None
    return LoadedCassette(path, doc.run, doc.events, store, document=raw)


def _error_lines(exc: AgentReplayError) -> list[str]:
    lines = [exc.headline]
    lines.extend(exc.evidence)
    if exc.place:
        lines[0] += f" (at {exc.place})"
    return lines


def cassette_problems(path: Path) -> list[str]:
    """Every problem of one cassette: schema, event digests, effects (receipt, key), blobs, secrets, and
    whatever replay would trip on (the same load, payload resolution and decoding replay runs)."""
    from .cassette.store import load_cassette
    from .cassette.validation import replay_problems
    from .replay.audit import audit_problems

    try:
        loaded = load_cassette(path)
    except CassetteIntegrityError as exc:
        unchecked = _load_unchecked(path)
        if unchecked is None:
            return _error_lines(exc)
        loaded = unchecked
    except CassetteError as exc:
        return _error_lines(exc)
    problems = audit_problems(loaded)
    seen = set(problems)
    for problem in replay_problems(loaded):
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    return problems


def _load_for_view(path: Path) -> tuple[LoadedCassette, list[str]]:
    """A cassette to render and its audit problems; a broken chain is a problem, not a failure."""
    from .cassette.store import load_cassette
    from .replay.audit import audit_problems

    try:
        loaded = load_cassette(path, mode="audit")
    except CassetteIntegrityError:
        unchecked = _load_unchecked(path)
        if unchecked is None:
            raise
        loaded = unchecked
    return loaded, audit_problems(loaded)


# -- show ----------------------------------------------------------------------------------------


def _cmd_show(args: argparse.Namespace) -> int:
    from .cassette.store import run_to_dict
    from .core.events import event_to_dict

    path = Path(args.cassette)
    loaded, problems = _load_for_view(path)
    if args.html:
        from .report.viewer import render_cassette_page, write_html

        drift = None
        if args.drift:
            drift = _read_json(Path(args.drift), "drift result")
            if isinstance(drift, Mapping) and isinstance(drift.get("drift"), Mapping):
                drift = drift["drift"]
        write_html(Path(args.html), render_cassette_page(loaded, drift=drift, problems=problems))
        _out(f"wrote {args.html} ({len(loaded.events)} events, {len(problems)} audit problem(s))")
    elif args.json:
        from .core.canonical import dumps_pretty

        doc = {
            "cassette": str(path),
            "run": run_to_dict(loaded.run),
            "events": [event_to_dict(e) for e in loaded.events],
            "problems": problems,
        }
        sys.stdout.write(dumps_pretty(doc))
    else:
        from .report.timeline import render_timeline

        _out(render_timeline(loaded.run, loaded.events, title=f"{path} (run {loaded.run.run_id})"))
        _out()
        if problems:
            _out(f"audit: {len(problems)} problem(s)")
            for problem in problems:
                _out(f"  - {problem}")
        else:
            _out(
                "audit: ok (hash chain intact, committed effects have receipts and keys, "
                "blobs present, no secrets)"
            )
    return EXIT_PROBLEMS if problems else EXIT_OK


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the {what} {path}: {exc}", fixes=["pass a JSON file"]) from None


# -- diff ----------------------------------------------------------------------------------------


def _cmd_diff(args: argparse.Namespace) -> int:
    from .cassette.store import load_cassette
    from .core.events import PayloadRef
    from .diff import RuleSet, compare_histories, render_drift

    table = _project_table()
    mode = args.mode or str(table.get("mode") or "regression")
    if mode not in REPLAY_MODES:
        raise ConfigError(
            f"invalid replay mode {mode!r} in pyproject.toml", fixes=[f"use one of {REPLAY_MODES}"]
        )
    recorded = load_cassette(Path(args.a), mode=mode)
    replayed = load_cassette(Path(args.b), mode=mode)
    from .diff.rules import is_imported

    rules = RuleSet.from_layers(mode, project=table.get("rules"), imported=is_imported(recorded.run.labels))

    def resolve(ref: Mapping[str, Any]) -> Any:
        model = PayloadRef.model_validate(dict(ref))
        if model.sha256 is None:
            return model.inline
        for side in (recorded, replayed):
            if side.blob_store.exists(model.sha256):
                return side.payload(model)
        return recorded.payload(model)

    result = compare_histories(recorded.event_dicts(), replayed.event_dicts(), rules=rules, resolve=resolve)
    if args.json:
        from .core.canonical import dumps_pretty

        sys.stdout.write(dumps_pretty(result.to_dict()))
    else:
        test = recorded.run.test or str(args.a)
        _out(render_drift(result, test=test, cassette=f"{args.a} vs {args.b}", mode=mode, update_hint=False))
    return EXIT_PROBLEMS if result.has_regressions else EXIT_OK


# -- verify --------------------------------------------------------------------------------------


def _cmd_verify(args: argparse.Namespace) -> int:
    from .cli_progress import Progress

    files = iter_files(args.paths, (".json",), command="verify")
    if not files:
        raise UsageError(
            "no cassette found in " + ", ".join(args.paths),
            fixes=["pass cassette files or the folder that holds them: agentreplay verify cassettes/"],
        )
    bad = 0
    total = 0
    with Progress(len(files), "verify") as bar:
        for path in files:
            problems = cassette_problems(path)
            bar.advance(str(path))
            if problems:
                bad += 1
                total += len(problems)
                for problem in problems:
                    _out(f"{path}: {problem}")
            elif args.verbose:
                _out(f"{path}: ok")
    if bad:
        _out(f"verify: {total} problem(s) in {bad} of {len(files)} cassette(s)")
        return EXIT_PROBLEMS
    _out(f"verify: {len(files)} cassette(s) ok")
    return EXIT_OK


# -- migrate -------------------------------------------------------------------------------------


def _cmd_migrate(args: argparse.Namespace) -> int:
    from .cassette.migrations import migrate_file
    from .cli_progress import Progress

    files = iter_files(args.paths, (".json",), command="migrate")
    changed = current = failed = 0
    verb = "would migrate" if args.dry_run else "migrated"
    with Progress(len(files), "migrate") as bar:
        for path in files:
            try:
                if migrate_file(path, dry_run=args.dry_run):
                    changed += 1
                    _out(f"{verb} {path}")
                else:
                    current += 1
            except AgentReplayError as exc:
                failed += 1
                _err(f"{path}: {exc.headline}")
            bar.advance(str(path))
    _out(f"migrate: {changed} {verb}, {current} already current, {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK


# -- prune ---------------------------------------------------------------------------------------


def _cassette_refs(path: Path) -> Iterator[tuple[str, str]]:
    """(sha256, data class) of every blob reference in a cassette file, read without validation."""
    from .cassette.store import read_cassette_bytes

    try:
        raw = json.loads(read_cassette_bytes(path))
    except (OSError, ValueError) as exc:
        raise CassetteError(
            f"cannot tell which blobs {path.name} references: it is not readable JSON ({exc})",
            cassette=path,
            fixes=[
                f"restore it from git: `git checkout -- {path}`",
                "or remove it, then prune again",
            ],
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        return
    for event in raw.get("events") or []:
        if not isinstance(event, dict):
            continue
        for name in ("input_ref", "output_ref"):
            ref = event.get(name)
            if isinstance(ref, dict) and isinstance(ref.get("sha256"), str):
                yield ref["sha256"], str(ref.get("data_class") or "internal")


def _cmd_prune(args: argparse.Namespace) -> int:
    from .cassette.blobs import BlobStore
    from .cassette.store import default_blob_dir
    from .cli_progress import Progress

    table = _project_table()
    cassette_dir = Path(args.cassette_dir or str(table.get("cassette_dir") or DEFAULT_CASSETTE_DIR))
    if not cassette_dir.is_dir():
        raise UsageError(
            f"cassette folder {cassette_dir} does not exist",
            fixes=["pass it: agentreplay prune --cassette-dir path/to/cassettes"],
        )
    if args.older_than is not None and args.older_than < 0:
        raise UsageError("--older-than must be a number of days >= 0")
    cassettes = iter_files([str(cassette_dir)], (".json",), command="prune")
    stores: dict[Path, BlobStore] = {}
    own = cassette_dir / BLOB_DIR_NAME
    if own.is_dir():
        stores[own.resolve()] = BlobStore(own)
    classes: dict[tuple[Path, str], set[str]] = {}
    users: dict[tuple[Path, str], set[str]] = {}
    for cassette in cassettes:
        root = default_blob_dir(cassette).resolve()
        store = stores.setdefault(root, BlobStore(root))
        for sha, data_class in _cassette_refs(cassette):
            try:
                shas = store.referenced(sha)
            except AgentReplayError:
                shas = {sha}
            for one in shas:
                classes.setdefault((root, one), set()).add(data_class)
                users.setdefault((root, one), set()).add(str(cassette))
    wanted = set(args.data_class or [])
    now = time.time()
    removed = kept_referenced = 0
    freed = 0
    broken: set[str] = set()
    all_blobs = [(root, store, sha) for root, store in stores.items() for sha in store.iter_shas()]
    verb = "would remove" if args.dry_run else "removed"
    with Progress(len(all_blobs), "prune") as bar:
        for root, store, sha in all_blobs:
            bar.advance(sha[:12])
            file = store.path_for(sha)
            try:
                stat = file.stat()
            except OSError:
                continue
            age_days = (now - stat.st_mtime) / 86400.0
            if args.older_than is not None and age_days < args.older_than:
                continue
            blob_classes = classes.get((root, sha))
            if blob_classes is not None:
                if wanted and not (blob_classes & wanted):
                    continue
                if not args.include_referenced:
                    kept_referenced += 1
                    continue
                reason = f"referenced, data class {'/'.join(sorted(blob_classes))}"
                broken |= users.get((root, sha), set())
            else:
                reason = "unreferenced"
            _out(f"{verb} {file} ({reason}, {age_days:.0f} day(s) old, {stat.st_size} bytes)")
            removed += 1
            freed += stat.st_size
            if not args.dry_run:
                file.unlink()
                with contextlib.suppress(OSError):
                    file.parent.rmdir()
    _out(f"prune: {removed} blob(s) {verb} ({freed} bytes)")
    if kept_referenced:
        what = f" of class {', '.join(sorted(wanted))}" if wanted else ""
        _out(
            f"kept {kept_referenced} blob(s){what} that cassettes still reference; "
            "pass --include-referenced to remove them too"
        )
    if broken:
        _out(f"{len(broken)} cassette(s) now reference removed blobs (re-record them or remove them):")
        for name in sorted(broken):
            _out(f"  {name}")
    return EXIT_OK


# -- import-vcr ----------------------------------------------------------------------------------


def _cmd_import_vcr(args: argparse.Namespace) -> int:
    from .cli_progress import Progress
    from .interop.vcr_import import import_target, import_vcr_file

    explicit = {Path(p) for p in args.paths if Path(p).is_file()}
    files = [
        f
        for f in iter_files(args.paths, (".yaml", ".yml", ".json"), command="import-vcr")
        if f in explicit or f.suffix.lower() != ".json" or _looks_like_vcr_json(f)
    ]
    if not files:
        raise UsageError("no vcrpy cassette (.yaml, .yml, .json) found in " + ", ".join(args.paths))
    table = _project_table()
    out_dir = Path(args.out or str(table.get("cassette_dir") or DEFAULT_CASSETTE_DIR))
    rootdir = Path.cwd()
    settings: dict[str, Any] = {}
    for key in ("idempotency_header", "receipts", "openai_compatible_base_urls"):
        if key in table:
            settings[key] = table[key]
    bases = [Path(p) for p in args.paths]
    failed = 0
    with Progress(len(files), "import") as bar:
        for path in files:
            try:
                target, test = import_target(path, out_dir, bases=bases, rootdir=rootdir, layout=args.layout)
            except ValueError as exc:
                raise UsageError(str(exc), fixes=["agentreplay import-vcr --help"]) from None
            nodeid = test.nodeid if test is not None else None
            try:
                saved = import_vcr_file(path, target, settings=settings, redaction=table, test=nodeid)
            except AgentReplayError as exc:
                failed += 1
                _err(f"{path}: {exc.headline}")
                for line in exc.evidence[:5]:
                    _err(f"  {line}")
            else:
                for_test = f", test {nodeid}" if nodeid else ""
                _out(f"imported {path} -> {target} ({len(saved.events)} events{for_test})")
            bar.advance(str(path))
    _out(f"import-vcr: {len(files) - failed} imported, {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK


def _looks_like_vcr_json(path: Path) -> bool:
    """A JSON file found in a folder is imported only if it is shaped like a vcrpy cassette."""
    from .cassette.validation import read_regular_file
    from .interop.vcr_format import MAX_VCR_BYTES

    try:
        # Never blocks on a FIFO nor reads a device: those are left to the import to report.
        doc = json.loads(read_regular_file(path, limit=MAX_VCR_BYTES, label=str(path)))
    except (OSError, ValueError, RecursionError, CassetteError):
        return True  # let the import report why it cannot be read
    return isinstance(doc, dict) and "interactions" in doc


# -- export-otel ---------------------------------------------------------------------------------


def _cmd_export_otel(args: argparse.Namespace) -> int:
    from .cassette.store import load_cassette
    from .interop.otel import cassette_to_otlp, export_with_sdk

    loaded = load_cassette(Path(args.cassette))
    if args.exporter:
        count = export_with_sdk(loaded, args.exporter, endpoint=args.endpoint)
        _err(f"exported {count} span(s) through the {args.exporter} exporter")
        return EXIT_OK
    sys.stdout.write(json.dumps(cassette_to_otlp(loaded, service_name=args.service_name), indent=2) + "\n")
    return EXIT_OK


# -- textconv ------------------------------------------------------------------------------------


def _textconv_blob_dir(path: Path, explicit: str | None) -> Path:
    from .cassette.store import default_blob_dir

    if explicit:
        return Path(explicit)
    found = default_blob_dir(path)
    if found.is_dir():
        return found
    # git hands textconv a temporary copy of an older revision: look from where git runs (the repository).
    for ancestor in (Path.cwd(), *Path.cwd().parents):
        for candidate in (ancestor / DEFAULT_CASSETTE_DIR / BLOB_DIR_NAME, ancestor / BLOB_DIR_NAME):
            if candidate.is_dir():
                return candidate
    return found


def textconv_document(raw: Any, blob_dir: Path) -> Any:
    """The cassette document with every blob-stored payload inlined (``inline``, next to its ``sha256``),
    for reading and for git's diff driver. Never raises for a damaged file: what cannot be resolved is
    named in place."""
    from .cassette.blobs import BlobStore

    if not isinstance(raw, dict) or not isinstance(raw.get("events"), list):
        return raw
    store = BlobStore(blob_dir)
    for event in raw["events"]:
        if not isinstance(event, dict):
            continue
        for name in ("input_ref", "output_ref"):
            ref = event.get(name)
            if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str):
                continue
            try:
                ref["inline"] = store.load(ref["sha256"])
            except (AgentReplayError, OSError, ValueError, RecursionError) as exc:
                ref["inline"] = f"<payload not resolved: {getattr(exc, 'headline', exc)}>"
    return raw


def _cmd_textconv(args: argparse.Namespace) -> int:
    from .cassette.store import read_cassette_bytes
    from .core.canonical import dumps_pretty

    path = Path(args.cassette)
    try:
        data = read_cassette_bytes(path)
    except (CassetteError, OSError) as exc:
        _err(f"textconv: {getattr(exc, 'headline', exc)}")
        return EXIT_USAGE
    try:
        raw = json.loads(data)
        text = dumps_pretty(textconv_document(raw, _textconv_blob_dir(path, args.blob_dir)))
    except (ValueError, RecursionError):
        sys.stdout.buffer.write(data)  # not a cassette git can render: the bytes as they are
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


# -- schema --------------------------------------------------------------------------------------


def _cmd_schema(args: argparse.Namespace) -> int:
    from .core.canonical import dumps_pretty

    if args.report:
        from .report.json_report import report_json_schema

        sys.stdout.write(dumps_pretty(report_json_schema()))
        return EXIT_OK
    from .core.events import cassette_json_schema

    sys.stdout.write(dumps_pretty(cassette_json_schema()))
    return EXIT_OK


# -- parser --------------------------------------------------------------------------------------


def _sub(
    sub: Any, name: str, help: str, description: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    show.set_defaults(func=_cmd_show)

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
    diff.set_defaults(func=_cmd_diff)

    verify = _sub(
        sub,
        "verify",
        "check cassettes: schema, event digests, receipts, blobs, secrets",
        "Verify cassette files or every cassette under folders (recursively): the schema, the event digests "
        "(edits, reordering, insertion, truncation; the first bad event is named), committed effects with "
        "receipts and idempotency keys, payload "
        "blobs present and intact, and no secret-shaped value. Prints each problem with its file; exit 1 "
        "when any is found.",
        ["agentreplay verify cassettes/", "agentreplay verify cassettes/tests/test_agent/test_refund.json"],
    )
    verify.add_argument("paths", nargs="+", metavar="PATH")
    verify.add_argument("-v", "--verbose", action="store_true", help="also list cassettes without problems")
    verify.set_defaults(func=_cmd_verify)

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
    migrate.set_defaults(func=_cmd_migrate)

    prune = _sub(
        sub,
        "prune",
        "remove payload blobs by data class and age",
        "Remove payload blobs from the blob store. A blob's data class comes from the references to it in "
        "the cassettes; a blob a cassette still references is kept unless --include-referenced is given. "
        "Unreferenced blobs have no data class: they are removed by age alone.",
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
    prune.set_defaults(func=_cmd_prune)

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
    vcr.set_defaults(func=_cmd_import_vcr)

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
    otel.set_defaults(func=_cmd_export_otel)

    textconv = _sub(
        sub,
        "textconv",
        "print a cassette with its blob-stored payloads inlined (a git diff driver)",
        "Print the cassette as canonical JSON with every payload the blob store holds inlined next to its "
        "sha256, so `git diff` shows what changed inside a payload, not only a new hash. Set it up once "
        'per clone: `git config diff.agentreplay.textconv "agentreplay textconv"`, and in '
        ".gitattributes: `cassettes/**/*.json diff=agentreplay`.",
        ["agentreplay textconv cassettes/tests/test_agent/test_refund.json"],
    )
    textconv.add_argument("cassette", metavar="CASSETTE")
    textconv.add_argument(
        "--blob-dir", metavar="DIR", help="the blob store (default: the cassette folder's .blobs)"
    )
    textconv.set_defaults(func=_cmd_textconv)

    schema = _sub(
        sub,
        "schema",
        "print the JSON Schema of the cassette format",
        "Print the JSON Schema of the current cassette format, or with --report of the JSON drift report.",
        ["agentreplay schema > cassette.schema.json", "agentreplay schema --report > report.schema.json"],
    )
    schema.add_argument("--report", action="store_true", help="the schema of the JSON drift report instead")
    schema.set_defaults(func=_cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except AgentReplayError as exc:
        _err(f"agentreplay {args.command}: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:
        # `agentreplay show x | head`: stop quietly, and keep Python from complaining at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_OK
    except OSError as exc:
        _err(f"agentreplay {args.command}: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("agentreplay: interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
