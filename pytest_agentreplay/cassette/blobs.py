"""Content-addressed payload store shared by all cassettes of a project.

Conversations resend their whole history on every model call; storing each large list element
(a message, a document) as its own blob makes that history cost one copy instead of n^2/2.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..core.canonical import dumps_compact, sha256_hex
from ..core.commands import rerecord_fix
from ..core.constants import BLOB_DIR_NAME, DEFAULT_CASSETTE_DIR
from ..core.documents import Document
from ..exceptions import (
    BlobMissingError,
    CassetteCorruptError,
    CassetteError,
    CassetteIntegrityError,
    CassetteLimitError,
    PayloadShapeError,
)
from .atomic import atomic_write_bytes, write_locked
from .validation import (
    MAX_BLOB_BYTES,
    MAX_DEPTH,
    MAX_EXPANDED_BYTES,
    SHA,
    UNPARSED,
    NestingTooDeep,
    blob_problem,
    parse_fast,
    read_regular_file,
    reject_constant,
)

BLOB_REF = "$blob"
# A list stored as a chain of nodes, each ending at one blobbed element: a history that grew by a few
# messages shares every earlier node, so each call adds O(new messages) bytes, not O(history).
CHAIN = "$chain"
# Wraps a user dict whose only key is one of the markers, so it is never mistaken for one.
LITERAL = "$lit"
_MARKERS = (BLOB_REF, CHAIN, LITERAL)
DEDUP_MIN_BYTES = 256
CHAIN_MIN_BLOBS = 2
_CACHE_SIZE = 512

PendingBlobs = dict[str, tuple[object, bytes]]


def _encode(value: object, pending: PendingBlobs, split: bool = True) -> object:
    if isinstance(value, dict):
        out = {k: _encode(v, pending, split) for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in _MARKERS:
            return {LITERAL: out}
        return out
    if isinstance(value, list):
        items: list[tuple[object, bool]] = []
        for item in value:
            if (
                split
                and isinstance(item, dict | list)
                and len(dumps_compact(item).encode("utf-8")) > DEDUP_MIN_BYTES
            ):
                items.append(({BLOB_REF: _store(_encode(item, pending), pending)}, True))
            else:
                items.append((_encode(item, pending, split), False))
        if sum(blobbed for _, blobbed in items) < CHAIN_MIN_BLOBS:
            return [encoded for encoded, _ in items]
        prev: str | None = None
        run: list[object] = []
        for encoded, blobbed in items:
            run.append(encoded)
            if blobbed:
                prev = _store({CHAIN: {"prev": prev, "items": run}}, pending)
                run = []
        return {CHAIN: {"prev": prev, "items": run}}
    return value


def _store(encoded: object, pending: PendingBlobs) -> str:
    data = dumps_compact(encoded).encode("utf-8")
    sha = sha256_hex(data)
    pending[sha] = (encoded, data)
    return sha


def plan_externalize(
    value: object, inline_limit: int, *, split: bool = True
) -> tuple[Document, PendingBlobs]:
    """Where a payload goes, not written yet (the secret scan sees the blobs first): ``({"inline": v} |
    {"sha256", "size"}, blobs to write)``. Without ``split`` a stored payload is one blob."""
    size = len(dumps_compact(value).encode("utf-8"))
    if size <= inline_limit:
        return {"inline": value}, {}
    pending: PendingBlobs = {}
    sha = _store(_encode(value, pending, split), pending)
    return {"sha256": sha, "size": size}, pending


# A stream of small events stays in the cassette up to this many inline limits (64 KiB at the default
# 2 KiB): beyond it, a long answer's hundreds of deltas would bury the rest of the run in review.
STREAM_INLINE_FACTOR = 32


def plan_payload(value: object, inline_limit: int) -> tuple[Document, PendingBlobs]:
    """Where a payload goes (:func:`plan_externalize`), a streamed response placed whole: its events are
    never resent, so storing each apart would share nothing. It stays inline while each event is within the
    inline limit and the whole within ``STREAM_INLINE_FACTOR`` times it; else it is one blob.
    """
    body = value.get("body") if isinstance(value, dict) else None
    events = body.get("sse") if isinstance(body, dict) else None
    if not isinstance(events, list):
        return plan_externalize(value, inline_limit)
    size = len(dumps_compact(value).encode("utf-8"))
    if size <= inline_limit or (
        size <= inline_limit * STREAM_INLINE_FACTOR
        and all(len(dumps_compact(event).encode("utf-8")) <= inline_limit for event in events)
    ):
        return {"inline": value}, {}
    return plan_externalize(value, inline_limit, split=False)


def _fixes(sha: str) -> list[str]:
    return [
        "restore the blob store from git (the `.blobs` folder next to your cassettes must be committed)",
        rerecord_fix(None),
        f"run `agentreplay verify` on the cassette to list every missing blob (this one: {sha})",
    ]


class BlobStore:
    """Blobs are ``<root>/<sha[:2]>/<sha>.json`` holding compact canonical JSON; the name is its sha256."""

    def __init__(self, root: Path) -> None:
        self.root = root if isinstance(root, Path) else Path(root)  # a Path is immutable: kept as given
        # sha -> (value, size in bytes, the blobs it references); values are validated (shape, depth)
        # before they are cached.
        self._cache: OrderedDict[str, tuple[object, int, list[str]]] = OrderedDict()
        self._root_real: str | None = None

    def __repr__(self) -> str:
        return f"BlobStore({str(self.root)!r})"

    def path_for(self, sha: str) -> Path:
        if not SHA.fullmatch(sha):
            raise CassetteCorruptError(
                f"invalid blob reference {sha!r}: expected 64 lowercase hex digits",
                fixes=["restore the cassette from git", rerecord_fix(None)],
            )
        return self.root / sha[:2] / f"{sha}.json"

    def exists(self, sha: str) -> bool:
        return self.path_for(sha).is_file()

    def put_bytes(self, sha: str, data: bytes) -> None:
        """Store canonical bytes already hashed by the caller; write-once, so concurrent writers agree."""
        target = self.path_for(sha)
        if not target.is_file():
            atomic_write_bytes(target, data)

    def write_with(self, path: Path, text: bytes, blobs: Iterable[tuple[str, bytes]]) -> None:
        """Write ``blobs`` (sha, bytes), then replace ``path`` by ``text`` under its lock: a cassette on disk
        never references a blob not there yet."""

        def blobs_first() -> bytes:
            for sha, data in blobs:
                self.put_bytes(sha, data)
            return text

        write_locked(path, blobs_first)

    def _damaged(
        self, kind: type[CassetteError], sha: str, what: str, *evidence: str, fixes: Sequence[str] = ()
    ) -> CassetteError:
        return kind(
            f"payload blob {sha} {what}",
            evidence=evidence,
            place=f"blob store {self.root}",
            fixes=fixes or _fixes(sha),
        )

    def get(self, sha: str) -> object:
        """The stored value, verified against its address; may contain ``{"$blob": sha}`` references."""
        return self._get_sized(sha)[0]

    def _get_sized(self, sha: str) -> tuple[object, int, list[str]]:
        cached = self._cache.get(sha)
        if cached is not None:
            self._cache.move_to_end(sha)
            return cached
        target = self.path_for(sha)
        if self._root_real is None:
            self._root_real = os.path.realpath(self.root)
        try:
            # Only a regular file inside the store: no FIFO, device, or symlink leading out of it.
            data = read_regular_file(
                target, limit=MAX_BLOB_BYTES, label=f"payload blob {sha}", root_real=self._root_real
            )
        except FileNotFoundError:
            raise self._damaged(BlobMissingError, sha, "is missing", f"expected file: {target}") from None
        except OSError as exc:
            what = f"cannot be read: {exc.strerror or exc}"
            raise self._damaged(CassetteCorruptError, sha, what, f"file: {target}") from None
        actual = sha256_hex(data)
        if actual != sha:
            raise self._damaged(
                CassetteIntegrityError,
                sha,
                "does not match its content hash",
                f"file: {target}",
                f"content hashes to {actual}",
                fixes=["restore the blob from git", "delete it, then " + rerecord_fix(None)],
            )
        value = _parse_blob(data, sha, target)
        refs: list[str] = []
        found = blob_problem(value, refs)
        if found is not None:
            problem, limit = found
            what = f"does not have the shape of a stored payload: {problem}"
            raise self._damaged(
                CassetteLimitError if limit else PayloadShapeError, sha, what, f"file: {target}"
            )
        entry = (value, len(data), refs)
        self._cache[sha] = entry
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return entry

    def iter_shas(self) -> Iterator[str]:
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if not (sub.is_dir() and len(sub.name) == 2):
                continue
            for file in sorted(sub.glob("*.json")):
                if SHA.fullmatch(file.stem) and file.stem.startswith(sub.name):
                    yield file.stem

    def load(self, sha: str) -> object:
        """The payload stored under ``sha``, expanded within ``MAX_DEPTH`` and ``MAX_EXPANDED_BYTES`` (blobs
        referencing each other twice cannot expand exponentially)."""
        return _Expansion(self).expand({BLOB_REF: sha}, 0)

    def referenced(self, sha: str) -> set[str]:
        """``sha`` and every blob it references, transitively; raises if one is missing or damaged."""
        seen: set[str] = set()
        stack = [sha]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self._get_sized(current)[2])
        return seen


class _Expansion:
    __slots__ = ("budget", "store")

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.budget = MAX_EXPANDED_BYTES

    def blob(self, sha: str) -> object:
        value, size, _ = self.store._get_sized(sha)
        self.budget -= size
        if self.budget < 0:
            raise self.store._damaged(
                CassetteLimitError,
                sha,
                f"expands to more than {MAX_EXPANDED_BYTES // (1024 * 1024)} MiB",
                "its blobs reference each other so often that the payload cannot be built",
            )
        return value

    def expand(self, value: object, depth: int) -> object:
        if not isinstance(value, dict | list):
            return value
        if depth >= MAX_DEPTH:
            raise CassetteLimitError(
                f"a stored payload is nested deeper than {MAX_DEPTH} levels",
                place=f"blob store {self.store.root}",
                fixes=_SHAPE_FIXES,
            )
        if isinstance(value, list):
            return [self.expand(v, depth + 1) for v in value]
        if len(value) == 1:
            key, inner = next(iter(value.items()))
            if key == BLOB_REF and isinstance(inner, str):
                return self.expand(self.blob(inner), depth)
            if key == CHAIN and isinstance(inner, dict):
                return [self.expand(item, depth + 1) for item in self.chain_items(inner)]
            if key == LITERAL and isinstance(inner, dict):
                return {k: self.expand(v, depth + 1) for k, v in inner.items()}
        return {k: self.expand(v, depth + 1) for k, v in value.items()}

    def chain_items(self, node: Document) -> list[object]:
        # Iterative: a 500-message history is a 500-node chain, deeper than the recursion limit allows.
        # Every blob's chain nodes have the shape ``blob_problem`` checks: a ``prev`` need only be one.
        parts = [node["items"]]
        prev = node["prev"]
        while prev is not None:
            value = self.blob(prev)
            inner = value.get(CHAIN) if isinstance(value, dict) and len(value) == 1 else None
            if not isinstance(inner, dict):
                raise PayloadShapeError(
                    f"chain node {prev} does not have the shape of a chain node: it is not a chain node",
                    place=f"blob store {self.store.root}",
                    fixes=_SHAPE_FIXES,
                )
            parts.append(inner["items"])
            prev = inner["prev"]
        return [item for part in reversed(parts) for item in part]


_SHAPE_FIXES = (
    "restore the cassette and its blob store from git (`git checkout -- <cassettes folder>`)",
    rerecord_fix(None),
    "list every problem: `agentreplay verify <cassette>`",
)


def _parse_blob(data: bytes, sha: str, target: Path) -> object:
    try:
        value = parse_fast(data)
    except NestingTooDeep as exc:
        raise CassetteLimitError(
            f"payload blob {sha} is nested too deeply to parse ({exc})",
            evidence=[f"file: {target}"],
            fixes=_fixes(sha),
        ) from None
    if value is not UNPARSED:
        return value
    try:
        return json.loads(data, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        raise CassetteCorruptError(
            f"payload blob {sha} is not JSON: {exc}", place=str(target), fixes=_fixes(sha)
        ) from None


# A cassette's folder named ``cassettes`` -> its ``.blobs``: decided by the name alone, so kept (every test's
# load and save ask it again); the walk further up reads the file system, so it is never kept.
_IN_CASSETTE_DIR: dict[str, Path] = {}


def default_blob_dir(cassette_path: Path | str) -> Path:
    """``.blobs`` in the nearest ``cassettes`` ancestor (or one holding ``.blobs``), else next to the file."""
    # Walked as strings: a Path per ancestor cost more than the stat calls (every test's load asks). A
    # Path's text has no trailing or doubled separator: its dirname is its parent's text.
    path = cassette_path if isinstance(cassette_path, Path) else Path(cassette_path)
    parent = os.path.dirname(str(path.absolute()))
    known = _IN_CASSETTE_DIR.get(parent)
    if known is not None:
        return known
    if os.path.basename(parent) == DEFAULT_CASSETTE_DIR and len(_IN_CASSETTE_DIR) < 1024:
        known = _IN_CASSETTE_DIR[parent] = Path(parent, BLOB_DIR_NAME)
        return known
    ancestor, above = parent, os.path.dirname(parent)
    while os.path.basename(ancestor) != DEFAULT_CASSETTE_DIR:
        if os.path.isdir(os.path.join(ancestor, BLOB_DIR_NAME)):
            break
        if above == ancestor:
            return Path(parent, BLOB_DIR_NAME)
        ancestor, above = above, os.path.dirname(above)
    return Path(ancestor, BLOB_DIR_NAME)
