"""Importing the plugin's own modules as Python does, not through pytest's assertion rewriting.

pytest puts its assertion-rewriting import hook in front of every module of an installed plugin's
distribution, so that a plugin's helpers report failed ``assert`` statements in detail. This package has
no such helpers: its ``assert`` statements are internal invariants, never a test's assertion. Yet the hook
costs every module it loads: it keeps its own cache of rewritten bytecode beside Python's, reads the source
and walks its syntax tree when that cache is cold, and under ``PYTHONDONTWRITEBYTECODE=1`` (set by many CI
images) it cannot write that cache, so it parses, rewrites and compiles every module again at every start
of every process (xdist workers included): about 0.3 s of CPU for the ~125 modules a regression replay
imports.

``install()`` puts a finder in front of pytest's hook that answers for this package's submodules only,
with the spec Python's own path finder gives: the bytecode pip compiled at install is used as is (an
installer that compiles none leaves Python to compile, as for any library). Other modules, tests, conftest
files and registered helpers among them, are found and rewritten by pytest as before. The finder stays on
``sys.meta_path`` for the life of the process (pytest removes its own hook when a session ends): outside a
session it finds what Python would find.
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
