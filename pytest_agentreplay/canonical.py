"""Canonical JSON: one byte sequence per value, so saves are reproducible and hashes stable."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def dumps_pretty(value: Any) -> str:
    """Reviewable canonical form used for cassette files (sorted keys, 2-space indent, final newline)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def dumps_compact(value: Any) -> str:
    """Compact canonical form used for hashing."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def hash_value(value: Any) -> str:
    """sha256 of the compact canonical JSON of ``value``; used for state hashes and blob addresses."""
    return sha256_hex(dumps_compact(value))
