"""Cassettes no test uses any more: found per test module folder, reported, failed or removed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.constants import BLOB_DIR_NAME, CASSETTE_SUFFIX


def unused_cassettes(module_dirs: Iterable[Path], known: Iterable[Path]) -> list[Path]:
    """Cassette files inside the folders of collected test modules that no collected test maps to.

    ``known`` holds the cassette path of every collected test (selected or not, run or skipped), so a
    ``-k`` selection never makes the cassettes of deselected tests look unused.
    """
    known_set = {p.resolve() for p in known}
    found: list[Path] = []
    for folder in sorted({d.resolve() for d in module_dirs}):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob(f"*{CASSETTE_SUFFIX}")):
            if BLOB_DIR_NAME in path.parts or path.name.startswith("."):
                continue
            if path.resolve() not in known_set:
                found.append(path)
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
