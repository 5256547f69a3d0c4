"""Where a test's cassette lives, and the command that records it. Cheap to import (no pydantic)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]=,+]")


def default_cassette_path(cassette_dir: Path, rootdir: Path, module_path: Path, test_name: str) -> Path:
    """``<cassette dir>/<test module path without .py>/<test name>.json``."""
    try:
        relative = module_path.resolve().relative_to(rootdir.resolve())
    except ValueError:
        relative = Path(module_path.name)
    name = _UNSAFE.sub("_", test_name)
    if name != test_name or len(name) > 200:
        # Cleaning can make two ids equal ("a/b" and "a_b"): a short hash of the raw id keeps them apart.
        digest = hashlib.sha256(test_name.encode("utf-8")).hexdigest()[:8]
        name = f"{name[:180]}-{digest}"
    return cassette_dir / relative.with_suffix("") / f"{name}.json"


def record_command(nodeid: str, record: str = "missing") -> str:
    return f"pytest --agentreplay-record={record} '{nodeid}'"
