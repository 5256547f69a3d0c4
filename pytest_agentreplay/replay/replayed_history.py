"""The replayed history as the comparison reads it and an accepted update writes it: each replayed event
redacted once (``redaction.redact_event``), like the recorded event at its place.

The recorded side was redacted when it was saved. A part of a replayed event equal to the same part of its
recorded twin is that recorded part (``Redactor.redact``'s ``like``): an unchanged response, tool result or
header costs a comparison, not a redaction. A conversation resends its whole history on every model call:
a call whose request body hashes like a recorded one (``data.request_hash``, taken over the body before
redaction) sent that body, so the recorded (redacted) body stands for its own and is found by identity,
and only the rest of the request (method, URL, headers) is redacted. A view made before the run learnt a
secret is redone (``RedactedEvent.current``).

Against a recording that left out the transport request headers (``cassette.transport_headers``), the
compared events leave them out too: comparison ignores them, and a project rule on one compares only
cassettes that keep them. An update's save keeps or leaves them out by its own setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import is_
from typing import NamedTuple

from ..cassette.transport_headers import holds_transport_headers, without_transport_headers
from ..core.canonical import same_json
from ..core.documents import Document
from ..core.events import Event, event_to_shared_dict
from ..redaction import RedactedEvent, Redactor, redact_event


class ReplayedHistory(NamedTuple):
    views: list[RedactedEvent]  # what an accepted update writes (``cassette.write.save_cassette``)
    compared: list[Document]  # the same events as the comparison reads them


def redacted_replay(
    events: Sequence[Event],
    recorded: Sequence[Document],
    redactor: Redactor,
    keep_headers: frozenset[str] = frozenset(),
) -> ReplayedHistory:
    """``events`` redacted against ``recorded``. ``keep_headers``: the transport headers a save keeps
    whatever its setting (``cassette.transport_headers``)."""
    by_hash: dict[str, Document] = {}
    for twin in recorded:
        digest, body = (twin.get("data") or {}).get("request_hash"), _json_body(twin)
        if twin.get("type") == "model.call" and isinstance(digest, str) and body is not None:
            by_hash.setdefault(digest, body)
    views = []
    for index, event in enumerate(events):
        replayed = event_to_shared_dict(event)
        at = recorded[index] if index < len(recorded) else None
        sent, like = _sent_as_recorded(
            replayed, at if at and at.get("type") == replayed["type"] else None, by_hash
        )
        views.append(redact_event(sent, redactor, like))
    views = [view.current(redactor) for view in views]
    compared = [view.doc for view in views]
    if not holds_transport_headers(recorded, keep=keep_headers):
        for index, doc in enumerate(compared):
            stripped = without_transport_headers(doc, keep_headers)
            if stripped is not doc and index < len(recorded):
                ref = _as_recorded(stripped["input_ref"], recorded[index].get("input_ref"))
                stripped = {**stripped, "input_ref": ref}
            compared[index] = stripped
    return ReplayedHistory(views, compared)


def _as_recorded(value: object, twin: object) -> object:
    """``value`` with each part equal to ``twin``'s being ``twin``'s, and ``twin`` itself when all are: the
    comparison settles shared objects by identity, equal ones by serialising them."""
    if value is twin or not isinstance(value, dict) or not isinstance(twin, dict):
        return twin if value is twin or same_json(value, twin) else value
    out = {k: _as_recorded(v, twin[k]) if k in twin else v for k, v in value.items()}
    same = out.keys() == twin.keys() and all(map(is_, out.values(), map(twin.__getitem__, out)))
    return twin if same else out


def _json_body(event: Mapping[str, object] | None) -> Document | None:
    """The JSON body of an event's inline request (None when it has none)."""
    ref = event.get("input_ref") if event is not None else None
    inline = ref.get("inline") if isinstance(ref, dict) else None
    body = inline.get("body") if isinstance(inline, dict) else None
    return body if isinstance(body, dict) and "json" in body else None


def _sent_as_recorded(
    event: Document, like: Document | None, by_hash: Mapping[str, Document]
) -> tuple[Document, Document | None]:
    """``event`` and what it is like (the recorded event at its place); a model call that sent a recorded
    body, with that body in place of its own (the same JSON; its other members, its format, compared)."""
    digest = event.get("data", {}).get("request_hash") if event.get("type") == "model.call" else None
    recorded = by_hash.get(digest) if isinstance(digest, str) else None
    body = _json_body(event)
    if body is None or recorded is None or _rest(body) != _rest(recorded):
        return event, like
    ref = event["input_ref"]
    sent = {**event, "input_ref": {**ref, "inline": {**ref["inline"], "body": recorded}}}
    # Its rest is like the request recorded at its place (a conversation may send one body twice).
    twin = (like or {}).get("input_ref") or {}
    return sent, {
        **(like or {}),
        "input_ref": {**twin, "inline": {**(twin.get("inline") or {}), "body": recorded}},
    }


def _rest(body: Document) -> Document:
    return {k: v for k, v in body.items() if k != "json"}


__all__ = ["ReplayedHistory", "redacted_replay"]
