"""Request headers a cassette leaves out: the ones the HTTP stack or the SDK's version chooses
(``TRANSPORT_HEADERS``), which say nothing about the agent and would make every re-recording after an SDK
upgrade a diff of every request; the project's idempotency header stays, as replay matches writes by it.
What is kept, and the ``transport_headers`` setting, is docs/cassettes.md's.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, TRANSPORT_HEADERS
from ..core.documents import Document
from .stored_form import MEDIA_FULL, Resolver

# In memory and in formats 1-3 the full media type; in format 4's stored form its alias.
_REQUEST_MEDIA: Final = frozenset(
    {HTTP_REQUEST_MEDIA_TYPE, *(a for a, f in MEDIA_FULL.items() if f == HTTP_REQUEST_MEDIA_TYPE)}
)
_TRANSPORT: Final = re.compile(
    "|".join(re.escape(name).replace(r"\*", ".*") for name in TRANSPORT_HEADERS), re.IGNORECASE
)


def is_transport_header(name: str) -> bool:
    return _TRANSPORT.fullmatch(name) is not None


@functools.lru_cache(maxsize=1024)
def _dropped(names: tuple[object, ...], keep: frozenset[str]) -> frozenset[object]:
    """The names of ``names`` (a request's header names) left out: the transport headers ``keep`` (lower-case
    names) does not name. Cached: every request of a run sends the same few names."""
    return frozenset(k for k in names if is_transport_header(str(k)) and str(k).lower() not in keep)


def _request(event: object, resolve: Resolver | None = None) -> tuple[Document, Document, Document] | None:
    """(ref, payload, headers) of an event's HTTP request with header names. One kept in the blob store is
    read through ``resolve`` (without it, or when it cannot be read, it holds none)."""
    ref = event.get("input_ref") if isinstance(event, dict) else None
    if not isinstance(ref, dict) or ref.get("media_type") not in _REQUEST_MEDIA:
        return None
    payload = ref.get("inline")
    if payload is None and resolve is not None and isinstance(ref.get("sha256"), str):
        try:
            payload = resolve(ref)
        except Exception:  # an unreadable blob: the save that follows reports it if it matters
            payload = None
    headers = payload.get("headers") if isinstance(payload, dict) else None
    return (ref, payload, headers) if isinstance(payload, dict) and isinstance(headers, dict) else None


def without_transport_headers(event: Document, keep: frozenset[str] = frozenset()) -> Document:
    """``event`` with its inline HTTP request's transport headers left out, except those ``keep`` names
    (lower-case: the idempotency header). A new dict where it changes: the event's containers may be shared
    with other events."""
    found = _request(event)
    if found is None or not (dropped := _dropped(tuple(found[2]), keep)):
        return event
    ref, payload, headers = found
    kept = {k: v for k, v in headers.items() if k not in dropped}
    return {**event, "input_ref": {**ref, "inline": {**payload, "headers": kept}}}


def holds_transport_headers(
    events: object, resolve: Resolver | None = None, keep: frozenset[str] = frozenset()
) -> bool:
    """Whether any request of ``events`` (a cassette's event list, loaded or as stored) holds a transport
    header other than those ``keep`` names (see :func:`_request` for one kept in the blob store); one stored
    as a delta takes its headers from an earlier request or states them itself, so it is covered by the
    others."""
    if not isinstance(events, list | tuple):  # JSON's arrays: an ABC check per event cost more than the rest
        return False
    return any((found := _request(event, resolve)) and _dropped(tuple(found[2]), keep) for event in events)
