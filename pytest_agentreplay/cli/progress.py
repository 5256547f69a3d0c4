"""A minimal progress bar for long CLI work (migrate, import, verify, prune).

Drawn on stderr and only when stderr is a terminal, so pipes, CI logs and tests see nothing of it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_BAR_WIDTH = 28
_MIN_INTERVAL = 0.1


class Progress:
    """``with Progress(total, "verify") as bar: ... bar.advance(label)``; silent when not a TTY."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = total > 1 and self.stream.isatty()  # a bar for one item is noise
        self.done = 0
        self._last_draw = 0.0
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def advance(self, item: str) -> None:
        self.done = min(self.done + 1, self.total)
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last_draw < _MIN_INTERVAL:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[2K" + self.render(item))
        self.stream.flush()
        self._drawn = True

    def render(self, item: str = "") -> str:
        filled = round(self.done / self.total * _BAR_WIDTH) if self.total else _BAR_WIDTH
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        name = item if len(item) <= 40 else "..." + item[-37:]
        return f"{self.label} [{bar}] {self.done}/{self.total} {name}"
