"""The replayed history as the comparison sees it: redacted like the recording, at linear cost.

The recorded side was redacted when it was saved; the replayed side must be redacted the same way before
the two are compared. A conversation resends its whole history on every model call, so redacting every
replayed request whole costs the square of the conversation. A model call whose request body hashes like a
recorded one (``data.request_hash``, taken over the body before redaction) sent the same body: its redacted
form is the recorded one, so the recorded request is used as it is and only its small rest (method, URL,
headers, content type) is redacted and checked. Likewise any other part of an event (its data, tool, refs)
equal, type for type, to the part of the recorded event at the same position needs no redaction: the
recorded part is redacted already, and redacting it again changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..canonical import same_json
from ..events import Event, event_to_shared_dict
from ..redaction import Redactor

Document = dict[str, Any]


# The parts of an event that may hold something to redact, each checked against the recording on its own.
_PARTS = ("data", "tool", "effect", "input_ref", "output_ref")


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
    events: Sequence[Event], recorded: Sequence[Document], redactor: Redactor
) -> list[Document]:
    """``events`` as redacted dicts; a request body sent as recorded is the recorded (redacted) one."""
    by_hash = _recorded_requests(recorded)
    out: list[Document] = []
    for index, event in enumerate(events):
        current = event_to_shared_dict(event)
        twin = recorded[index] if index < len(recorded) else None
        reused: Document = {}
        digest = current.get("data", {}).get("request_hash") if current.get("type") == "model.call" else None
        known = by_hash.get(digest) if isinstance(digest, str) else None
        if known is not None:
            live_rest = _without_json(current.get("input_ref"))
            if live_rest is not None and same_json(redactor.redact(live_rest), _without_json(known)):
                reused["input_ref"] = known
        if twin is not None and twin.get("type") == current.get("type"):
            for part in _PARTS:
                if (
                    part not in reused
                    and part in current
                    and part in twin
                    and same_json(current[part], twin[part])
                ):
                    reused[part] = twin[part]
        rest = {k: v for k, v in current.items() if k not in reused}
        out.append({**redactor.redact(rest), **reused})
    return out


__all__ = ["redacted_replay"]
