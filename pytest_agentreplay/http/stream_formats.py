"""The streamed response formats stored as events: server-sent events, newline-delimited JSON (Ollama) and
the AWS event stream (Bedrock).

A stream is stored as ``{"sse": [event, ...], "content_type": ...}`` whatever its format (the list's name
predates the other formats), and its content type tells which format turns the events back into wire bytes.
Recording, storing and serving ask :func:`format_for` and nothing else: a new format is one entry of
:data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..core.documents import Document
from . import eventstream, ndjson, sse
from .sse import StreamParser

__all__ = ["FORMATS", "StreamFormat", "StreamParser", "format_for"]


class StreamFormat(NamedTuple):
    name: str
    media_types: frozenset[str]
    parser: Callable[[], StreamParser]
    parse_all: Callable[[bytes], list[Document]]
    encode: Callable[[Mapping[str, object]], bytes]
    # Parsed even when the body need not be kept byte for byte (a request body, a decision summary):
    # an NDJSON request (a bulk upload) is plain text.
    always: bool = True


FORMATS: tuple[StreamFormat, ...] = (
    StreamFormat("sse", frozenset({"text/event-stream"}), sse.SSEParser, sse.parse_all, sse.encode_event),
    StreamFormat(
        "aws-eventstream",
        frozenset({eventstream.MEDIA_TYPE}),
        eventstream.EventStreamParser,
        eventstream.parse_all,
        eventstream.encode_event,
    ),
    StreamFormat(
        "ndjson", ndjson.MEDIA_TYPES, ndjson.NDJSONParser, ndjson.parse_all, ndjson.encode_line, always=False
    ),
)


def format_for(content_type: str | None, *, exact: bool = True) -> StreamFormat | None:
    """The stream format of a body of ``content_type`` (None: not a stream). ``exact``: the body is kept
    byte for byte (a response), so a format parsed only then counts."""
    media = content_type.split(";", 1)[0].strip().lower() if content_type else ""
    return next((f for f in FORMATS if (exact or f.always) and media in f.media_types), None)
