"""Newline-delimited JSON streams (``application/x-ndjson``: Ollama's native API): an incremental parser and
the encoder replay serves them with. One event per line, stored like server-sent events (:mod:`.sse`):
``{"data": parsed JSON or the line's text, "t": seconds}``, ``raw`` also keeping the blank lines before it.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping

from ..core.documents import Document
from .sse import data_text, parse_data

# Media types of newline-delimited JSON: Ollama sends the first; the others name the same format.
MEDIA_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})


class NDJSONParser:
    """Feed bytes as they arrive; every complete line comes back from :meth:`feed` as one event."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        # Blank lines read since the last event: they join the next event's wire text.
        self._blank = ""
        self._last: Document | None = None

    def feed(self, chunk: bytes) -> list[Document]:
        text = self._pending + self._decoder.decode(chunk)
        lines = text.split("\n")
        self._pending = lines.pop()
        return [ev for line in lines if (ev := self._line(line + "\n")) is not None]

    def finish(self) -> list[Document]:
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        if tail.strip():
            # A stream cut without its last newline still delivered that line to the client.
            ev = self._line(tail)
            return [ev] if ev is not None else []
        trailing, self._blank = self._blank + tail, ""
        if trailing and self._last is not None:
            last = self._last
            last["raw"] = str(last.get("raw") or encode_line(last).decode("utf-8")) + trailing
        return []

    def _line(self, wire: str) -> Document | None:
        if not wire.strip():
            self._blank += wire
            return None
        ev: Document = {"data": parse_data(wire.strip())}
        raw = self._blank + wire
        if encode_line(ev, sort_keys=True).decode("utf-8") != raw:
            ev["raw"] = raw
        self._blank = ""
        self._last = ev
        return ev


def encode_line(ev: Mapping[str, object], *, sort_keys: bool = False) -> bytes:
    """One stored event -> its wire bytes (ending with its newline): its ``raw`` text when the stream had
    one, else rendered compact (``sort_keys``: as from a cassette, keys sorted)."""
    raw = ev.get("raw")
    if isinstance(raw, str):
        return raw.encode("utf-8")
    return (data_text(ev.get("data"), sort_keys) + "\n").encode("utf-8")
