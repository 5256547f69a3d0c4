"""A run's events redacted at one boundary: :class:`RedactedEvent`, made only by :func:`redact_event`.

The save writes these views, the replay compares them, an accepted update writes the ones it compared. A
view made before its redactor learnt a secret may hold it: :meth:`RedactedEvent.current` redoes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import FrozenInstanceError
from typing import Final, final

from ..core.documents import Document
from .redactor import Redactor

# Events whose data is keyed by the user's own names (``record_value("csrf_token", fn)``): a name there says
# nothing about its value, so only the value-shape rules (and known secrets) apply to that data.
USER_NAMED_EVENTS: Final = frozenset({"runtime.values"})

_MINT: Final = object()
_set: Final = object.__setattr__


def data_keys(event_type: object) -> bool:
    """Whether the names in an event's ``data`` are redaction's to judge (not the user's own names)."""
    return event_type not in USER_NAMED_EVENTS


@final
class RedactedEvent:
    """An event as a cassette stores it (``doc``: read only, its containers are shared) and what it was
    redacted with. Frozen; a slotted class, as a dataclass costs the start-up far more."""

    __slots__ = ("_event", "_known", "_like", "_redactor", "doc")
    doc: Document
    _event: Document
    _like: Document | None
    _redactor: Redactor
    _known: int

    def __init__(
        self,
        doc: Document,
        event: Document,
        like: Document | None,
        redactor: Redactor,
        known: int,
        mint: object,
    ) -> None:
        if mint is not _MINT:
            raise TypeError("a RedactedEvent is made by redaction.redact_event")
        _set(self, "doc", doc)
        _set(self, "_event", event)
        _set(self, "_like", like)
        _set(self, "_redactor", redactor)
        _set(self, "_known", known)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        return f"RedactedEvent(doc={self.doc!r}, _known={self._known!r})"

    def fresh(self, redactor: Redactor) -> bool:
        """Made by ``redactor`` knowing every secret it knows now."""
        return redactor is self._redactor and redactor.known.count == self._known

    def current(self, redactor: Redactor) -> RedactedEvent:
        """This view while it is fresh for ``redactor``; else its event redacted again."""
        return self if self.fresh(redactor) else redact_event(self._event, redactor, self._like)

    def restamped(self, values: Mapping[str, object], data: Mapping[str, object]) -> RedactedEvent:
        """This event with envelope ``values`` and ``data`` fields of the recorded event it replaces (time,
        ids, timings); a value None is left out."""
        doc, event = _stamp(self.doc, values, data), _stamp(self._event, values, data)
        return RedactedEvent(doc, event, self._like, self._redactor, self._known, _MINT)


def _stamp(event: Document, values: Mapping[str, object], data: Mapping[str, object]) -> Document:
    out = {**event, **values, "data": {**event.get("data", {}), **data}}
    return {k: v for k, v in out.items() if v is not None}


def redact_event(event: Document, redactor: Redactor, like: Document | None = None) -> RedactedEvent:
    """``event`` (read, never changed) as a cassette stores it; ``like``: the recorded event it repeats, as a
    save wrote it (``Redactor.redact``)."""
    if data_keys(event.get("type")) or "data" not in event:
        return RedactedEvent(
            redactor.redact(event, like=like), event, like, redactor, redactor.known.count, _MINT
        )
    known = redactor.known.count
    for _ in range(2):  # a secret the data taught is replaced in the rest, redacted first, too
        rest = redactor.redact({k: v for k, v in event.items() if k != "data"}, like=like)
        doc = {**rest, "data": redactor.redact(event["data"], keys=False, like=(like or {}).get("data"))}
        if redactor.known.count == known:
            break
        known = redactor.known.count
    return RedactedEvent(doc, event, like, redactor, known, _MINT)
