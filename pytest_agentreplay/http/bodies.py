"""Body encoding: raw bytes <-> the readable stored shapes, and content codings (gzip/deflate/br/zstd).

Stored shapes (``None`` when empty), each with its ``content_type``: ``{"json": value}`` (plus ``"raw"``, the
exact text, when no known serialisation of the key-sorted value reproduces the bytes), ``{"text": str}``,
``{"base64": str}``, ``{"sse": [event, ...]}`` or ``{"multipart": [...]}``. Bodies are stored decoded
(readable, diffable, scannable for secrets), ``"coding"`` noting their ``Content-Encoding``.

The streamed formats (SSE, NDJSON, the AWS event stream) are all stored as ``{"sse": [event, ...]}`` (the
list's name predates the others; the content type tells the format). A new format is one entry of
:data:`FORMATS`.
"""

from __future__ import annotations

import base64
import importlib
import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..core.constants import JSON_FORMATS
from ..core.documents import Document
from ..exceptions import ContentCodingError, EventStreamError
from . import eventstream, multipart, sse
from .sse import StreamParser

# Content codings undone here, each by the library named (None: the standard library; the others are
# optional, in the dev extras: only bodies of their coding need them).
KNOWN_CODINGS: dict[str, str | None] = {**dict.fromkeys(("gzip", "x-gzip", "deflate")), "br": "brotli"}
KNOWN_CODINGS["zstd"] = "zstandard"


def _detect_format(raw: bytes, value: object, sort_keys: bool = False) -> str | bool | None:
    """The name of the format reproducing ``raw`` exactly from ``value`` (``sort_keys``: with its keys
    sorted, as the cassette stores it); False when none does."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    newline = text.endswith("\n")
    core = text[:-1] if newline else text
    opening = _opening(value, sort_keys)
    encoders = _SORTED_ENCODERS if sort_keys else _ENCODERS
    for name, kwargs in JSON_FORMATS.items():
        if not _may_be(core, kwargs, opening):
            continue
        try:
            if encoders[name].encode(value) == core:
                if newline:
                    return f"{name or 'compact'}+nl"
                return name
        except (TypeError, ValueError):
            return False
    return False


def _opening(value: object, sort_keys: bool) -> tuple[str, str] | None:
    """How a non-empty object's text begins: ``{``, its first key (ASCII-escaped, and as is), a colon."""
    if not isinstance(value, dict) or not value:
        return None
    try:
        first = min(value) if sort_keys else next(iter(value))
    except TypeError:
        return None
    if not isinstance(first, str):
        return None
    return "{" + json.dumps(first) + ":", "{" + json.dumps(first, ensure_ascii=False) + ":"


def _may_be(core: str, kwargs: dict[str, Any], opening: tuple[str, str] | None) -> bool:
    """False when ``core`` cannot be the output of ``json.dumps(value, **kwargs)``, told from its first
    characters alone: a mismatch found here saves serialising the whole body (a conversation's request is
    tried against each format in turn, and most clients send the third one)."""
    ascii_only = kwargs.get("ensure_ascii", True)
    if ascii_only and not core.isascii():
        return False
    indented = kwargs.get("indent") is not None
    if core[:2] in ("{\n", "[\n"):
        return indented
    if indented and core[:1] in "{[" and core[1:2] not in "}]":
        return False
    if opening is None:
        return True
    prefix = opening[0] if ascii_only else opening[1]
    if indented or not core.startswith(prefix):
        return False  # an indented object's text starts with "{\n", tried above
    spaced = kwargs.get("separators") is None
    # A JSON value's text never starts with a space: the character after the colon tells the separator.
    return (core[len(prefix) : len(prefix) + 1] == " ") == spaced


# One encoder per format, built once: ``json.dumps`` with options builds a new encoder per call.
_ENCODERS: dict[str | None, json.JSONEncoder] = {k: json.JSONEncoder(**v) for k, v in JSON_FORMATS.items()}
# The same with sorted keys (``json.dumps(value, sort_keys=True, **kwargs)``): what a response is tried with.
_SORTED_ENCODERS = {k: json.JSONEncoder(sort_keys=True, **v) for k, v in JSON_FORMATS.items()}

# ``json.encoder.c_make_encoder``'s product: (value, indent level) -> the text's chunks.
_CEncoder = Callable[[object, int], Iterable[str]]


def _c_encoder(fmt: str | None) -> _CEncoder | None:
    """The C encoder ``JSONEncoder.encode`` would make for ``fmt``, made once: making one costs as much as
    encoding a small body. No markers dict (threads would share it): parsed JSON cannot be circular."""
    make = getattr(json.encoder, "c_make_encoder", None)
    kwargs = JSON_FORMATS[fmt]
    if make is None or kwargs.get("indent") is not None:
        return None
    encoder = _ENCODERS[fmt]
    quote = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    separators = (encoder.key_separator, encoder.item_separator)
    flags = (encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    encode: _CEncoder = make(None, encoder.default, quote, None, *separators, *flags)
    return encode


_C_ENCODERS: dict[str | None, _CEncoder | None] = {k: _c_encoder(k) for k in JSON_FORMATS}


def json_text(value: object, fmt: str | None) -> str:
    """``value`` as text in format ``fmt`` (a name of ``JSON_FORMATS``, without ``+nl``)."""
    fast = _C_ENCODERS[fmt]
    if fast is not None and not isinstance(value, str):
        return "".join(fast(value, 0))
    return _ENCODERS[fmt].encode(value)


# Content types whose bodies are text even though they are not ``text/*``.
_TEXTUAL_APPLICATION = (
    "application/x-www-form-urlencoded",
    "application/xml",
    "application/javascript",
    "application/x-ndjson",
    "application/graphql",
)


def media_type(content_type: str | None) -> str:
    """``"application/json"`` from ``"Application/JSON; charset=utf-8"``."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


class StreamFormat(NamedTuple):
    media_types: frozenset[str]
    parser: Callable[[], StreamParser]
    encode: Callable[[Mapping[str, object]], bytes]
    # Parsed even when the body need not be kept byte for byte (a request body, a decision summary):
    # an NDJSON request (a bulk upload) is plain text.
    always: bool = True

    def parse_all(self, raw: bytes) -> list[Document]:
        """A complete stream's events (``t`` is 0: the arrival times are unknown); damage raises."""
        parser = self.parser()
        events = parser.feed(raw) + parser.finish()
        error = getattr(parser, "error", None)  # the AWS event stream's parser stops at a damaged message
        if error is not None:
            raise error
        for ev in events:
            ev["t"] = 0.0
        return events


SSE = StreamFormat(frozenset({"text/event-stream"}), sse.SSEParser, sse.encode_event)
EVENTSTREAM = StreamFormat(
    frozenset({eventstream.MEDIA_TYPE}), eventstream.EventStreamParser, eventstream.encode_event
)
NDJSON = StreamFormat(sse.NDJSON_MEDIA_TYPES, sse.NDJSONParser, sse.encode_line, always=False)
FORMATS: tuple[StreamFormat, ...] = (SSE, EVENTSTREAM, NDJSON)


def format_for(content_type: str | None, *, exact: bool = True) -> StreamFormat | None:
    """The stream format of a body of ``content_type`` (None: not a stream). ``exact``: the body is kept
    byte for byte (a response), so a format parsed only then counts."""
    media = media_type(content_type)
    return next((f for f in FORMATS if (exact or f.always) and media in f.media_types), None)


def is_json_type(content_type: str | None) -> bool:
    # Every JSON flavour stays structured (vcrpy only handled exactly ``application/json``).
    mt = media_type(content_type)
    return mt == "application/json" or mt.endswith("+json") or mt.endswith("/json")


def codings(value: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` value in the order they were applied (``identity`` left out)."""
    names = [e.strip().lower() for e in (value or "").split(",")]
    return [n for n in names if n and n != "identity"]


# One coding being undone, fed its bytes as they arrive: its decompress and flush (zlib's objects' methods).
_Step = tuple[Callable[[bytes], bytes], Callable[[], bytes]]


class Decoder:
    """Incremental content decoder for one ``Content-Encoding`` value (possibly a chain), so a live stream's
    events are timed when they arrive. A chain holding an unknown coding is not decoded at all (``coding``
    is None): undoing only part of it yields neither the bytes received nor the content."""

    def __init__(self, encoding: str | None) -> None:
        names = codings(encoding)
        self.coding: str | None = None
        self._steps: list[_Step] = []
        if names and all(n in KNOWN_CODINGS for n in names):
            # Encodings are applied in order, so they are undone in reverse order.
            self._steps = [_make_step(n, encoding or "") for n in reversed(names)]
            self.coding = ", ".join(names)

    @property
    def active(self) -> bool:
        return bool(self._steps)

    def feed(self, data: bytes) -> bytes:
        for decompress, _ in self._steps:
            data = decompress(data)
        return data

    def flush(self) -> bytes:
        # Each step's tail flows through the steps after it.
        out = b""
        for decompress, flush in self._steps:
            out = decompress(out) + flush()
        return out


class _Deflate:
    """ "deflate" is zlib-wrapped per the RFC, but some servers send it raw: the first bytes tell which."""

    def __init__(self) -> None:
        self._obj: zlib._Decompress | None = None

    def decompress(self, data: bytes) -> bytes:
        if self._obj is None and data:
            self._obj = zlib.decompressobj()
            try:
                return self._obj.decompress(data)
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data) if self._obj is not None else b""

    def flush(self) -> bytes:
        return self._obj.flush() if self._obj is not None else b""


def _make_step(name: str, header: str) -> _Step:
    if name in ("gzip", "x-gzip"):
        gzipped = zlib.decompressobj(zlib.MAX_WBITS | 16)
        return gzipped.decompress, gzipped.flush
    if name == "deflate":
        deflated = _Deflate()
        return deflated.decompress, deflated.flush
    try:
        library = importlib.import_module(str(KNOWN_CODINGS[name]))
    except ImportError as exc:
        raise _missing_library(name, header) from exc
    if name == "br":
        return library.Decompressor().process, lambda: b""  # brotli's decompressor keeps no tail
    # A body may be several frames in a row (RFC 8878 allows it; servers flushing a stream do it).
    frames = library.ZstdDecompressor().decompressobj(read_across_frames=True)
    return frames.decompress, frames.flush


def _missing_library(name: str, header: str) -> ContentCodingError:
    package = KNOWN_CODINGS[name]
    return ContentCodingError(
        f"a body arrived with Content-Encoding {header!r}, and {package} (needed to decode {name}) is "
        "not installed: it cannot be scanned for secrets, so it is not recorded",
        evidence=[f"import {package}: not found"],
        place=f"Content-Encoding: {header}",
        fixes=[
            f"install it: python -m pip install {package} (it is in the dev extras)",
            f"or stop the client from accepting {name}: leave {name} out of its Accept-Encoding header",
        ],
    )


def decode_content(data: bytes, encoding: str | None) -> bytes:
    if not data or not encoding:
        return data
    dec = Decoder(encoding)
    return dec.feed(data) + dec.flush()


def encode_content(data: bytes, encoding: str) -> bytes:
    """Apply ``encoding`` (a coding or a chain like ``"gzip, br"``) to ``data``: replay hands a client that
    does not decode a coding the coded bytes it read while recording; test servers use it too."""
    for name in codings(encoding):
        if name not in KNOWN_CODINGS:
            raise ValueError(f"unsupported content encoding {encoding!r}")
        if name == "deflate":
            data = zlib.compress(data)
        elif KNOWN_CODINGS[name] is None:  # gzip
            import gzip  # only where replay hands a client gzip-coded bytes

            data = gzip.compress(data, mtime=0)
        else:  # brotli.compress, zstandard.compress
            data = importlib.import_module(str(KNOWN_CODINGS[name])).compress(data)
    return data


def encode_body(
    raw: bytes, content_type: str | None, *, exact: bool = False, coding: str | None = None
) -> Document | None:
    """Decoded raw bytes -> the stored BODY shape. ``exact`` (a response, which replay serves): keep the
    exact text of a JSON body that no known serialisation of its key-sorted value reproduces. ``coding``:
    the content coding ``raw`` was decoded from, noted on the body."""
    body = _encode_body(raw, content_type, exact)
    if body is not None and coding:
        body["coding"] = coding
    return body


def _encode_body(raw: bytes, content_type: str | None, exact: bool) -> Document | None:
    if not raw:
        return None
    if not exact and multipart.is_multipart(content_type):
        # A request (never served): its parts, so that a new boundary is no new body.
        parts = multipart.stored(raw, str(content_type))
        if parts is not None:
            return parts
    stream = format_for(content_type, exact=exact)
    if stream is not None:
        # Stored as events (the content type tells the wire format); a damaged stream as it came.
        try:
            return {"sse": stream.parse_all(raw), "content_type": content_type}
        except EventStreamError:
            return {"base64": base64.b64encode(raw).decode("ascii"), "content_type": content_type}
    if is_json_type(content_type) or (not content_type and raw[:1] in (b"{", b"[")):
        try:
            value = json.loads(raw)
        except ValueError:
            pass
        else:
            body: Document = {"json": value, "content_type": content_type}
            fmt = _detect_format(raw, value, sort_keys=exact)
            if isinstance(fmt, str):
                body["format"] = fmt
            elif fmt is False and exact:
                # A response no known serialisation reproduces (key order, spacing, number spelling): still
                # structured for review and comparison, and the exact text kept to be served (a request is
                # never served: its values are what diffs compare).
                try:
                    body["raw"] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    return {"base64": base64.b64encode(raw).decode("ascii"), "content_type": content_type}
            return body
    mt = media_type(content_type)
    textual = mt.startswith("text/") or mt in _TEXTUAL_APPLICATION or mt.endswith("+xml")
    if not content_type or textual or is_json_type(content_type):
        try:
            return {"text": raw.decode("utf-8"), "content_type": content_type}
        except UnicodeDecodeError:
            pass
    return {"base64": base64.b64encode(raw).decode("ascii"), "content_type": content_type}


def body_bytes(body: Document | None) -> bytes:
    """The stored BODY shape -> bytes to serve (SSE rendered whole; see :func:`iter_body`)."""
    if not body:
        return b""
    if "json" in body:
        exact = body.get("raw")
        if isinstance(exact, str):
            return exact.encode("utf-8")
        fmt = body.get("format")
        name = fmt.removesuffix("+nl") if fmt else None  # "compact+nl": the default format, a newline after
        out = json_text(body["json"], name if name in _ENCODERS else None)
        return (out + "\n" if fmt and fmt.endswith("+nl") else out).encode("utf-8")
    if "text" in body:
        return str(body["text"]).encode("utf-8")
    if "base64" in body:
        return base64.b64decode(body["base64"])
    if "sse" in body:
        encode = event_encoder(body)
        return b"".join(encode(ev) for ev in body["sse"])
    if isinstance(body.get("multipart"), list):
        return multipart.render(body["multipart"])
    return b""


def event_encoder(body: Document) -> Callable[[Mapping[str, object]], bytes]:
    """How a stored stream's events go back on the wire, told by the content type it arrived with."""
    content_type = body.get("content_type")
    fmt = format_for(content_type if isinstance(content_type, str) else None)
    return fmt.encode if fmt is not None else sse.encode_event


def normalise_for_match(body: Document | None) -> str:
    """A compact, order-independent key of a body, for matching reads and writes."""
    if not body:
        return ""
    if "json" not in body:
        for kind in ("text", "base64"):
            if kind in body:
                return str(body[kind])
    # A multipart body part by part: names, file names, content types, content.
    value = body["json"] if "json" in body else body["multipart"] if "multipart" in body else body.get("sse")
    return _SORTED_ENCODERS[None].encode(value)  # json.dumps(sort_keys=True, compact, ensure_ascii=False)
