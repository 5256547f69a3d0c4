"""A minimal progress bar for long CLI work (migrate, import, verify, prune).

Drawn on stderr and only when stderr is a terminal, so pipes, CI logs and tests see nothing of it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")

_BAR_WIDTH = 28
_MIN_INTERVAL = 0.1


class Progress:
    """``with Progress(total, "verify") as bar: ... bar.advance(label)``; silent when not a TTY."""

    def __init__(
        self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        # A bar for one or two items is noise.
        self.enabled = enabled and self.total > 1
        self.done = 0
        self._last_draw = 0.0
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, item: str = "", step: int = 1) -> None:
        self.done = min(self.done + step, self.total) if self.total else self.done + step
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last_draw < _MIN_INTERVAL:
            return
        self._last_draw = now
        self._draw(item)

    def render(self, item: str = "") -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(fraction * _BAR_WIDTH)
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        name = item if len(item) <= 40 else "..." + item[-37:]
        return f"{self.label} [{bar}] {self.done}/{self.total} {name}"

    def _draw(self, item: str) -> None:
        self.stream.write("\r\x1b[2K" + self.render(item))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False


def track(items: Iterable[T], total: int, label: str, *, stream: TextIO | None = None) -> Iterator[T]:
    """Iterate ``items`` while drawing a bar (``str(item)`` is shown as the current item)."""
    with Progress(total, label, stream=stream) as bar:
        for item in items:
            yield item
            bar.advance(str(item))
