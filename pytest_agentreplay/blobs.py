"""Content-addressed payload store shared by all cassettes of a project.

Conversations resend their whole history on every model call; storing each large list element
(a message, a document) as its own blob makes that history cost one copy instead of n^2/2.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .atomic import atomic_write_bytes
from .canonical import dumps_compact, sha256_hex
from .exceptions import BlobMissingError, CassetteCorruptError, CassetteIntegrityError

BLOB_REF = "$blob"
# A list stored as a chain of nodes, each ending at one blobbed element: a history that grew by a few
# messages shares every earlier node, so each call adds O(new messages) bytes, not O(history).
CHAIN = "$chain"
# Wraps a user dict whose only key is one of the markers, so it is never mistaken for one.
LITERAL = "$lit"
_MARKERS = (BLOB_REF, CHAIN, LITERAL)
DEDUP_MIN_BYTES = 256
CHAIN_MIN_BLOBS = 2
_SHA = re.compile(r"[0-9a-f]{64}")
_CACHE_SIZE = 512

PendingBlobs = dict[str, tuple[Any, bytes]]


def _encode(value: Any, pending: PendingBlobs) -> Any:
    if isinstance(value, dict):
        out = {k: _encode(v, pending) for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in _MARKERS:
            return {LITERAL: out}
        return out
    if isinstance(value, list):
        items: list[tuple[Any, bool]] = []
        for item in value:
            if isinstance(item, dict | list) and len(dumps_compact(item).encode("utf-8")) > DEDUP_MIN_BYTES:
                items.append(({BLOB_REF: _store(_encode(item, pending), pending)}, True))
            else:
                items.append((_encode(item, pending), False))
        if sum(blobbed for _, blobbed in items) < CHAIN_MIN_BLOBS:
            return [encoded for encoded, _ in items]
        prev: str | None = None
        run: list[Any] = []
        for encoded, blobbed in items:
            run.append(encoded)
            if blobbed:
                prev = _store({CHAIN: {"prev": prev, "items": run}}, pending)
                run = []
        return {CHAIN: {"prev": prev, "items": run}}
    return value


def _store(encoded: Any, pending: PendingBlobs) -> str:
    data = dumps_compact(encoded).encode("utf-8")
    sha = sha256_hex(data)
    pending[sha] = (encoded, data)
    return sha


def plan_externalize(value: Any, inline_limit: int) -> tuple[dict[str, Any], PendingBlobs]:
    """Decide where a payload goes without writing: ``({"inline": v} | {"sha256", "size"}, blobs to write)``.

    Planning is separate from writing so the secret scan can see the blobs before anything touches disk.
    """
    size = len(dumps_compact(value).encode("utf-8"))
    if size <= inline_limit:
        return {"inline": value}, {}
    pending: PendingBlobs = {}
    sha = _store(_encode(value, pending), pending)
    return {"sha256": sha, "size": size}, pending


def _fixes(sha: str) -> list[str]:
    return [
        "restore the blob store from git (the `.blobs` folder next to your cassettes must be committed)",
        "re-record the test: `pytest --agentreplay-record=all <test>`",
        f"run `agentreplay verify <cassette>` to list every missing blob (this one: {sha})",
    ]


class BlobStore:
    """Blobs are ``<root>/<sha[:2]>/<sha>.json`` holding compact canonical JSON; the name is its sha256."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: OrderedDict[str, Any] = OrderedDict()

    def __repr__(self) -> str:
        return f"BlobStore({str(self.root)!r})"

    def path_for(self, sha: str) -> Path:
        if not _SHA.fullmatch(sha):
            raise CassetteCorruptError(
                f"invalid blob reference {sha!r}: expected 64 lowercase hex digits",
                fixes=[
                    "restore the cassette from git",
                    "re-record the test: `pytest --agentreplay-record=all <test>`",
                ],
            )
        return self.root / sha[:2] / f"{sha}.json"

    def exists(self, sha: str) -> bool:
        return self.path_for(sha).is_file()

    def put(self, value: Any) -> str:
        data = dumps_compact(value).encode("utf-8")
        sha = sha256_hex(data)
        self.put_bytes(sha, data)
        return sha

    def put_bytes(self, sha: str, data: bytes) -> None:
        """Store canonical bytes already hashed by the caller; write-once, so concurrent writers agree."""
        target = self.path_for(sha)
        if not target.is_file():
            atomic_write_bytes(target, data)

    def get(self, sha: str) -> Any:
        """The stored value, verified against its address; may contain ``{"$blob": sha}`` references."""
        cached = self._cache.get(sha)
        if cached is not None:
            self._cache.move_to_end(sha)
            return cached
        target = self.path_for(sha)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise BlobMissingError(
                f"payload blob {sha} is missing",
                evidence=[f"expected file: {target}"],
                place=f"blob store {self.root}",
                fixes=_fixes(sha),
            ) from None
        actual = sha256_hex(data)
        if actual != sha:
            raise CassetteIntegrityError(
                f"payload blob {sha} does not match its content hash",
                evidence=[f"file: {target}", f"content hashes to {actual}"],
                place=f"blob store {self.root}",
                fixes=[
                    "restore the blob from git",
                    "delete it and re-record: `pytest --agentreplay-record=all <test>`",
                ],
            )
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise CassetteCorruptError(f"payload blob {sha} is not JSON: {exc}", place=str(target)) from None
        self._cache[sha] = value
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def iter_shas(self) -> Iterator[str]:
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if not (sub.is_dir() and len(sub.name) == 2):
                continue
            for file in sorted(sub.glob("*.json")):
                if _SHA.fullmatch(file.stem) and file.stem.startswith(sub.name):
                    yield file.stem

    def externalize(self, value: Any, inline_limit: int) -> dict[str, Any]:
        """Keep a small payload inline or store it (deduplicated per list element); PayloadRef-shaped."""
        placed, pending = plan_externalize(value, inline_limit)
        for sha, (_, data) in pending.items():
            self.put_bytes(sha, data)
        return placed

    def resolve(self, value: Any) -> Any:
        """Expand ``{"$blob": sha}`` references and chains (recursively) back into the original value."""
        if isinstance(value, dict):
            if len(value) == 1:
                key, inner = next(iter(value.items()))
                if key == BLOB_REF and isinstance(inner, str):
                    return self.resolve(self.get(inner))
                if key == CHAIN and isinstance(inner, dict):
                    return [self.resolve(item) for item in self._chain_items(inner)]
                if key == LITERAL and isinstance(inner, dict):
                    return {k: self.resolve(v) for k, v in inner.items()}
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def _chain_items(self, node: dict[str, Any]) -> list[Any]:
        # Iterative: a 500-message history is a 500-node chain, deeper than the recursion limit allows.
        parts = [node["items"]]
        prev = node["prev"]
        while prev is not None:
            node = self.get(prev)[CHAIN]
            parts.append(node["items"])
            prev = node["prev"]
        return [item for part in reversed(parts) for item in part]

    def load(self, sha: str) -> Any:
        """The fully resolved payload stored under ``sha``."""
        return self.resolve(self.get(sha))

    def referenced(self, sha: str) -> set[str]:
        """``sha`` and every blob it references, transitively; raises if one is missing or damaged."""
        seen: set[str] = set()
        stack = [sha]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(_refs_in(self.get(current)))
        return seen


def _refs_in(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if len(item) == 1:
                key, inner = next(iter(item.items()))
                if key == BLOB_REF and isinstance(inner, str):
                    yield inner
                    continue
                if key == CHAIN and isinstance(inner, dict):
                    if isinstance(inner.get("prev"), str):
                        yield inner["prev"]
                    stack.append(inner.get("items"))
                    continue
                if key == LITERAL and isinstance(inner, dict):
                    stack.extend(inner.values())
                    continue
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
