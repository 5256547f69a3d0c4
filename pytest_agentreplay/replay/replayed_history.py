"""The replayed history as the comparison reads it and an accepted update writes it: each replayed event
redacted once, like the recorded event at its place.

A part of a replayed event equal to the same part of its recorded twin is that recorded part
(``Redactor.redact``'s ``like``): an unchanged part costs a comparison, not a redaction. A model call whose
body hashes like a recorded one (``data.request_hash``, taken before redaction) sent that body, so the
recorded (redacted) body stands for its own. Against a recording without the transport request headers
(``cassette.stored_form``) the compared events leave them out too; what an update writes keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import final

from ..cassette.stored_form import holds_transport_headers, without_transport_headers
from ..core.documents import Document
from ..core.events import Event, event_to_shared_dict
from ..redaction import RedactedEvent, Redactor, redact_event


@final
class RecordedSide:
    """A recording's events and their dicts (``event_to_shared_dict``), made together: ``dicts[i]`` is
    ``events[i]``'s. Read only, like the records (frozen) and containers it shares."""

    __slots__ = ("dicts", "events")

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = tuple(events)
        self.dicts = [event_to_shared_dict(event) for event in self.events]


class ReplayedHistory:
    """``events`` redacted against ``recorded`` (its events too when it is a :class:`RecordedSide`: what a
    replayed event shares with the one at its place is taken as saved). ``keep_headers``: the transport
    headers a save keeps whatever its setting (``cassette.stored_form``).

    ``compared``: the replayed events as the comparison reads them; ``views``: what an accepted update
    writes (``cassette.write.save_cassette``)."""

    __slots__ = ("_by_hash", "_events", "_recorded", "_redactor", "_views", "compared")

    def __init__(
        self,
        events: Sequence[Event],
        recorded: Sequence[Document] | RecordedSide,
        redactor: Redactor,
        keep_headers: frozenset[str] = frozenset(),
    ) -> None:
        if isinstance(recorded, RecordedSide):
            # What a served exchange holds of the event at its place is that event's: its dict, as saved.
            twins, recorded = recorded.events, recorded.dicts
            self._events = [
                event_to_shared_dict(event, (twins[i], recorded[i]) if i < len(twins) else None)
                for i, event in enumerate(events)
            ]
        else:
            self._events = [event_to_shared_dict(event) for event in events]
        self._recorded, self._redactor = recorded, redactor
        self._by_hash: dict[str, Document] = {}
        for twin in recorded:
            if twin.get("type") == "model.call":
                digest, body = (twin.get("data") or {}).get("request_hash"), _json_body(twin)
                if isinstance(digest, str) and body is not None:
                    self._by_hash.setdefault(digest, body)
        self._views: list[RedactedEvent] | None = None
        if holds_transport_headers(recorded, keep=keep_headers):
            self._views = self._redacted(self._events)
            self.compared = [view.doc for view in self._views]
        else:
            self.compared = [view.doc for view in self._redacted(self._events, keep_headers)]

    @property
    def views(self) -> list[RedactedEvent]:
        """The replayed events redacted whole, transport headers and all."""
        if self._views is None:
            self._views = self._redacted(self._events)
        return self._views

    def _redacted(
        self, events: Sequence[Document], strip: frozenset[str] | None = None
    ) -> list[RedactedEvent]:
        """``events`` redacted; ``strip``: with the transport headers it does not name left out first (a
        request then the same as the recorded one at its place is that one's record)."""
        recorded, redactor = self._recorded, self._redactor
        views, known = [], redactor.known.count
        for index, replayed in enumerate(events):
            at, kind = recorded[index] if index < len(recorded) else None, replayed["type"]
            like = at if at and at.get("type") == kind else None
            if kind == "model.call":
                replayed, like = _sent_as_recorded(replayed, like, self._by_hash)
            if strip is not None:
                replayed = without_transport_headers(replayed, strip, like)
            views.append(redact_event(replayed, redactor, like))
        if redactor.known.count == known:  # no secret learnt on the way: every view is fresh
            return views
        return [view.current(redactor) for view in views]


def _json_body(event: Mapping[str, object] | None) -> Document | None:
    """The JSON body of an event's inline request (None when it has none)."""
    ref = event.get("input_ref") if event is not None else None
    inline = ref.get("inline") if isinstance(ref, dict) else None
    body = inline.get("body") if isinstance(inline, dict) else None
    return body if isinstance(body, dict) and "json" in body else None


def _sent_as_recorded(
    event: Document, like: Document | None, by_hash: Mapping[str, Document]
) -> tuple[Document, Document | None]:
    """A model call ``event`` and what it is like (the recorded event at its place); one that sent a recorded
    body, with that body in place of its own (the same JSON; its other members, its format, compared)."""
    digest = event.get("data", {}).get("request_hash")
    recorded = by_hash.get(digest) if isinstance(digest, str) else None
    body = _json_body(event) if recorded is not None else None
    if body is None or recorded is None or _rest(body) != _rest(recorded):
        return event, like
    ref = event["input_ref"]
    sent = {**event, "input_ref": {**ref, "inline": {**ref["inline"], "body": recorded}}}
    # Its rest is like the request recorded at its place (a conversation may send one body twice).
    twin = (like or {}).get("input_ref") or {}
    if (twin.get("inline") or {}).get("body") is recorded:
        return sent, like  # the recorded request itself: what it shares, the comparison finds by identity
    return sent, {
        **(like or {}),
        "input_ref": {**twin, "inline": {**(twin.get("inline") or {}), "body": recorded}},
    }


def _rest(body: Document) -> Document:
    return {k: v for k, v in body.items() if k != "json"}
