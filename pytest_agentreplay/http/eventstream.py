"""The AWS binary event stream (``application/vnd.amazon.eventstream``): each message (both CRCs checked)
stored as a readable event, and rebuilt byte for byte in replay.

Stored event: ``{"event": ":event-type value", "headers": [[name, value], [name, value, type], ...], "data":
payload (parsed JSON, or text), "raw": payload text, "t": seconds}``. ``headers`` keeps the wire order (a
cassette sorts object keys) and rebuilding reads it; a non-string header carries its type (``bytes`` in
base64, ``uuid`` in hex, ``timestamp`` in ms). A ``chunk`` event's base64 ``bytes`` is decoded to the
model's JSON; a payload that is not UTF-8 is kept as ``base64``; bytes after the last whole message (a
stream closed early) are a last event ``{"truncated": base64}``, served as they came.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping

from ..core.documents import Document
from ..exceptions import EventStreamError
from .sse import data_text, parse_data

MEDIA_TYPE = "application/vnd.amazon.eventstream"

_PRELUDE = struct.Struct(">III")
_CRC = struct.Struct(">I")
_PRELUDE_LEN = _PRELUDE.size
_MIN_MESSAGE = _PRELUDE_LEN + _CRC.size
# The service's own limits (a message up to 16 MiB, headers up to 128 KiB): a larger length is damage.
_MAX_MESSAGE = 16 * 1024 * 1024
_MAX_HEADERS = 128 * 1024

# Wire type byte (the index) -> the name stored beside a header value that is not a string.
_TYPES = ("bool", "bool", "byte", "short", "integer", "long", "bytes", "string", "timestamp", "uuid")
# The integers' packing, by type byte (a bool is its type byte, a uuid 16 bytes, the others sized).
_INTS = {kind: struct.Struct(fmt) for kind, fmt in ((2, ">b"), (3, ">h"), (4, ">i"), (5, ">q"), (8, ">q"))}
# The header naming a message for a reader, by message type.
_NAMING_HEADERS = (":event-type", ":exception-type", ":error-code")


def _crc(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def _read_headers(raw: memoryview) -> list[list[object]]:
    headers: list[list[object]] = []
    offset = 0
    while offset < len(raw):
        name_end = offset + 1 + raw[offset]
        name = bytes(raw[offset + 1 : name_end]).decode("utf-8")
        kind = raw[name_end]
        offset = name_end + 1
        value: object
        if kind >= len(_TYPES):
            raise EventStreamError(
                f"an event stream message has a header {name!r} of unknown type {kind}",
                evidence=[f"header value types 0-9 are defined; found {kind}"],
                fixes=["the response is not an AWS event stream as documented: report the service"],
            )
        if kind in (0, 1):
            value = kind == 0
        elif kind in _INTS:
            (value,) = _INTS[kind].unpack_from(raw, offset)
            offset += _INTS[kind].size
        elif kind == 9:
            value = bytes(raw[offset : offset + 16]).hex()
            offset += 16
        else:
            (size,) = struct.unpack_from(">H", raw, offset)
            offset += 2
            data = bytes(raw[offset : offset + size])
            offset += size
            value = data.decode("utf-8") if kind == 7 else base64.b64encode(data).decode("ascii")
        headers.append([name, value] if kind == 7 else [name, value, _TYPES[kind]])
    return headers


def _damaged(what: str, evidence: list[str]) -> EventStreamError:
    return EventStreamError(
        f"an AWS event stream message is damaged ({what}): it cannot be recorded as the client read it",
        evidence=evidence,
        fixes=[
            "run the test again: a stream damaged in transit is not reproducible",
            "if it recurs, the endpoint does not speak the AWS event stream format its content type names",
        ],
    )


def decode_message(message: bytes) -> Document:
    """One whole message, its prelude checked by the parser -> its stored event (the message CRC checked)."""
    view = memoryview(message)
    total, headers_len, _ = _PRELUDE.unpack_from(view)
    (message_crc,) = _CRC.unpack_from(view, total - _CRC.size)
    computed = _crc(view[: total - _CRC.size])
    if computed != message_crc:
        raise _damaged(
            "message CRC mismatch", [f"message CRC {message_crc:#010x}, computed {computed:#010x}"]
        )
    headers_end = _PRELUDE_LEN + headers_len
    try:
        headers = _read_headers(view[_PRELUDE_LEN:headers_end])
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise _damaged("malformed headers", [f"{type(exc).__name__}: {exc}"]) from exc
    payload = bytes(view[headers_end : total - _CRC.size])
    named = {str(h[0]): h[1] for h in headers}
    name = next((named[key] for key in _NAMING_HEADERS if isinstance(named.get(key), str)), None)
    ev: Document = {"event": name, "headers": headers} if name is not None else {"headers": headers}
    _store_payload(ev, payload)
    return ev


def _store_payload(ev: Document, payload: bytes) -> None:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        ev["base64"] = base64.b64encode(payload).decode("ascii")
        return
    if not text:
        ev["data"] = None
        return
    data = parse_data(text)
    if ev.get("event") == "chunk" and isinstance(data, dict):
        data = _decode_chunk(data)
    ev["data"] = data
    if _payload(ev, sort_keys=True) != payload:
        ev["raw"] = text


def _decode_chunk(data: dict[str, object]) -> dict[str, object]:
    """A ``chunk`` event's base64 ``bytes`` -> the model's JSON (left as it is when it is not JSON)."""
    encoded = data.get("bytes")
    if not isinstance(encoded, str):
        return data
    try:
        inner = base64.b64decode(encoded, validate=True).decode("utf-8")
        value = json.loads(inner)
    except (binascii.Error, ValueError):
        return data
    if not isinstance(value, dict | list):
        return data
    return {**data, "bytes": value}


class EventStreamParser:
    """Feed bytes as they arrive; whole messages come back from :meth:`feed` as stored events. A damaged
    message stops the parsing: :attr:`error` says why, :meth:`received` holds every byte received."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._all = bytearray()
        self.error: EventStreamError | None = None

    def received(self) -> bytes:
        return bytes(self._all)

    def feed(self, chunk: bytes) -> list[Document]:
        self._all += chunk
        if self.error is not None:
            return []
        self._buf += chunk
        events: list[Document] = []
        try:
            while len(self._buf) >= _PRELUDE_LEN:
                total, headers_len, prelude_crc = _PRELUDE.unpack_from(self._buf)
                # Checked before waiting for ``total`` bytes: a damaged length would wait for bytes that
                # never come.
                if _crc(bytes(self._buf[:8])) != prelude_crc:
                    raise _damaged("prelude CRC mismatch", [f"prelude bytes {bytes(self._buf[:12]).hex()}"])
                if (
                    total < _MIN_MESSAGE
                    or total > _MAX_MESSAGE
                    or headers_len > min(_MAX_HEADERS, total - _MIN_MESSAGE)
                ):
                    raise _damaged(
                        "impossible lengths", [f"total length {total}, headers length {headers_len}"]
                    )
                if len(self._buf) < total:
                    break
                message = bytes(self._buf[:total])
                del self._buf[:total]
                events.append(decode_message(message))
        except EventStreamError as exc:
            self.error = exc
        return events

    def finish(self) -> list[Document]:
        if self.error is not None or not self._buf:
            return []
        tail = base64.b64encode(bytes(self._buf)).decode("ascii")
        self._buf.clear()
        return [{"truncated": tail}]


def _chunk_payload(data: Mapping[str, object], sort_keys: bool) -> Mapping[str, object]:
    inner = data.get("bytes")
    if isinstance(inner, str) or inner is None:
        return data
    text = data_text(inner, sort_keys)
    return {**data, "bytes": base64.b64encode(text.encode("utf-8")).decode("ascii")}


def _payload(ev: Mapping[str, object], *, sort_keys: bool = False) -> bytes:
    raw = ev.get("raw")
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(ev.get("base64"), str):
        return base64.b64decode(str(ev["base64"]))
    data = ev.get("data")
    if data is None:
        return b""
    if ev.get("event") == "chunk" and isinstance(data, Mapping):
        data = _chunk_payload(data, sort_keys)
    return data_text(data, sort_keys).encode("utf-8")


def _header_bytes(header: object) -> bytes:
    if not isinstance(header, list | tuple) or len(header) < 2:
        raise EventStreamError(
            f"a stored event stream header is not [name, value] or [name, value, type]: {header!r}",
            evidence=["stored events are written by the recorder; this one was edited"],
            fixes=["re-record the test, or restore the cassette from version control"],
        )
    name = str(header[0]).encode("utf-8")
    value = header[1]
    type_name = header[2] if len(header) > 2 else "string"
    kind = _TYPES.index(type_name) if type_name in _TYPES else 7
    out = bytes([len(name)]) + name
    if kind in (0, 1):
        return out + bytes([0 if value else 1])
    if kind in _INTS:
        return out + bytes([kind]) + _INTS[kind].pack(int(str(value)))
    if kind == 9:
        return out + bytes([9]) + uuid.UUID(hex=str(value)).bytes
    data = base64.b64decode(str(value)) if kind == 6 else str(value).encode("utf-8")
    return out + bytes([kind]) + struct.pack(">H", len(data)) + data


def encode_message(headers: Iterable[object], payload: bytes) -> bytes:
    """One message's wire bytes, both CRCs computed."""
    head = b"".join(_header_bytes(h) for h in headers)
    total = _MIN_MESSAGE + len(head) + len(payload)
    prelude = struct.pack(">II", total, len(head))
    prelude += _CRC.pack(_crc(prelude))
    body = prelude + head + payload
    return body + _CRC.pack(_crc(body))


def encode_event(ev: Mapping[str, object]) -> bytes:
    """One stored event -> the wire bytes of its message (a kept truncated tail as it came)."""
    tail = ev.get("truncated")
    if isinstance(tail, str):
        return base64.b64decode(tail)
    headers = ev.get("headers")
    return encode_message(headers if isinstance(headers, list) else [], _payload(ev))
