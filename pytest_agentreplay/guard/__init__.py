"""Fail-closed network guard: while a replay run is active, nothing leaves the process unless allowed.

While installed (:func:`install`) it patches sockets and resolvers (:mod:`.sockets`), thread start
(:mod:`.runs`) and every spawn path (:mod:`.children`, whose ``.pth`` start-up hook calls :func:`start` in
a Python child). The decision is the pure :func:`decide`; the gate every patched call goes through,
refusals and child reports are :mod:`.reports`. This module is what the other layers call.
"""

from __future__ import annotations

import os

from ..core.patching import Library, Undo, once
from .children import ENV_VAR, SPAWN_MODULE, adopt_handover, patch_children, patch_spawn, snapshot
from .decision import allow_list_admits, decide, resolution_is_local
from .reports import REPORTS, child_strays, collect_child_refusals
from .runs import PATCHES, RUNS, GuardRun, guarding_runs, patch_thread_start, permitting
from .sockets import patch_resolvers, patch_sockets

# In the order they are applied (and undone in reverse). multiprocessing.spawn is patched once imported
# (importing it costs milliseconds most replaying tests and guarded children never need), and at install
# in the module objects ``multiprocessing`` still names after pytester dropped its entry.
PATCHES.declare(
    Library(patch_sockets),
    Library(patch_resolvers),
    Library(patch_thread_start),
    Library(patch_children),
    Library(patch_spawn, (SPAWN_MODULE,)),
    Library(patch_spawn),
)


def install() -> Undo:
    """Patch sockets, resolvers, thread start and child spawning (counted); returns the matching
    uninstall callable, idempotent. The patches stay while a thread a replaying test started runs."""
    return PATCHES.acquire()


def installed() -> bool:
    return PATCHES.installed()


def protect(ctx: GuardRun) -> Undo:
    """Guard for ``ctx`` from every thread of the process, whatever context the thread has."""
    return once(RUNS.protect(ctx))


def adopt(value: str) -> None:
    """In a child process: guard on behalf of the parent's runs described by ``value`` (from ENV_VAR)."""
    if adopt_handover(value) and not PATCHES.patched:
        PATCHES.acquire()  # never released: the child lives inside the parent's run


def start() -> None:
    """Start-up of a Python child process (the ``.pth`` hook): guard like the parent, if it guards."""
    value = os.environ.get(ENV_VAR)
    if value:
        adopt(value)


def stray_refusals() -> list[str]:
    """Refusals made since the last call for tests that had already ended (a thread a test started, a
    child whose refusal came late), each starting with the test's node id: they fail the session."""
    messages = child_strays()
    messages[:0] = REPORTS.take_strays()
    PATCHES.settle()
    return messages


__all__ = [
    "ENV_VAR",
    "GuardRun",
    "adopt",
    "allow_list_admits",
    "collect_child_refusals",
    "decide",
    "guarding_runs",
    "install",
    "installed",
    "permitting",
    "protect",
    "resolution_is_local",
    "snapshot",
    "start",
    "stray_refusals",
]
