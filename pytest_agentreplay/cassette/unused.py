"""Cassettes no test uses any more: found per test module folder, reported, failed or removed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..core.constants import BLOB_DIR_NAME, CASSETTE_SUFFIX, FORMAT_NAME

# The opening of a canonical cassette: its first key. Files that open otherwise are parsed to be sure.
_HEAD = f'"format": "{FORMAT_NAME}"'.encode()
_LARGEST_PARSED = 64 * 1024 * 1024


def is_cassette_file(path: Path) -> bool:
    """Whether ``path`` holds a cassette of this plugin (any version) or a vcrpy cassette stored as JSON."""
    try:
        with path.open("rb") as fh:
            head = fh.read(256)
        if _HEAD in head:
            return True
        if path.stat().st_size > _LARGEST_PARSED:
            return False
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict):
        return False
    if doc.get("format") == FORMAT_NAME:
        return True
    return isinstance(doc.get("interactions"), list) and "version" in doc


class UnusedFiles(NamedTuple):
    cassettes: list[Path]
    not_cassettes: list[Path]


def unused_cassettes(module_dirs: Iterable[Path], known: Iterable[Path]) -> UnusedFiles:
    """Cassette files (and, apart, other ``.json`` files) in the folders of collected test modules that no
    collected test maps to. ``known``: the cassette of every collected test, selected or not, so a ``-k``
    selection never makes the deselected tests' cassettes look unused.
    """
    # Resolving a path reads every folder on its way: each folder is resolved once, and a file's own
    # resolution (a symlinked cassette) is only asked of the few files its folder and name do not settle.
    folders: dict[Path, Path] = {}
    known = list(known)
    by_name = set()
    for p in known:
        folder = folders.get(p.parent)
        if folder is None:  # not setdefault: its default, a resolution, would be computed for every path
            folder = folders[p.parent] = p.parent.resolve()
        by_name.add(folder / p.name)
    resolved: set[Path] | None = None
    found = UnusedFiles([], [])
    for folder in sorted({d.resolve() for d in module_dirs}):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob(f"*{CASSETTE_SUFFIX}")):
            if BLOB_DIR_NAME in path.parts or path.name.startswith(".") or path in by_name:
                continue
            if resolved is None:
                resolved = {p.resolve() for p in known}
            if path.resolve() not in resolved:
                (found.cassettes if is_cassette_file(path) else found.not_cassettes).append(path)
    return found


def remove(paths: Iterable[Path]) -> list[Path]:
    removed = []
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed
