"""Rewriting older-format cassettes in the current format (`agentreplay migrate`, --agentreplay-update)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..core.canonical import dumps_cassette
from ..core.constants import FORMAT_VERSION
from .atomic import write_locked
from .chain import blob_resolver, build_document, run_to_dict
from .read import load_cassette


def migrate_file(path: Path, dry_run: bool = False) -> bool:
    """Rewrite an older-format cassette (validated first) in the current format; True if it needed it."""
    path = Path(path)
    if dry_run:
        return _upgraded(path) is not None
    return write_locked(path, partial(_upgraded, path))


def _upgraded(path: Path) -> bytes | None:
    loaded = load_cassette(path, migrate=True)
    if loaded.version == FORMAT_VERSION:
        return None
    # Written the way save_cassette writes (defaults filled in), so the next save is byte-identical;
    # blob-stored requests are read so later requests can be stored as deltas over them.
    resolve = blob_resolver(loaded.blob_store)
    return dumps_cassette(
        build_document(run_to_dict(loaded.run), loaded.event_dicts(), resolve=resolve)
    ).encode("utf-8")
