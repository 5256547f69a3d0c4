"""The problems that fail a test even when the agent swallowed them: a layer that refuses something raises
into the agent *and* adds the error here (an SDK may retry, wrap or swallow it). The first one added is
the cause the test reports; what follows is most often its consequence."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from ..exceptions import AgentReplayError


class RunFailures:
    """The problems of one run, in order found (thread-safe): read by index or iteration, :meth:`add` the
    way in."""

    __slots__ = ("_errors", "_keys", "_lock")

    def __init__(self) -> None:
        self._errors: list[BaseException] = []
        self._keys: set[tuple[object, ...]] = set()
        self._lock = threading.Lock()

    def add(self, error: BaseException, *, once: bool = False) -> bool:
        """Keep ``error`` unless the run holds this very error (``once``: the same problem); True when it
        was new. What makes two errors one problem: an ``AgentReplayError``'s type and fields."""
        key: tuple[object, ...] = (id(error),)
        if isinstance(error, AgentReplayError):
            key = (type(error), error.headline, error.evidence, error.place, error.cassette)
        with self._lock:
            if (once and key in self._keys) or any(e is error for e in self._errors):
                return False
            self._keys.add(key)
            self._errors.append(error)
            return True

    @property
    def first(self) -> BaseException | None:
        """The cause the test reports (see the module's precedence)."""
        return self._errors[0] if self._errors else None

    def since(self, count: int) -> list[BaseException]:
        """The problems added after the first ``count``."""
        return self._errors[count:]

    def __iter__(self) -> Iterator[BaseException]:
        return iter(list(self._errors))

    def __getitem__(self, index: int) -> BaseException:
        return self._errors[index]

    def __len__(self) -> int:
        return len(self._errors)
