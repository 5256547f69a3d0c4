"""The commands that check and rewrite cassette files: ``agentreplay verify``, ``migrate``, ``prune`` (what
it removes is decided in :mod:`pytest_agentreplay.cassette.prune`) and ``import-vcr``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cassette.chain import checked_integrity
from ..cassette.maintenance import migrate_file
from ..cassette.prune import plan_prune, remove
from ..core import settings_check as check
from ..core.constants import (
    DEFAULT_CASSETTE_DIR,
    DEFAULT_TRANSPORT_HEADERS,
    FORMAT_VERSION,
    TRANSPORT_HEADER_CHOICES,
)
from ..exceptions import AgentReplayError, CassetteError
from ..replay.audit import audit_advice
from ..replay.replayability import replay_problems
from .common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    Progress,
    UsageError,
    err,
    iter_files,
    load_for_audit,
    out,
    project_table,
)


def cassette_findings(path: Path) -> tuple[list[str], list[str]]:
    """The problems of one cassette (its damage and whatever replay would trip on) and the advice on it."""
    try:
        loaded, _ = load_for_audit(path)
    except CassetteError as exc:
        return [exc.headline + (f" (at {exc.place})" if exc.place else ""), *exc.evidence], []
    # Both checks may find the same damage: each problem once.
    problems = list(dict.fromkeys([*loaded.verify(), *replay_problems(loaded)]))
    return problems, audit_advice(loaded)


def verify(args: argparse.Namespace) -> int:
    files = iter_files(args.paths, (".json",), command="verify")
    if not files:
        raise UsageError(
            "no cassette found in " + ", ".join(args.paths),
            fixes=["pass cassette files or the folder that holds them: agentreplay verify cassettes/"],
        )
    bad = total = advised = 0
    with Progress(len(files), "verify") as bar:
        for path in files:
            problems, advice = cassette_findings(path)
            if args.strict:
                problems, advice = [*problems, *advice], []
            bar.advance(str(path))
            if problems:
                bad += 1
                total += len(problems)
                for problem in problems:
                    out(f"{path}: {problem}")
            for line in advice:
                out(f"{path}: warning: {line}")
            advised += len(advice)
            if not problems and not advice and args.verbose:
                out(f"{path}: ok")
    if bad:
        out(f"verify: {total} problem(s) in {bad} of {len(files)} cassette(s)")
        return EXIT_PROBLEMS
    # Only the current format passes (an older one is a problem above): its seal is what was checked.
    out(f"verify: {len(files)} cassette(s) ok ({checked_integrity(FORMAT_VERSION)})")
    if advised:
        out(
            f"verify: {advised} warning(s): committed writes without an idempotency key or a receipt "
            "(advice; --strict fails on them)"
        )
    return EXIT_OK


def migrate(args: argparse.Namespace) -> int:
    files = iter_files(args.paths, (".json",), command="migrate")
    changed = current = failed = 0
    verb = "would migrate" if args.dry_run else "migrated"
    with Progress(len(files), "migrate") as bar:
        for path in files:
            try:
                if migrate_file(path, dry_run=args.dry_run):
                    changed += 1
                    out(f"{verb} {path}")
                else:
                    current += 1
            except AgentReplayError as exc:
                failed += 1
                err(f"{path}: {exc.headline}")
            bar.advance(str(path))
    out(f"migrate: {changed} {verb}, {current} already current, {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK


def prune(args: argparse.Namespace) -> int:
    table = project_table()
    cassette_dir = Path(args.cassette_dir or str(table.get("cassette_dir") or DEFAULT_CASSETTE_DIR))
    if not cassette_dir.is_dir():
        raise UsageError(
            f"cassette folder {cassette_dir} does not exist",
            fixes=["pass it: agentreplay prune --cassette-dir path/to/cassettes"],
        )
    if args.older_than is not None and args.older_than < 0:
        raise UsageError("--older-than must be a number of days >= 0")
    plan = plan_prune(
        cassette_dir,
        data_classes=args.data_class or (),
        older_than=args.older_than,
        include_referenced=args.include_referenced,
    )
    for scan in plan.scans:
        out(f"blob store {scan.blob_dir}: read the {scan.cassettes} cassette file(s) under {scan.root}")
    verb = "would remove" if args.dry_run else "removed"
    with Progress(len(plan.removals), "prune") as bar:
        for removal in plan.removals:
            bar.advance(removal.sha[:12])
            if not args.dry_run:
                remove(plan, removal)
            out(
                f"{verb} {removal.path} ({removal.reason}, {removal.age_days:.0f} day(s) old, "
                f"{removal.size} bytes)"
            )
    freed = sum(removal.size for removal in plan.removals)
    out(f"prune: {len(plan.removals)} blob(s) {verb} ({freed} bytes)")
    wanted = args.data_class or []
    if plan.kept_referenced:
        what = f" of class {', '.join(sorted(wanted))}" if wanted else ""
        out(
            f"kept {plan.kept_referenced} blob(s){what} that cassettes still reference; "
            "pass --include-referenced to remove them too"
        )
    if plan.kept_elsewhere:
        out(
            f"kept {plan.kept_elsewhere} blob(s) that cassettes outside {cassette_dir} reference "
            "(they share its blob store); prune their folder to remove them"
        )
    broken = plan.broken()
    if broken:
        now = "would reference" if args.dry_run else "now reference"
        out(f"{len(broken)} cassette(s) {now} removed blobs (re-record them or remove them):")
        for name in broken:
            out(f"  {name}")
    return EXIT_OK


def import_vcr(args: argparse.Namespace) -> int:
    # heavy: the importer loads the recorder, the classifier and the writer; only import-vcr pays
    from ..interop.vcr_import import import_target, import_vcr_file

    explicit = {Path(p) for p in args.paths if Path(p).is_file()}
    files = [
        f
        for f in iter_files(args.paths, (".yaml", ".yml", ".json"), command="import-vcr")
        if f in explicit or f.suffix.lower() != ".json" or _looks_like_vcr_json(f)
    ]
    if not files:
        raise UsageError("no vcrpy cassette (.yaml, .yml, .json) found in " + ", ".join(args.paths))
    table = project_table()
    out_dir = Path(args.out or str(table.get("cassette_dir") or DEFAULT_CASSETTE_DIR))
    rootdir = Path.cwd()
    # The project's run settings the conversion reads (RunContext converts them to RunSettings).
    keys = ("idempotency_header", "receipts", "openai_compatible_base_urls")
    settings: dict[str, object] = {key: table[key] for key in keys if key in table}
    # Checked as a test session checks it (a ConfigError: exit 2, the valid values listed).
    origin = check.Places(pyproject=rootdir / "pyproject.toml").origin("project", "transport_headers")
    given = table.get("transport_headers", DEFAULT_TRANSPORT_HEADERS)
    transport_headers = check.choice(given, origin, TRANSPORT_HEADER_CHOICES, "transport headers setting")
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
                saved = import_vcr_file(
                    path,
                    target,
                    settings=settings,
                    redaction=table,
                    test=nodeid,
                    transport_headers=transport_headers,
                )
            except AgentReplayError as exc:
                failed += 1
                err(f"{path}: {exc.headline}")
                for line in exc.evidence[:5]:
                    err(f"  {line}")
            else:
                for_test = f", test {nodeid}" if nodeid else ""
                out(f"imported {path} -> {target} ({len(saved.events)} events{for_test})")
            bar.advance(str(path))
    out(f"import-vcr: {len(files) - failed} imported, {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK


def _looks_like_vcr_json(path: Path) -> bool:
    """A JSON file found in a folder is imported only if it is shaped like a vcrpy cassette."""
    # heavy: as in import_vcr()
    from ..interop.vcr_format import NotVcrCassetteError, read_vcr_document

    try:
        # The one reader of vcrpy cassettes: it never blocks on a FIFO nor reads a device.
        read_vcr_document(path, "json")
    except NotVcrCassetteError:
        return False
    except (OSError, ValueError, RecursionError, CassetteError):
        return True  # let the import report why it cannot be read
    return True
