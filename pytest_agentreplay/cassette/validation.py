"""Reading hostile cassettes safely: file checks, size and depth limits, payload shapes, raised (or
reported) as ``CassetteError``s. Cheap and lazy: a file is checked when opened, a blob when first read, a
payload when first resolved.
"""

from __future__ import annotations

import marshal
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

import jiter
import orjson

from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
from ..exceptions import CassetteError, CassetteFileTypeError, CassetteLimitError
from ..redaction.rules import BODY_KINDS

# A cassette is JSON a reviewer reads; a 6 MB file is already large.
MAX_CASSETTE_BYTES: Final = 256 * 1024 * 1024
MAX_BLOB_BYTES: Final = 64 * 1024 * 1024
# Blob bytes read to expand one payload (references shared between blobs count each time they expand).
MAX_EXPANDED_BYTES: Final = 64 * 1024 * 1024
# Nesting of a payload, inline or resolved through blobs: far beyond real API payloads, well inside what
# the recursive consumers (diff, redaction, JSON encoders) can walk. Cassette files stop at 200 (jiter).
MAX_DEPTH: Final = 128

_READ_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
SHA: Final = re.compile(r"[0-9a-f]{64}")  # a blob's address
_BASE64: Final = re.compile(r"[A-Za-z0-9+/\s]*={0,2}\s*")
# The keys of a body whose value is a string or null; with ``json`` or ``text`` (one of them at most), what a
# JSON or text body holds (:func:`_plain_body`).
_STRING_OR_NULL: Final = ("content_type", "format", "raw", "coding")
_BODY_KEYS: Final = frozenset({*BODY_KINDS, *_STRING_OR_NULL})
# A part of a multipart body (``http/multipart.py``): a body's content keys, named, maybe a file.
_PART_KEYS: Final = frozenset({"json", "text", "base64", "content_type", "name", "filename", "headers"})


_FILE_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_file(
    path: Path,
    *,
    limit: int,
    label: str,
    root: Path | None = None,
    root_real: str | None = None,
    cassette: Path | str | None = None,
    fixes: Sequence[str] = (),
) -> bytes:
    """The bytes of ``path`` if it is a regular file (inside ``root`` once symlinks are resolved) of at most
    ``limit`` bytes, never blocking on a FIFO. ``FileNotFoundError`` passes through."""
    if root is not None or root_real is not None:
        base = root_real if root_real is not None else os.path.realpath(root)  # type: ignore[arg-type]
        real = _below_resolved(os.fspath(path), root, base) or os.path.realpath(path)
        if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
            raise CassetteFileTypeError(
                f"{label} is a symlink leading out of {root if root is not None else base}",
                evidence=[f"{path} -> {real}"],
                cassette=cassette,
                place=str(path),
                fixes=[
                    "replace the symlink by the file itself (cassettes and blobs are read only from inside "
                    "the cassette folder)",
                    *fixes,
                ],
            )
    else:
        real = os.path.realpath(path)
    fd = os.open(real, _READ_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "not a regular file")
            raise CassetteFileTypeError(
                f"{label} is {kind}, not a regular file",
                evidence=[f"path: {path}" + (f" -> {real}" if real != str(path) else "")],
                cassette=cassette,
                place=str(path),
                fixes=["replace it by the regular file from git (`git checkout -- <path>`)", *fixes],
            )
        if info.st_size > limit:
            raise _too_large(label, info.st_size, limit, path, cassette, fixes)
        chunks = [os.read(fd, info.st_size + 1)]
        total = len(chunks[0])
        while chunks[-1] and total <= limit:
            chunks.append(os.read(fd, min(1 << 20, limit + 1 - total)))
            total += len(chunks[-1])
        if total > limit:
            raise _too_large(label, total, limit, path, cassette, fixes)
        return chunks[0] if len(chunks) <= 2 and not chunks[-1] else b"".join(chunks)
    finally:
        os.close(fd)


def _below_resolved(path: str, root: Path | None, base: str) -> str | None:
    """``os.path.realpath(path)`` for a path under the absolute ``root`` (resolved: ``base``) without
    resolving ``root`` again, when each name below it is plain and no symlink; else None."""
    prefix = os.fspath(root) if root is not None else ""
    if not prefix or not os.path.isabs(prefix) or not path.startswith(prefix.rstrip(os.sep) + os.sep):
        return None
    names = path[len(prefix.rstrip(os.sep)) + 1 :].split(os.sep)
    if any(name in ("", ".", "..") for name in names):
        return None
    real = base
    for name in names:
        real = os.path.join(real, name)
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                return None
        except OSError:
            return None
    return real


def relocate(exc: CassetteError, cassette: Path | str | None, mode: str | None, place: str) -> CassetteError:
    """``exc`` (a blob's error) placed where a cassette refers to the blob, its own place kept as evidence."""
    return type(exc)(
        exc.headline,
        evidence=[*exc.evidence, *([exc.place] if exc.place else [])],
        cassette=cassette,
        mode=mode,
        place=place,
        fixes=exc.fixes,
    )


def _too_large(
    label: str, size: int, limit: int, path: Path, cassette: Path | str | None, fixes: Sequence[str]
) -> CassetteLimitError:
    return CassetteLimitError(
        f"{label} is larger than the limit of {limit // (1024 * 1024)} MiB",
        evidence=[f"{path}: {size} bytes or more"],
        cassette=cassette,
        place=str(path),
        fixes=["restore the file from git: `git checkout -- <path>`", *fixes],
    )


# -- parsing ---------------------------------------------------------------------------------------

UNPARSED: Final[object] = object()


class NestingTooDeep(ValueError):
    """JSON nested deeper than the fast parser goes (200 levels): damage, refused before anything walks it."""


def parse_fast(data: bytes) -> object:
    """``data`` parsed by jiter, faster than ``json.loads``; :data:`UNPARSED` when it refuses the bytes,
    whose errors ``json.loads`` then words. Raises :class:`NestingTooDeep`."""
    try:
        return jiter.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise NestingTooDeep(str(exc)) from None
        return UNPARSED


def reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


# -- shapes ----------------------------------------------------------------------------------------


def _marshal_form(value: Any) -> bytes:  # what marshal refuses, it raises for
    return marshal.dumps(value, 2)


_DEPTH_FORMS: Final[tuple[Callable[[object], bytes], ...]] = (orjson.dumps, _marshal_form)
_CONTAINERS: Final = (dict, list)  # a tuple: ``dict | list`` would build a union at every check


def depth_problem(value: object) -> str | None:
    """Iteratively: why ``value`` nests deeper than ``MAX_DEPTH``; None when it does not."""
    if not isinstance(value, _CONTAINERS):
        return None  # a scalar nests no deeper than where it stands
    # A value nests no deeper than it holds objects and lists, each written as one ``{`` or ``[`` by both
    # forms below: counting those bytes (strings holding them only count more) settles a real payload in C,
    # and a form no longer than the limit holds no more of them. What orjson refuses is marshal's
    # (version 2: no back-references), then the walk's.
    for dump in _DEPTH_FORMS:
        try:
            form = dump(value)
        except (TypeError, ValueError):
            continue  # not writable so, or deeper than it goes: the next form, then the walk below
        # ``[`` made ``{`` then counted: the replacement jumps (memchr), two thirds of counting both.
        if len(form) <= MAX_DEPTH or form.replace(b"[", b"{").count(b"{") <= MAX_DEPTH:
            return None
        break
    stack: list[tuple[dict[str, object] | list[object], int]] = [(value, 0)]
    while stack:  # only objects and lists are stacked
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        items = item.values() if isinstance(item, dict) else item
        stack.extend((v, depth + 1) for v in items if isinstance(v, _CONTAINERS))
    return None


def blob_problem(value: object, refs: list[str]) -> tuple[str, bool] | None:
    """Why a stored blob value cannot be expanded, and whether that is a limit (depth) rather than a shape
    problem; the blobs it references are added to ``refs`` on the way."""
    stack: list[tuple[object, int, str]] = [(value, 0, "$")]
    inner: Any
    while stack:
        item, depth, where = stack.pop()
        if not isinstance(item, _CONTAINERS):
            continue
        if depth >= MAX_DEPTH:
            return f"{where}: nested deeper than {MAX_DEPTH} levels", True
        key, inner = next(iter(item.items())) if isinstance(item, dict) and len(item) == 1 else (None, None)
        if key == "$blob":
            if not isinstance(inner, str) or not SHA.fullmatch(inner):
                return f"{where}.$blob: expected 64 lowercase hex digits, found {short(inner)}", False
            refs.append(inner)
        elif key == "$chain":
            if (problem := chain_problem(inner)) is not None:
                return f"{where}.$chain: {problem}", False
            if inner["prev"] is not None:
                refs.append(inner["prev"])
            stack.extend((v, depth + 2, f"{where}.$chain.items[{i}]") for i, v in enumerate(inner["items"]))
        elif key == "$lit":
            if not isinstance(inner, dict):
                return f"{where}.$lit: expected an object, found {short(inner)}", False
            stack.extend((v, depth + 2, f"{where}.$lit.{k}") for k, v in inner.items())
        elif isinstance(item, dict):
            stack.extend((v, depth + 1, f"{where}.{k}") for k, v in item.items())
        else:
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def chain_problem(inner: object) -> str | None:
    """Why ``inner`` is not a chain node body ``{"prev": sha | null, "items": [...]}``."""
    if not isinstance(inner, dict):
        return f"expected an object with prev and items, found {short(inner)}"
    if set(inner) != {"prev", "items"}:
        return f"expected exactly the keys items and prev, found {sorted(map(str, inner))}"
    prev = inner["prev"]
    if prev is not None and (not isinstance(prev, str) or not SHA.fullmatch(prev)):
        return f"prev must be null or 64 lowercase hex digits, found {short(prev)}"
    if not isinstance(inner["items"], list):
        return f"items must be a list, found {short(inner['items'])}"
    return None


def _headers_problem(headers: object) -> str | None:
    if not isinstance(headers, dict):
        return f"headers must be an object, found {short(headers)}"
    for name, value in headers.items():
        if not isinstance(value, str):
            return f"header {name!r} must be a string, found {short(value)}"
    return None


def _plain_body(body: dict[object, object]) -> bool:
    """Whether ``body`` is a well-typed JSON or text body (:func:`body_problem`'s fast path)."""
    kinds = 0
    for key, value in body.items():
        if key in _STRING_OR_NULL:
            if value is not None and not isinstance(value, str):
                return False
        elif key == "json" or (key == "text" and isinstance(value, str)):
            kinds += 1
        else:
            return False
    return kinds <= 1


def body_problem(body: object) -> str | None:
    """Why ``body`` is not a stored BODY shape (see ``http/bodies.py``)."""
    if body is None or (type(body) is dict and _plain_body(body)):
        return None
    if not isinstance(body, dict):
        return f"body must be an object or null, found {short(body)}"
    unknown = set(body) - _BODY_KEYS
    if unknown:
        return f"body has unknown key(s) {sorted(map(str, unknown))}"
    kinds = [kind for kind in BODY_KINDS if kind in body]
    if len(kinds) > 1:
        return f"body has more than one of {', '.join(BODY_KINDS)}: {', '.join(kinds)}"
    for key in _STRING_OR_NULL:
        if body.get(key) is not None and not isinstance(body[key], str):
            return f"body.{key} must be a string or null, found {short(body[key])}"
    if "text" in body and not isinstance(body["text"], str):
        return f"body.text must be a string, found {short(body['text'])}"
    if "base64" in body:
        b64 = body["base64"]
        if not isinstance(b64, str) or not _BASE64.fullmatch(b64) or len(re.sub(r"\s", "", b64)) % 4:
            return f"body.base64 is not base64, found {short(b64)}"
    if "sse" in body:
        events = body["sse"]
        if not isinstance(events, list):
            return f"body.sse must be a list of events, found {short(events)}"
        for index, event in enumerate(events):
            if not isinstance(event, dict):
                return f"body.sse[{index}] must be an object, found {short(event)}"
    if "multipart" in body:
        return _parts_problem(body["multipart"])
    return None


def _parts_problem(parts: object) -> str | None:
    if not isinstance(parts, list):
        return f"body.multipart must be a list of parts, found {short(parts)}"
    for index, part in enumerate(parts):
        where = f"body.multipart[{index}]"
        if not isinstance(part, dict):
            return f"{where} must be an object, found {short(part)}"
        unknown = set(part) - _PART_KEYS
        if unknown:
            return f"{where} has unknown key(s) {sorted(map(str, unknown))}"
        for key in ("name", "filename", "content_type", "text"):
            if part.get(key) is not None and not isinstance(part[key], str):
                return f"{where}.{key} must be a string, found {short(part[key])}"
        if "headers" in part and (problem := _headers_problem(part["headers"])) is not None:
            return f"{where}: {problem}"
        problem = body_problem({k: v for k, v in part.items() if k in ("text", "base64", "json")})
        if problem is not None:
            return f"{where}: {problem}"
    return None


def payload_problem(media_type: str | None, value: object) -> str | None:
    """Why a resolved payload does not have the shape its media type says; ``None`` when it does."""
    if media_type == HTTP_RESPONSE_MEDIA_TYPE:
        if not isinstance(value, dict):
            return f"an HTTP response payload must be an object, found {short(value)}"
        status = value.get("status", 200)
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 999:
            return f"status must be an HTTP status code, found {short(status)}"
    elif media_type == HTTP_REQUEST_MEDIA_TYPE:
        if not isinstance(value, dict):
            return f"an HTTP request payload must be an object, found {short(value)}"
        for key in ("method", "url"):
            if key in value and not isinstance(value[key], str):
                return f"{key} must be a string, found {short(value[key])}"
    else:
        return None
    # No headers (none or ``{}``) and no body, a usual request's, are settled without a call.
    headers = value.get("headers")
    if (
        headers is not None
        and (type(headers) is not dict or headers)
        and (problem := _headers_problem(headers)) is not None
    ):
        return problem
    body = value.get("body")
    return None if body is None else body_problem(body)


# The members of an HTTP response payload (``http/exchange.py``).
_RESPONSE_KEYS: Final = frozenset({"status", "headers", "body"})


def parsed_response_fits(value: dict[str, Any]) -> bool:
    """Whether a response payload whose ``json`` was parsed from its ``raw`` has its shape and depth, told
    without writing it out as :func:`depth_problem` does: each object and list of ``json`` is a ``{`` or
    ``[`` of ``raw`` (those in its strings only count more), two levels down. False says nothing: the checks
    one by one decide."""
    if not value.keys() <= _RESPONSE_KEYS or payload_problem(HTTP_RESPONSE_MEDIA_TYPE, value) is not None:
        return False
    body = value.get("body")
    raw = body.get("raw") if type(body) is dict else None
    limit = MAX_DEPTH - 2
    return isinstance(raw, str) and (len(raw) <= limit or raw.replace("[", "{").count("{") <= limit)


_REQUEST_KEYS: Final = frozenset({"method", "url", "headers", "body"})


def bodiless_request_fits(value: object) -> bool:
    """Whether a request payload without a body has its shape, and so its depth (only its headers nest),
    told without writing it out. False says nothing: the checks one by one decide."""
    return (
        type(value) is dict
        and value.get("body") is None
        and value.keys() <= _REQUEST_KEYS
        and payload_problem(HTTP_REQUEST_MEDIA_TYPE, value) is None
    )


def capped(items: list[str], limit: int, total: int | None = None) -> list[str]:
    """``items`` cut to ``limit``, the rest counted: of ``total`` when only the first few were built."""
    count = len(items) if total is None else total
    return items if count <= limit else [*items[:limit], f"... and {count - limit} more"]


def short(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
