"""``agentreplay import-vcr``: convert vcrpy / pytest-recording cassettes into this format."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core import settings_check as check
from ..core.constants import DEFAULT_CASSETTE_DIR, DEFAULT_TRANSPORT_HEADERS, TRANSPORT_HEADER_CHOICES
from ..exceptions import AgentReplayError, CassetteError
from .common import EXIT_OK, EXIT_USAGE, Progress, UsageError, err, iter_files, out, project_table


def run(args: argparse.Namespace) -> int:
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
    # heavy: as in run()
    from ..interop.vcr_format import NotVcrCassetteError, read_vcr_document

    try:
        # The one reader of vcrpy cassettes: it never blocks on a FIFO nor reads a device.
        read_vcr_document(path, "json")
    except NotVcrCassetteError:
        return False
    except (OSError, ValueError, RecursionError, CassetteError):
        return True  # let the import report why it cannot be read
    return True
