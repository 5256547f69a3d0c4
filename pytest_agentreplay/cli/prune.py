"""``agentreplay prune``: remove payload blobs from the blob store by data class and age."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.constants import BLOB_DIR_NAME, DEFAULT_CASSETTE_DIR, FORMAT_NAME
from ..exceptions import AgentReplayError, CassetteError
from .common import EXIT_OK, UsageError, iter_files, out, project_table, stored_refs

if TYPE_CHECKING:
    from ..cassette.blobs import BlobStore


def _cassette_refs(path: Path) -> Iterator[tuple[str, str]]:
    """(sha256, data class) of every blob reference in a cassette file, read without validation: a damaged
    or old cassette still keeps its blobs."""
    from ..cassette.read import read_cassette_bytes

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
    for ref in stored_refs(raw):
        yield ref["sha256"], str(ref.get("data_class") or "internal")


def run(args: argparse.Namespace) -> int:
    from ..cassette.blobs import BlobStore, default_blob_dir
    from .progress import Progress

    table = project_table()
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
            out(f"{verb} {file} ({reason}, {age_days:.0f} day(s) old, {stat.st_size} bytes)")
            removed += 1
            freed += stat.st_size
            if not args.dry_run:
                file.unlink()
                with contextlib.suppress(OSError):
                    file.parent.rmdir()
    out(f"prune: {removed} blob(s) {verb} ({freed} bytes)")
    if kept_referenced:
        what = f" of class {', '.join(sorted(wanted))}" if wanted else ""
        out(
            f"kept {kept_referenced} blob(s){what} that cassettes still reference; "
            "pass --include-referenced to remove them too"
        )
    if broken:
        out(f"{len(broken)} cassette(s) now reference removed blobs (re-record them or remove them):")
        for name in sorted(broken):
            out(f"  {name}")
    return EXIT_OK
