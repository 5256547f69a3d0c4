"""``agentreplay import-vcr``: convert vcrpy / pytest-recording cassettes into this format."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.constants import DEFAULT_CASSETTE_DIR
from ..exceptions import AgentReplayError, CassetteError
from .common import EXIT_OK, EXIT_USAGE, UsageError, err, iter_files, out, project_table


def run(args: argparse.Namespace) -> int:
    from ..interop.vcr_import import import_target, import_vcr_file
    from .progress import Progress

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
    from ..cassette.validation import read_regular_file
    from ..interop.vcr_format import MAX_VCR_BYTES

    try:
        # Never blocks on a FIFO nor reads a device: those are left to the import to report.
        doc = json.loads(read_regular_file(path, limit=MAX_VCR_BYTES, label=str(path)))
    except (OSError, ValueError, RecursionError, CassetteError):
        return True  # let the import report why it cannot be read
    return isinstance(doc, dict) and "interactions" in doc
