"""What several commands share: exit codes, errors, output, finding files, the project table, the bar."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..core.constants import BLOB_DIR_NAME
from ..core.documents import Document
from ..exceptions import AgentReplayError

if TYPE_CHECKING:
    from ..cassette.loaded import LoadedCassette

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class UsageError(AgentReplayError):
    """Bad command-line input."""


def out(text: str = "") -> None:
    sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))


def err(text: str) -> None:
    sys.stderr.write(text + ("\n" if not text.endswith("\n") else ""))


def iter_files(paths: Sequence[str], suffixes: tuple[str, ...], *, command: str) -> list[Path]:
    """Files given directly, plus files with one of ``suffixes`` found recursively in given directories."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if os.path.lexists(path) and not path.is_dir():
            # A FIFO, device or dangling symlink named explicitly: the command reports why it cannot read it.
            found.append(path)
        elif path.is_dir():
            for child in sorted(path.rglob("*")):
                if (
                    child.is_file()
                    and child.suffix.lower() in suffixes
                    # A pending drift beside its cassette (agentreplay review) is not a cassette.
                    and not child.name.endswith(".pending.json")
                    and not any(
                        part == BLOB_DIR_NAME or part.startswith(".agentreplay-tmp-")
                        for part in child.relative_to(path).parts
                    )
                ):
                    found.append(child)
        else:
            raise UsageError(
                f"{raw}: no such file or directory",
                fixes=[f"check the path; example: agentreplay {command} cassettes/"],
            )
    return found


def project_table() -> Document:
    # heavy: the settings checks it loads are paid only by the commands that read pyproject.toml
    from ..core.config import read_pyproject_table

    return read_pyproject_table(Path.cwd())


def load_for_audit(
    path: Path, *, mode: str | None = None, migrate: bool = False
) -> tuple[LoadedCassette, bool]:
    """The cassette at ``path`` and whether its integrity fields held: one that fails them is loaded without
    that check, so its other problems are still shown."""
    # heavy: the reader is paid only by the commands that load cassettes (not git's textconv driver)
    from ..cassette.read import load_cassette, load_unchecked
    from ..exceptions import CassetteIntegrityError

    try:
        return load_cassette(path, mode=mode, migrate=migrate), True
    except CassetteIntegrityError:
        unchecked = load_unchecked(path)
        if unchecked is None:
            raise
        return unchecked, False


_BAR_WIDTH = 28
_MIN_INTERVAL = 0.1


class Progress:
    """A progress bar for long work, drawn on stderr only when it is a terminal (pipes and CI logs see
    nothing)."""

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
