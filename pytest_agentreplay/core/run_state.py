"""The per-run state the layers above core keep on a ``RunContext``: core cannot import those owners, so
each is declared here as what core can name (slotted plain values, a Protocol, or a typed room); and the
run's turn from replay to recording (:class:`Rerecord`)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from .canonical import DigestMemo
from .documents import Document


class RunRedactor(Protocol):
    """The redactor a run's cassette is written with (``redaction.Redactor``): live values are redacted
    the same way before they are matched or compared with recorded (already redacted) ones."""

    def redact(self, value: Any, *, keys: bool = True) -> Any: ...

    def redact_string(self, text: str, *, keys: bool = True) -> str: ...

    def redact_url(self, url: str) -> str: ...

    def redact_body(self, body: Document, *, keys: bool = True) -> Document: ...

    def is_secret_name(self, name: str, *, query: bool = False, value: object = None) -> bool: ...

    def secret_spans(self, text: str, *, keys: bool = True) -> list[tuple[int, int]]: ...

    def query_replacement(self, match: re.Match[str]) -> str: ...


class RequestMemo:
    """What the HTTP layer keeps between a run's requests (``http/recording``)."""

    __slots__ = ("digests", "shared")

    def __init__(self) -> None:
        # (method, URL) -> the last body sent there, whose parts later requests reuse (shared, not copied).
        # Read only from here on: the body is an event's stored request (events are not changed once
        # emitted; a hook or the user gets a copy), and the next request's body takes its parts.
        self.shared: dict[tuple[str, str], Mapping[str, object]] = {}
        self.digests: DigestMemo | None = None


T = TypeVar("T")


class RunRooms:
    """Per-run state of the owners above core, one room per owner type keyed by the type: each owner gets
    its state back typed, and a new owner needs no field here."""

    __slots__ = ("_lock", "_rooms")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rooms: dict[type, object] = {}

    def of(self, kind: type[T], make: Callable[[], T]) -> T:
        """The run's ``kind`` room, made by ``make`` the first time (under a lock: threads share a run)."""
        with self._lock:
            room = self._rooms.get(kind)
            if room is None:
                room = self._rooms[kind] = make()
        if not isinstance(room, kind):
            raise TypeError(f"the {kind.__name__} room holds a {type(room).__name__}")
        return room

    def existing(self, kind: type[T]) -> T | None:
        """The run's ``kind`` room if its owner made one."""
        room = self._rooms.get(kind)
        return room if isinstance(room, kind) else None

    def drop(self, kind: type) -> None:
        """Forget the ``kind`` room (its owner is done with it: what it points to can be freed)."""
        with self._lock:
            self._rooms.pop(kind, None)


class ReplayState:
    """Replay's per-run state (``replay/``), each built on first use by its owner."""

    __slots__ = ("index", "tolerated")

    def __init__(self) -> None:
        # replay/http.py: the ``HttpReplayIndex`` of the recorded cassette.
        self.index: object = None
        # replay/http.py: unmatched calls to ``tolerated_hosts``, refused without failing the test (one
        # line each, for the session summary).
        self.tolerated: list[str] = []


class Rerecord:
    """One run's turn from replay to recording (``--agentreplay-record=drifted``): the point it turned at
    and the calls on each side. The first call the cassette holds no match for and every one after it go
    live (``RunContext.mode`` becomes ``record``; per-run replay state hears it through :meth:`on_live`);
    the shell saves the kept prefix and the live tail after it."""

    __slots__ = ("_listeners", "_lock", "at", "calls_kept", "calls_sent", "what")

    def __init__(self) -> None:
        # The seq of the first live event, and what it was (``model.call gpt-4o-mini``); None: not turned.
        self.at: int | None = None
        self.what = ""
        self.calls_kept = 0
        self.calls_sent = 0
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def on_live(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the run turns live (at once if it already has)."""
        if self.at is not None:
            listener()
        else:
            self._listeners.append(listener)

    def count(self, *, live: bool) -> None:
        if live:
            self.calls_sent += 1
        else:
            self.calls_kept += 1

    def turn(self, at: int, what: str) -> bool:
        """Turn live at seq ``at``, for the unmatched call ``what``; False when it had turned already."""
        with self._lock:
            if self.at is not None:
                return False
            self.at, self.what = at, what
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()
        return True
