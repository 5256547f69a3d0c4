"""Where a streamed response is stored.

A conversation's messages go to the blob store one by one because every later call resends them; a
stream's events are never sent again, so storing each apart shares nothing and only leaves a chain of
small files and a cassette that shows hashes. A stream is placed whole instead: in the cassette, event by
event and readable, while each event is within the inline limit plain payloads use and the whole stream
within :data:`STREAM_INLINE_FACTOR` times it; else as one blob. Either way the stored events are the
recorded ones (chunk boundaries, ``raw`` text, arrival times), so replay serves the same bytes.
"""

from __future__ import annotations

from ..core.canonical import dumps_compact
from ..core.documents import Document
from .blobs import PendingBlobs, plan_externalize

# A stream of small events stays in the cassette up to this many inline limits (64 KiB at the default
# 2 KiB): beyond it, a long answer's hundreds of deltas would bury the rest of the run in review.
STREAM_INLINE_FACTOR = 32


def plan_payload(value: object, inline_limit: int) -> tuple[Document, PendingBlobs]:
    """Where a payload goes (see :func:`blobs.plan_externalize`), a streamed response (its body's ``sse``
    events) placed whole."""
    body = value.get("body") if isinstance(value, dict) else None
    events = body.get("sse") if isinstance(body, dict) else None
    if not isinstance(events, list):
        return plan_externalize(value, inline_limit)
    size = len(dumps_compact(value).encode("utf-8"))
    if size <= inline_limit or (
        size <= inline_limit * STREAM_INLINE_FACTOR
        and all(len(dumps_compact(event).encode("utf-8")) <= inline_limit for event in events)
    ):
        return {"inline": value}, {}
    return plan_externalize(value, inline_limit, split=False)
