"""Importing the plugin's own modules as Python does, not through pytest's assertion rewriting.

pytest rewrites every module of a plugin's distribution; this package's ``assert`` statements are internal
invariants, and the rewrite costs ~0.3 s of CPU per process under ``PYTHONDONTWRITEBYTECODE=1`` (its cache
cannot be written). The finder answers for this package's submodules only, with Python's own spec.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

__all__ = ["FINDER", "OwnModulesFinder", "install"]

_PREFIX = __name__.rpartition(".")[0] + "."


class OwnModulesFinder:
    """A ``sys.meta_path`` finder for this package's submodules: Python's path finder over the parent
    package's ``__path__`` (which an editable install sets as well as a wheel does)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or not fullname.startswith(_PREFIX):
            return None
        return PathFinder.find_spec(fullname, path, target)


FINDER = OwnModulesFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once per process (this module reloaded included): an
    in-process pytest session started later (pytester's inline runs) puts its own hook in front, which
    only costs speed."""
    if not any(type(finder).__name__ == OwnModulesFinder.__name__ for finder in sys.meta_path):
        sys.meta_path.insert(0, FINDER)


install()
