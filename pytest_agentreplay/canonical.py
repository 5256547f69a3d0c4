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


# id(element) -> (element, its digest): holding the element keeps its id from being reused.
DigestMemo = dict[int, tuple[Any, str]]


def request_digest(body: Any, memo: DigestMemo | None = None) -> str:
    """The digest of a JSON request body whose lists of objects (a conversation's messages, the tools) are
    digested item by item: an item object seen before (``memo``, by identity) is not serialised again, so
    hashing every request of an N-call conversation costs its messages once, not their square."""
    if not isinstance(body, dict):
        return hash_value(body)
    memo = {} if memo is None else memo
    parts: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            parts[key] = {"#items": [_item_digest(item, memo) for item in value]}
        else:
            parts[key] = value
    return hash_value(parts)


def _item_digest(item: Any, memo: DigestMemo) -> str:
    seen = memo.get(id(item))
    if seen is not None and seen[0] is item:
        return seen[1]
    digest = hash_value(item)
    memo[id(item)] = (item, digest)
    return digest
