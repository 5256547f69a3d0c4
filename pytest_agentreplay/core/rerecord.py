"""Re-recording from the first drift (``--agentreplay-record=drifted``): the first call the cassette holds
no match for and every one after it go live (``RunContext.mode`` becomes ``record``; per-run replay state
hears it through :meth:`Rerecord.on_live`); the shell saves the kept prefix and the live tail after it."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Rerecord:
    """One run's turn from replay to recording: the point it turned at and the calls on each side."""

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
