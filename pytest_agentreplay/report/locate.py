"""Where a drift difference sits in the cassette file: the 1-based line a reviewer looks at in the diff,
following the stored form (inline payloads, request deltas, the blob store). One linear scan per cassette."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..cassette.blobs import BlobStore, default_blob_dir
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE

# A blob-stored payload by its sha256 (None when it cannot be read).
BlobReader = Callable[[str], Any]

_REQUEST_MEDIA = ("@http-request", HTTP_REQUEST_MEDIA_TYPE)  # as stored, or as written by hand
_LEAN_DATA_FIELDS = ("method", "url")
_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a string (one C-level match, however long)
    r"|[{}\[\]]"
    r"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null"
)
_INDEX = re.compile(r"\[(\d+)\]\Z")


class _Node:
    """A JSON value and the line it starts on (a member: the line of its key)."""

    __slots__ = ("line", "value")

    def __init__(self, line: int, value: Any) -> None:
        self.line = line
        # dict[str, _Node] | list[_Node] | the raw JSON text of a scalar
        self.value = value

    def child(self, token: str) -> _Node | None:
        if isinstance(self.value, dict):
            return self.value.get(token)
        if isinstance(self.value, list):
            match = _INDEX.match(token)
            if match is not None:
                i = int(match.group(1))
                return self.value[i] if i < len(self.value) else None
        return None

    def scalar(self) -> Any:
        """The scalar's value (None for an object, an array or undecodable text)."""
        if not isinstance(self.value, str):
            return None
        try:
            return json.loads(self.value)
        except ValueError:
            return None


def _index(text: str) -> _Node | None:
    """The tree of lines of a JSON text (None when it is not JSON). One pass, no recursion."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    root: _Node | None = None
    stack: list[_Node] = []
    key: str | None = None
    key_line = 0
    line, last = 1, 0
    for match in _TOKEN.finditer(text):
        start = match.start()
        line += text.count("\n", last, start)
        last = start
        raw = match.group()
        if raw == "}" or raw == "]":
            if stack:
                stack.pop()
            continue
        parent = stack[-1] if stack else None
        in_object = parent is not None and isinstance(parent.value, dict)
        if in_object and key is None:
            key = raw[1:-1] if "\\" not in raw else str(json.loads(raw))
            key_line = line
            continue
        node = _Node(key_line if in_object else line, {} if raw == "{" else [] if raw == "[" else raw)
        if parent is None:
            root = node
        elif isinstance(parent.value, dict) and key is not None:
            parent.value[key] = node
        elif isinstance(parent.value, list):
            parent.value.append(node)
        key = None
        if raw == "{" or raw == "[":
            stack.append(node)
    return root


def _walk(node: _Node, tokens: tuple[str, ...]) -> int:
    """The line of ``tokens`` below ``node``, or of the deepest enclosing value; a key holding dots (split
    by the display path) is tried joined again."""
    i = 0
    while i < len(tokens):
        child = node.child(tokens[i])
        step = 1
        if child is None and isinstance(node.value, dict):
            joined = tokens[i]
            for j in range(i + 1, len(tokens)):
                if tokens[j].startswith("["):
                    break
                joined += "." + tokens[j]
                child = node.child(joined)
                if child is not None:
                    step = j - i + 1
                    break
        if child is None:
            raw = node.child("raw") if tokens[i] == "json" else None
            # A response kept byte for byte is stored as ``raw`` only, and parsed on load.
            return raw.line if raw is not None else node.line
        node = child
        i += step
    return node.line


class CassetteIndex:
    """The lines of one cassette text, for locating any number of differences in it."""

    def __init__(self, text: str, *, read_blob: BlobReader | None = None) -> None:
        self.root = _index(text)
        self.read_blob = read_blob
        events = self.root.child("events") if self.root is not None else None
        self.events: list[_Node] = (
            [e for e in events.value if isinstance(e.value, dict)]
            if events is not None and isinstance(events.value, list)
            else []
        )
        # The position in ``events`` of each seq (of the first event that has it).
        self._by_seq: dict[int, int] = {}
        for position, event in enumerate(self.events):
            found = event.child("seq")
            value = found.scalar() if found is not None else position
            if isinstance(value, int) and not isinstance(value, bool):
                self._by_seq.setdefault(value, position)
        self._endpoints: dict[int, tuple[str, str] | None] = {}
        self._blobs: dict[str, Any] = {}

    def locate(self, seq: int, path_tokens: tuple[str, ...]) -> int | None:
        """The 1-based line holding the value at ``path_tokens`` (``Difference.path_tokens``) of event
        ``seq``, or the nearest enclosing line; None when no event has that seq."""
        position = self._by_seq.get(seq)
        if position is None:
            return None
        event = self.events[position]
        try:
            return self._in_event(position, event, tuple(path_tokens))
        except Exception:  # an unexpected shape: the event's line is still right
            return event.line

    def _in_event(self, position: int, event: _Node, tokens: tuple[str, ...]) -> int:
        if not tokens or tokens[0].startswith("@"):
            return event.line  # a whole event (@presence, @order)
        head, rest = tokens[0], tokens[1:]
        if head in ("input_ref", "output_ref"):
            ref = event.child(head)
            if ref is None:
                return event.line
            if head == "input_ref" and _is_request(ref):
                return self._in_request(position, rest)  # maybe a delta, maybe in the blob store
            payload = ref.child("inline")
            if payload is None:
                sha = ref.child("sha256")
                return sha.line if sha is not None else _walk(ref, rest)
            return _walk(payload, rest)
        # What an HTTP event's request says is left out of it: data.method/url, the default tool name.
        lean = head == "data" and len(rest) == 1 and rest[0] in _LEAN_DATA_FIELDS
        request = rest if lean else ("url",) if head == "tool" and rest == ("name",) else None
        ref = event.child("input_ref")
        if request and _lacks(event, tokens) and ref is not None and _is_request(ref) and ref.child("inline"):
            return self._in_request(position, request)
        return _walk(event, tokens)

    def _in_request(self, position: int, tokens: tuple[str, ...]) -> int:
        """A field of a request payload, following deltas to the earlier request that stores it."""
        for _ in range(len(self.events) + 1):
            ref = self.events[position].child("input_ref")
            if ref is None:
                return self.events[position].line
            payload = ref.child("inline")
            if payload is None:  # in the blob store: its line, unless the blob is a delta keeping the field
                sha = ref.child("sha256")
                if sha is None:
                    return ref.line
                blob = self._blob(sha.scalar())
                following = (
                    self._next(position, blob, _route(blob, tokens)[0]) if isinstance(blob, dict) else None
                )
                if following is None:
                    return sha.line
                position = following
                continue
            if not isinstance(payload.value, dict):
                return payload.line
            # What routing reads (method, url, the delta spec, the headers), not the body.
            outline = {k: _plain(v) for k, v in payload.value.items() if k != "body"}
            where, here = _route(outline, tokens)
            following = self._next(position, outline, where)
            if following is None:
                return _walk(payload, here if where == "here" else tokens)
            position = following
        return self.events[position].line

    def _next(self, position: int, payload: dict[str, Any], where: str) -> int | None:
        if where == "prev":  # ``"headers": "@prev"``: the request before, whatever its endpoint
            return next((earlier for earlier, _ in self._earlier_requests(position)), None)
        if where != "base":
            return None
        spec = payload.get("delta")
        back = spec.get("back") if isinstance(spec, dict) else None
        endpoint = _pair(payload.get("method"), payload.get("url"))
        if endpoint is None or not isinstance(back, int) or isinstance(back, bool) or back < 1:
            return None
        return self._base(position, endpoint, back)

    def _earlier_requests(self, position: int) -> Iterator[tuple[int, _Node]]:
        """(position, input_ref) of each request before ``position``, nearest first."""
        for earlier in range(position - 1, -1, -1):
            ref = self.events[earlier].child("input_ref")
            if ref is not None and _is_request(ref):
                yield earlier, ref

    def _base(self, position: int, endpoint: tuple[str, str], back: int) -> int | None:
        """The ``back``-th earlier request to ``endpoint`` (None when it cannot be told)."""
        for earlier, ref in self._earlier_requests(position):
            found = self._endpoint(earlier, ref)
            if found is None and ref.child("inline") is None:
                return None  # a blob-stored request that cannot be read: the count is unknown
            if found == endpoint:
                back -= 1
                if back == 0:
                    return earlier
        return None

    def _endpoint(self, position: int, ref: _Node) -> tuple[str, str] | None:
        """(method, url) of a request the encoder counts as a base (a JSON object body), else None."""
        if position in self._endpoints:
            return self._endpoints[position]
        found: tuple[str, str] | None = None
        payload = ref.child("inline")
        if payload is not None:
            method, url = payload.child("method"), payload.child("url")
            body = payload.child("body")
            body_json = body.child("json") if body is not None else None
            if method is not None and url is not None and isinstance(getattr(body_json, "value", None), dict):
                found = _pair(method.scalar(), url.scalar())
        else:
            sha = ref.child("sha256")
            blob = self._blob(sha.scalar() if sha is not None else None)
            if isinstance(blob, dict):
                body = blob.get("body")
                counted = isinstance(body, dict) and isinstance(body.get("json"), dict)
                # A blob read that is no base is counted under no endpoint (not as unknown).
                found = (_pair(blob.get("method"), blob.get("url")) if counted else None) or ("", "")
        self._endpoints[position] = found
        return found

    def _blob(self, sha: Any) -> Any:
        """A blob-stored payload (None when there is no reader or it cannot be read)."""
        if self.read_blob is None or not isinstance(sha, str):
            return None
        if sha not in self._blobs:
            try:
                self._blobs[sha] = self.read_blob(sha)
            except Exception:
                self._blobs[sha] = None
        return self._blobs[sha]


def _plain(node: _Node) -> Any:
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.scalar()


def _route(payload: dict[str, Any], tokens: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Where a stored request keeps the field at ``tokens``: ``here`` (at the returned tokens: a list item
    after the kept ones moves down), its delta ``base``, or the ``prev``ious request."""
    spec = payload.get("delta")
    spec = spec if isinstance(spec, dict) else {}
    head = tokens[0] if tokens else None
    if head == "headers":
        headers, how = payload.get("headers"), spec.get("headers")
        if how == "same":
            return "base", tokens
        if how == "base":
            stored = len(tokens) > 1 and isinstance(headers, dict) and tokens[1] in headers
            return ("here" if stored else "base"), tokens
        return ("prev" if headers == "@prev" else "here"), tokens
    spec_json = spec.get("json")
    if not isinstance(spec_json, dict) or head != "body" or len(tokens) < 3 or tokens[1] != "json":
        return "here", tokens
    key = tokens[2]
    same, extends = spec_json.get("same"), spec_json.get("extends")
    if isinstance(same, list) and key in same:
        return "base", tokens
    kept = extends.get(key) if isinstance(extends, dict) else None
    item = _INDEX.match(tokens[3]) if len(tokens) > 3 else None
    if not isinstance(kept, int) or isinstance(kept, bool) or item is None:
        return "here", tokens
    i = int(item.group(1))
    if i < kept:
        return "base", tokens
    return "here", (*tokens[:3], f"[{i - kept}]", *tokens[4:])


def _lacks(node: _Node, tokens: tuple[str, ...]) -> bool:
    for token in tokens:
        child = node.child(token)
        if child is None:
            return True
        node = child
    return False


def _pair(method: Any, url: Any) -> tuple[str, str] | None:
    return (method, url) if isinstance(method, str) and isinstance(url, str) else None


def _is_request(ref: _Node) -> bool:
    media = ref.child("media_type")
    return media is not None and media.scalar() in _REQUEST_MEDIA


class Locator:
    """Locates differences in cassette files, indexing each file once while it is unchanged."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[tuple[int, int], CassetteIndex | None]] = {}

    def index(self, cassette_path: str | os.PathLike[str]) -> CassetteIndex | None:
        path = Path(cassette_path)
        try:
            stat = path.stat()
        except (OSError, ValueError):
            return None
        signature = (stat.st_mtime_ns, stat.st_size)
        key = str(path.absolute())
        cached = self._files.get(key)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError, ValueError):
            found = None
        else:
            found = CassetteIndex(text, read_blob=BlobStore(default_blob_dir(path)).load)
            if found.root is None:
                found = None
        self._files[key] = (signature, found)
        return found

    def locate(
        self, cassette_path: str | os.PathLike[str], seq: int, path_tokens: tuple[str, ...]
    ) -> int | None:
        found = self.index(cassette_path)
        return found.locate(seq, path_tokens) if found is not None else None


__all__ = ["CassetteIndex", "Locator"]
