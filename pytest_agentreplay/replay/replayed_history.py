"""The replayed history as the comparison sees it: redacted like the recording, at linear cost.

The recorded side was redacted when it was saved; the replayed side must be redacted the same way before
the two are compared. A conversation resends its whole history on every model call, so redacting every
replayed request whole costs the square of the conversation. A model call whose request body hashes like a
recorded one (``data.request_hash``, taken over the body before redaction) sent the same body: its redacted
form is the recorded one, so the recorded request is used as it is and only its small rest (method, URL,
headers, content type) is redacted and checked. Likewise any field of an event (its data, tool, refs,
timestamp) equal, type for type, to the same field of the recorded event at the same position needs no
redaction: the recorded field is redacted already, and redacting it again changes nothing. An event's data
is matched so key by key (its latency always differs). Redaction looks at a key and its value, never at
their neighbours, so redacting an event field by field is redacting it whole.

Against a recording that left out the transport request headers (``cassette.transport_headers``), the
replayed requests leave them out too: comparison ignores them, and without them a conversation's requests
are the recorded ones again, reused as they are.
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from typing import Any

from ..cassette.document import data_keys
from ..cassette.transport_headers import holds_transport_headers, without_transport_headers
from ..core.canonical import same_json
from ..core.documents import Document
from ..core.events import Event, event_to_shared_dict
from ..core.run_state import RunRedactor
from ..redaction import keep_idempotency_key

# Fields this package writes itself (when and where in the run): they hold nothing to redact.
_STAMPED = frozenset({"ts", "seq"})
_MEASURED = frozenset({"latency_ms"})  # in an event's data, measured by this package
# Event fields, and a ref's ``inline`` payload, compared with the recorded ones key by key.
_BY_KEY = frozenset({"data", "input_ref", "output_ref", "inline"})


def _without_json(ref: Any) -> Any:
    """The request ref with its JSON body left out (what the request hash does not cover)."""
    if not isinstance(ref, dict) or not isinstance(ref.get("inline"), dict):
        return None
    inline = ref["inline"]
    body = inline.get("body")
    if not isinstance(body, dict) or "json" not in body:
        return None
    rest = {k: v for k, v in body.items() if k != "json"}
    return {**ref, "inline": {**inline, "body": rest}}


def _body(ref: Any) -> Any:
    """The body of a request ref as :func:`_without_json` leaves it (None when it is not one)."""
    inline = ref.get("inline") if isinstance(ref, dict) else None
    body = inline.get("body") if isinstance(inline, dict) else None
    return body if isinstance(body, dict) else None


def _recorded_requests(recorded: Sequence[Document]) -> dict[str, Document]:
    by_hash: dict[str, Document] = {}
    for event in recorded:
        if event.get("type") != "model.call":
            continue
        digest = (event.get("data") or {}).get("request_hash")
        ref = event.get("input_ref")
        if isinstance(digest, str) and isinstance(ref, dict) and _without_json(ref) is not None:
            by_hash.setdefault(digest, ref)
    return by_hash


def redacted_replay(
    events: Sequence[Event],
    recorded: Sequence[Document],
    redactor: RunRedactor,
    keep_headers: frozenset[str] = frozenset(),
) -> list[Document]:
    """``events`` as redacted dicts; a request body sent as recorded is the recorded (redacted) one.
    ``keep_headers``: the transport headers a save would keep (``cassette.transport_headers``)."""
    replayed = _Replayed(recorded, redactor, keep_headers)
    out: list[Document] = []
    for index, event in enumerate(events):
        learnt = len(redactor.known)
        event_out = replayed.event(index, event)
        if len(redactor.known) != learnt:
            # A secret learnt in a later field of the event (a password after a note repeating it) is
            # replaced in its earlier fields too, as the whole-event redaction of a save does.
            event_out = replayed.event(index, event)
        out.append(event_out)
    return out


class _Replayed:
    """What redacting a replayed run's events one by one shares: the recorded requests by hash, the
    redacted rests of a conversation's requests."""

    def __init__(
        self, recorded: Sequence[Document], redactor: RunRedactor, keep_headers: frozenset[str]
    ) -> None:
        self.recorded = recorded
        self.redactor = redactor
        self.keep_headers = keep_headers
        self.by_hash = _recorded_requests(recorded)
        self.transport_headers = holds_transport_headers(recorded, keep=keep_headers)
        self.rests: dict[bytes, Any] = {}
        self.rests_known = len(redactor.known)

    def redacted_rest(self, rest: Document) -> Any:
        # The calls of a conversation send the same method, URL and headers: redacted once, again when the
        # run has learnt a secret since (a rest redacted before may hold it).
        if len(self.redactor.known) != self.rests_known:
            self.rests.clear()
            self.rests_known = len(self.redactor.known)
        try:
            key = marshal.dumps(rest)
        except ValueError:
            return self.redactor.redact(rest)
        if key not in self.rests:
            self.rests[key] = self.redactor.redact(rest)
        return self.rests[key]

    def event(self, index: int, event: Event) -> Document:
        redactor, recorded = self.redactor, self.recorded
        current = event_to_shared_dict(event)
        if not self.transport_headers:
            current = without_transport_headers(current, self.keep_headers)
        twin = recorded[index] if index < len(recorded) else None
        reused: Document = {}
        digest = current.get("data", {}).get("request_hash") if current.get("type") == "model.call" else None
        known = self.by_hash.get(digest) if isinstance(digest, str) else None
        if known is not None:
            live_rest = _without_json(current.get("input_ref"))
            if live_rest is not None:
                rest = self.redacted_rest(live_rest)
                known_rest = _without_json(known)
                if same_json(rest, known_rest):
                    reused["input_ref"] = known
                elif _body(rest) is not None and same_json(_body(rest), _body(known_rest)):
                    # Sent elsewhere, or with other headers (a client with brotli installed asks for
                    # "br"): the same body is still the recorded one, redacted; only the rest is new.
                    inline = {**rest["inline"], "body": known["inline"]["body"]}
                    reused["input_ref"] = {**rest, "inline": inline}
        if twin is not None and twin.get("type") != current.get("type"):
            twin = None
        keys = data_keys(current.get("type"))
        event_out: Document = {}
        for key, value in current.items():
            if key in reused:
                event_out[key] = reused[key]
            elif key in _STAMPED:
                event_out[key] = value
            elif twin is not None and key in twin and same_json(value, twin[key]):
                event_out[key] = twin[key]
            elif key == "data" and not keys:
                # The user's own names (record_value): only value-shape rules, as the save applied.
                event_out[key] = redactor.redact(value, keys=False)
            elif twin is not None and key in _BY_KEY:
                event_out[key] = _over_twin(value, twin.get(key), redactor, measured=key == "data")
            else:
                event_out.update(redactor.redact({key: value}))
        if "tool" in current:
            # The one rule reading a neighbour: an @tool argument carrying the idempotency key stays readable.
            event_out = keep_idempotency_key(redactor, current, event_out)
        return event_out


def _over_twin(data: Any, twin: Any, redactor: RunRedactor, *, measured: bool, depth: int = 2) -> Any:
    """A field of an event redacted key by key: a value equal to the recorded one at the same key is the
    recorded (already redacted) value. A replayed call that differs from its recording only by its latency
    redacts one number; a request that differs only by a header redacts its headers. Redaction looks at a
    key and its value, never at their neighbours, and the keys walked into (``_BY_KEY``) are plain names
    it passes through."""
    if not isinstance(data, dict) or not isinstance(twin, dict) or "content_type" in data:
        return redactor.redact(data)  # a dict shaped like a body is redacted as one, whole
    out: Document = {}
    for key, value in data.items():
        if key in twin and same_json(value, twin[key]):
            out[key] = twin[key]
        elif measured and key in _MEASURED:
            out[key] = value
        elif depth and key in _BY_KEY and isinstance(value, dict):
            out[key] = _over_twin(value, twin.get(key), redactor, measured=False, depth=depth - 1)
        else:
            out.update(redactor.redact({key: value}))
    return out


__all__ = ["redacted_replay"]
