"""Where a test's cassette lives. Cheap to import (no recorder, no cassette reader)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .constants import DEFAULT_CASSETTE_DIR

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]=,+]")
# A cassette's pending drift (cassette/pending.py) is kept beside it: ``<cassette stem>.pending.json``.
PENDING_SUFFIX = ".pending.json"


def pending_path(cassette: Path) -> Path:
    return cassette.with_name(cassette.stem + PENDING_SUFFIX)


def remove_pending(cassette: Path) -> None:
    """Drop the stale pending drift of ``cassette`` (it passed, or was updated or recorded again): here, so
    a test that passes does not import the pending drift's reader and writer."""
    pending_path(cassette).unlink(missing_ok=True)


def module_cassette_dir(cassette_dir: Path, rootdir: Path, module_path: Path) -> Path:
    """``<cassette dir>/<test module path without .py>``: where the cassettes of a module's tests are."""
    try:
        relative = module_path.resolve().relative_to(rootdir.resolve())
    except ValueError:
        relative = Path(module_path.name)
    return cassette_dir / relative.with_suffix("")


def cassette_file_name(test_name: str) -> str:
    """``<test name>.json``, cleaned: the file name of a test's cassette in its module's folder."""
    from ..redaction import default_redactor  # lazily: keeps this module cheap to import

    # A parametrize id can hold a key, and file names end up in repositories and CI logs.
    name = _UNSAFE.sub("_", default_redactor().redact_string(test_name, keys=False))
    if name != test_name or len(name) > 200:
        # Cleaning can make two ids equal ("a/b" and "a_b"): a short hash of the raw id keeps them apart.
        digest = hashlib.sha256(test_name.encode("utf-8")).hexdigest()[:8]
        name = f"{name[:180]}-{digest}"
    return f"{name}.json"


def item_name(nodeid: str) -> str:
    """A collected test's name in its module: the node id after the module, classes joined by dots
    (``TestA.test_x[case]``): same-named methods of two classes in one module differ."""
    _, _, rest = nodeid.partition("::")
    return (rest or nodeid).replace("::", ".")


def item_cassette_path(cassette_dir: Path, rootdir: Path, module_path: Path, nodeid: str) -> Path:
    """``<cassette dir>/<test module path without .py>/<item name>.json``."""
    return module_cassette_dir(cassette_dir, rootdir, module_path) / cassette_file_name(item_name(nodeid))


def recorded_nodeid(path: Path) -> str | None:
    """The node id a cassette file says it was recorded for (None when unreadable or absent)."""
    try:
        if path.stat().st_size > 64 * 1024 * 1024:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    run = doc.get("run") if isinstance(doc, dict) else None
    test = run.get("test") if isinstance(run, dict) else None
    return test if isinstance(test, str) else None


def default_for_item(module_dir: Path, nodeid: str, name: str) -> Path:
    """The class-qualified default path in ``module_dir`` (:func:`module_cassette_dir`); a cassette at the
    older unqualified path is still found when it records this very test, so suites recorded before paths
    were class-qualified keep replaying."""
    qualified = module_dir / cassette_file_name(item_name(nodeid))
    if qualified.exists() or "::" not in nodeid.partition("::")[2]:
        return qualified
    legacy = module_dir / cassette_file_name(name)
    if legacy.is_file() and recorded_nodeid(legacy) == nodeid:
        return legacy
    return qualified


# What marks a project's root directory: the walk for cassettes recorded from another rootdir stops there.
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.cfg")


def cassette_elsewhere(
    rootdir: Path, cassette_dir: Path, cassette: Path, nodeid: str
) -> tuple[Path, Path] | None:
    """``(root, cassette)``: the cassette this very test has under a directory above ``rootdir`` (pytest run
    from a subdirectory without an ini file), up to the first project marker; else None. A few ``stat``
    calls per level: call it only when ``cassette`` is missing."""
    rootdir = rootdir.resolve()
    try:
        tail = cassette.resolve().relative_to(cassette_dir.resolve())
        folder = cassette_dir.resolve().relative_to(rootdir)
    except ValueError:
        return None
    module, sep, rest = nodeid.partition("::")
    if not sep or any((rootdir / marker).exists() for marker in PROJECT_MARKERS):
        return None
    folders = list(dict.fromkeys([folder, Path(DEFAULT_CASSETTE_DIR)]))
    for root in rootdir.parents:
        below = rootdir.relative_to(root)
        expected = f"{(below / module).as_posix()}::{rest}"
        # The default layout starts with the module path (which grows by ``below``); a named one does not.
        tails = [below / tail, tail]
        for name in folders:
            for candidate in dict.fromkeys(root / name / t for t in tails):
                if candidate.is_file() and recorded_nodeid(candidate) == expected:
                    return root, candidate
        if any((root / marker).exists() for marker in PROJECT_MARKERS):
            return None
    return None
