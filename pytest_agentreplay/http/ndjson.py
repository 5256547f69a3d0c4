"""Newline-delimited JSON streams (Ollama's native API), one event per line stored like server-sent events
(:mod:`.sse`): ``{"data": parsed JSON or the line's text, "t": seconds}``, ``raw`` with blank lines before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..core.documents import Document
from .sse import LineParser, data_text, parse_data

# Media types of newline-delimited JSON: Ollama sends the first; the others name the same format.
MEDIA_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})


class NDJSONParser(LineParser):
    """Feed bytes as they arrive; every complete line comes back from :meth:`feed` as one event."""

    BREAKS = re.compile(r"([^\n]*)(\n)")

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
