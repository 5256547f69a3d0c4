"""The line-based streams: server-sent events and newline-delimited JSON (Ollama's native API), each with
an incremental parser (for teeing live streams) and the encoder used in replay. Stored event: ``{"event"?,
"data": parsed JSON or text, "id"?, "t": seconds}`` (an NDJSON line: ``data`` only), plus ``raw``, its exact
wire text (with the blank lines before an NDJSON line), when encoding the stored event would differ (replay
serves it).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Mapping
from typing import Protocol

from ..core.documents import Document


class StreamParser(Protocol):
    """Parses a stream as its chunks arrive: the events complete so far, then the rest at the end."""

    def feed(self, chunk: bytes) -> list[Document]: ...

    def finish(self) -> list[Document]: ...


def parse_data(raw: str) -> object:
    """An event's data as stored: its JSON value when it reads as a JSON object or array, else the text
    (shared by the stream formats: SSE data, an NDJSON line, an event-stream payload)."""
    if raw[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def data_text(data: object, sort_keys: bool) -> str:
    """An event's stored data as wire text: a string as it is, anything else compact JSON (``sort_keys``: as
    from a cassette, keys sorted)."""
    if isinstance(data, str):
        return data
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)


class LineParser:
    """A text stream's lines as its bytes arrive (``BREAKS``: what ends a line), and each event's wire text
    kept as ``raw`` when rendering the stored event (``encode``) would not give it back."""

    BREAKS = r"([^\r\n]*)(\r\n|\r|\n)"

    def __init__(self, encode: Callable[..., bytes]) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._encode = encode
        # The last event read: a stream's trailing comments or blank lines join its raw text.
        self._last: Document | None = None

    def _lines(self, chunk: bytes, *, final: bool) -> list[tuple[str, str]]:
        """(line, its wire text with the line break) of each line complete (``final``: and the rest)."""
        text = self._pending + self._decoder.decode(chunk, final=final)
        # A trailing "\r" may be the first half of "\r\n": hold that line until the next chunk,
        # else the "\n" would read as a blank line and dispatch the event early.
        held_cr = not final and text.endswith("\r")
        body = text[:-1] if held_cr else text
        parts = [(found.group(1), found.group(0)) for found in re.finditer(self.BREAKS, body)]
        tail = body[sum(len(wire) for _, wire in parts) :]  # the lines found are the text up to the tail
        self._pending = "" if final else tail + "\r" if held_cr else tail
        if final and tail:
            parts.append((tail, tail))
        return parts

    def _kept(self, ev: Document, raw: str) -> Document:
        if self._encode(ev, sort_keys=True).decode("utf-8") != raw:
            ev["raw"] = raw
        self._last = ev
        return ev

    def _trailing(self, text: str) -> None:
        """Text after the last event (blank lines, comments) joins its wire text."""
        last = self._last
        if text and last is not None:
            last["raw"] = str(last.get("raw") or self._encode(last).decode("utf-8")) + text


class SSEParser(LineParser):
    def __init__(self) -> None:
        super().__init__(encode_event)
        self._next_event()

    def _next_event(self) -> None:
        self._event: str | None = None
        self._id: str | None = None
        self._data: list[str] = []
        self._has_fields = False
        self._raw: list[str] = []  # the wire text of the event being read

    def feed(self, chunk: bytes) -> list[Document]:
        return self._consume(self._lines(chunk, final=False))

    def finish(self) -> list[Document]:
        events = self._consume(self._lines(b"", final=True))
        # A stream cut without the final blank line still delivered its last event to the client.
        if self._has_fields:
            events.append(self._dispatch())
        else:
            self._trailing("".join(self._raw))
            self._raw = []
        return events

    def _consume(self, parts: list[tuple[str, str]]) -> list[Document]:
        events: list[Document] = []
        for line, wire in parts:
            self._raw.append(wire)
            if not line:
                if self._has_fields:
                    events.append(self._dispatch())
                continue
            if line.startswith(":"):
                continue  # comment / keep-alive
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                self._id = value
            else:
                continue  # "retry" and unknown fields do not change what the client sees
            self._has_fields = True
        return events

    def _dispatch(self) -> Document:
        ev: Document = {}
        if self._event is not None:
            ev["event"] = self._event
        ev["data"] = parse_data("\n".join(self._data)) if self._data else None
        if self._id is not None:
            ev["id"] = self._id
        raw = "".join(self._raw)
        self._next_event()
        return self._kept(ev, raw)


def encode_event(ev: Mapping[str, object], *, sort_keys: bool = False) -> bytes:
    """One stored event -> its wire bytes (ends with the blank line that dispatches it): its ``raw``
    text when the stream had one, else rendered (``sort_keys``: as from a cassette, keys sorted)."""
    raw = ev.get("raw")
    if isinstance(raw, str):
        return raw.encode("utf-8")
    out = [f"{field}: {ev[field]}\n" for field in ("event", "id") if ev.get(field) is not None]
    data = ev.get("data")
    if data is not None:
        out.extend(f"data: {line}\n" for line in data_text(data, sort_keys).split("\n"))
    out.append("\n")
    return "".join(out).encode("utf-8")


# Media types of newline-delimited JSON: Ollama sends the first; the others name the same format.
NDJSON_MEDIA_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})


class NDJSONParser(LineParser):
    """Feed bytes as they arrive; every complete line comes back from :meth:`feed` as one event."""

    BREAKS = r"([^\n]*)(\n)"

    def __init__(self) -> None:
        super().__init__(encode_line)
        # Blank lines read since the last event: they join the next event's wire text.
        self._blank = ""

    def feed(self, chunk: bytes) -> list[Document]:
        return self._read(self._lines(chunk, final=False))

    def finish(self) -> list[Document]:
        # A stream cut without its last newline still delivered that line to the client.
        events = self._read(self._lines(b"", final=True))
        self._trailing(self._blank)
        self._blank = ""
        return events

    def _read(self, parts: list[tuple[str, str]]) -> list[Document]:
        events: list[Document] = []
        for line, wire in parts:
            if line.strip():
                events.append(self._kept({"data": parse_data(line.strip())}, self._blank + wire))
                self._blank = ""
            else:
                self._blank += wire
        return events


def encode_line(ev: Mapping[str, object], *, sort_keys: bool = False) -> bytes:
    """One stored event -> its wire bytes (ending with its newline): its ``raw`` text when the stream had
    one, else rendered compact (``sort_keys``: as from a cassette, keys sorted)."""
    raw = ev.get("raw")
    if isinstance(raw, str):
        return raw.encode("utf-8")
    return (data_text(ev.get("data"), sort_keys) + "\n").encode("utf-8")
