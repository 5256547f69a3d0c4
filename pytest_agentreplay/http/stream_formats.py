"""The streamed formats stored as events (SSE, NDJSON, the AWS event stream), each as ``{"sse": [event, ...],
"content_type": ...}`` (the list's name predates the others; the content type tells the format). A new
format is one entry of :data:`FORMATS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..core.documents import Document
from . import eventstream, sse
from .sse import StreamParser

__all__ = ["EVENTSTREAM", "FORMATS", "NDJSON", "SSE", "StreamFormat", "StreamParser", "format_for"]


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
    media = content_type.split(";", 1)[0].strip().lower() if content_type else ""
    return next((f for f in FORMATS if (exact or f.always) and media in f.media_types), None)
