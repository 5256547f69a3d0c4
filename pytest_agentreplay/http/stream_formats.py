"""The streamed response formats stored as events, one entry each: server-sent events, newline-delimited
JSON (Ollama) and the AWS event stream (Bedrock).

A stream is stored as ``{"sse": [event, ...], "content_type": ...}`` whatever its format (the list's name
predates the other formats; the cassette format stays as it is), and the content type it arrived with tells
which format turns the events back into wire bytes. Recording (``recording.LiveCapture``), storing
(``bodies``) and serving (``exchange.HttpResponse``) ask :func:`format_for` and nothing else: a new stream
format is one entry in :data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from ..core.documents import Document
from . import eventstream, ndjson, sse

__all__ = ["FORMATS", "StreamFormat", "StreamParser", "format_for"]


class StreamParser(Protocol):
    """Parses a stream as its chunks arrive: the events complete so far, then the rest at the end."""

    def feed(self, chunk: bytes) -> list[Document]: ...

    def finish(self) -> list[Document]: ...


class StreamFormat(NamedTuple):
    name: str
    matches: Callable[[str | None], bool]
    parser: Callable[[], StreamParser]
    parse_all: Callable[[bytes], list[Document]]
    encode: Callable[[Mapping[str, object]], bytes]
    # Parsed even when the body need not be kept byte for byte (a request body, a decision summary):
    # an NDJSON request (a bulk upload) is plain text.
    always: bool = True


def _is_sse(content_type: str | None) -> bool:
    return bool(content_type) and str(content_type).split(";", 1)[0].strip().lower() == "text/event-stream"


FORMATS: tuple[StreamFormat, ...] = (
    StreamFormat("sse", _is_sse, sse.SSEParser, sse.parse_all, sse.encode_event),
    StreamFormat(
        "aws-eventstream",
        eventstream.is_eventstream_type,
        eventstream.EventStreamParser,
        eventstream.parse_all,
        eventstream.encode_event,
    ),
    StreamFormat(
        "ndjson",
        ndjson.is_ndjson_type,
        ndjson.NDJSONParser,
        ndjson.parse_all,
        ndjson.encode_line,
        always=False,
    ),
)


def format_for(content_type: str | None, *, exact: bool = True) -> StreamFormat | None:
    """The stream format of a body of ``content_type`` (None: not a stream). ``exact``: the body is kept
    byte for byte (a response), so a format parsed only then counts."""
    for fmt in FORMATS:
        if (exact or fmt.always) and fmt.matches(content_type):
            return fmt
    return None
