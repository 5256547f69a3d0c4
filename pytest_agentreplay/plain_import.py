"""Importing the plugin's own modules as Python does, not through pytest's assertion rewriting.

pytest puts its assertion-rewriting import hook in front of every module of an installed plugin's
distribution, so that a plugin's helpers report failed ``assert`` statements in detail. This package has
no such helpers: its ``assert`` statements are internal invariants, never a test's assertion. Yet the hook
costs every module it loads: it keeps its own cache of rewritten bytecode beside the one pip compiled at
install, reads the source and walks its syntax tree when that cache is cold, and under
``PYTHONDONTWRITEBYTECODE=1`` (set by many CI images) it cannot write that cache, so it parses, rewrites and
compiles every module again at every start of every process (xdist workers included): about 0.6 s of CPU
for the modules a regression replay imports, 0.3 s for the plugin at rest.

``install()`` puts a finder in front of pytest's hook that answers for this package's submodules only,
with the spec Python's own path finder gives (so the bytecode pip compiled is used as is). Other modules,
tests and conftest files among them, are found and rewritten by pytest as before.
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
    """Put the finder first on ``sys.meta_path``, once per process: an in-process pytest session started
    later (pytester's inline runs) puts its own hook in front, which only costs speed."""
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)


install()
