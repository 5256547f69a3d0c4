"""Upgrades of older cassette formats, applied in memory on load and on disk only by `agentreplay migrate`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .atomic import atomic_write_bytes, path_lock
from .canonical import dumps_pretty, hash_value
from .constants import FORMAT_VERSION
from .exceptions import CassetteSchemaError

Document = dict[str, Any]
Migration = Callable[[Document, str], Document]

_V2_ONLY_TOP = ("event_count", "head_hash")


def _v1_to_v2(doc: Document, source: str) -> Document:
    """Version 1 had no hash chain; the chain is computed from the content as it is now."""
    fixes = ["restore the cassette from git", "re-record it: `pytest --agentreplay-record=all <test>`"]
    # A v2 file relabelled as v1 would get a fresh chain and hide an edit, so v2 fields are refused.
    present = [key for key in _V2_ONLY_TOP if key in doc]
    run = doc.get("run")
    events = doc.get("events")
    if present:
        raise CassetteSchemaError(
            f"version-1 cassette has version-2 field(s) {', '.join(present)}",
            evidence=["the version number was probably edited"],
            cassette=source,
            place="version",
            fixes=fixes,
        )
    if not isinstance(run, dict) or not isinstance(events, list):
        raise CassetteSchemaError(
            "version-1 cassette needs a `run` object and an `events` list",
            cassette=source,
            place="run" if not isinstance(run, dict) else "events",
            fixes=fixes,
        )
    prev = hash_value(run)
    chained: list[Any] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise CassetteSchemaError(
                f"events[{index}] is not an object", cassette=source, place=f"events[{index}]", fixes=fixes
            )
        if "prev_hash" in event:
            raise CassetteSchemaError(
                "version-1 cassette has a version-2 field prev_hash",
                cassette=source,
                place=f"events[{index}].prev_hash",
                fixes=fixes,
            )
        linked = {**event, "prev_hash": prev}
        prev = hash_value(linked)
        chained.append(linked)
    return {**doc, "version": 2, "events": chained, "event_count": len(chained), "head_hash": prev}


# From-version -> function producing the next version.
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}


def migrate_document(doc: Document, source: str = "<memory>") -> Document:
    """Apply every migration from ``doc["version"]`` up to the current format version."""
    version = doc["version"]
    while version < FORMAT_VERSION:
        doc = MIGRATIONS[version](doc, source)
        version = doc["version"]
    return doc


def migrate_file(path: Path, dry_run: bool = False) -> bool:
    """Rewrite an older-format cassette in the current format (atomically); True if it needed it.

    The file is fully validated (schema, hash chain) before anything is written.
    """
    from .events import CASSETTE_ADAPTER, event_to_dict
    from .store import build_document, load_document, run_to_dict

    path = Path(path)
    with path_lock(path):
        raw, original_version = load_document(path, migrate=True)
        if original_version == FORMAT_VERSION:
            return False
        # Written the way save_cassette writes (defaults filled in), so the next save is byte-identical.
        model = CASSETTE_ADAPTER.validate_python(raw)
        doc = build_document(run_to_dict(model.run), [event_to_dict(event) for event in model.events])
        if not dry_run:
            atomic_write_bytes(path, dumps_pretty(doc).encode("utf-8"))
    return True
