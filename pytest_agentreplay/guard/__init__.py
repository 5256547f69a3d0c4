"""Fail-closed network guard: while a replay run is active, nothing leaves the process unless allowed.

What is guarded while installed (:func:`install` is reference-counted), a module each:

- :mod:`.sockets`: ``connect``, ``connect_ex``, ``sendto``/``sendmsg`` with an address and
  ``create_connection``, on sockets of every family and type, and every send on a socket connected
  before the guard applied (through the socket gate the plugin installs when it loads, which passes
  calls through until :func:`install` arms it);
- :mod:`.resolution`: ``getaddrinfo``, ``gethostbyname(_ex)``, ``gethostbyaddr``, ``getnameinfo``;
- threads (:mod:`.runs`): a thread started while a replay run guards stays guarded by that run after
  the run ends, and a refusal there is kept for :func:`stray_refusals` naming the test;
- :mod:`.children`: every spawn path hands the runs over to the child, whose start-up hook (the
  ``pytest_agentreplay_guard.pth`` file shipped with the package) calls :func:`start`;
  :mod:`.isolation` puts children in an empty network namespace where asked.

Which runs guard is :mod:`.runs`; the allow/refuse decision is the pure :func:`decide`
(:mod:`.decision`); refusals, their wording and the reports of child processes are :mod:`.reports`;
:mod:`.patches` keeps what each patch replaced. This module is what the other layers call.
"""

from __future__ import annotations

import os

from .checks import check, permitting
from .children import ENV_VAR, adopt_handover, patch_children, snapshot
from .decision import Verdict, allow_list_admits, decide, resolution_is_local
from .patches import PATCHES, Undo, once
from .reports import REPORTS, child_strays, collect_child_refusals
from .resolution import patch_resolvers
from .runs import (
    BLOCK_ONLY,
    ISOLATE_SETTING,
    RUNS,
    GuardRun,
    ParentRun,
    guarding_runs,
    patch_thread_start,
    stray_threads_alive,
)
from .sockets import patch_sockets

# In the order they are applied (and undone in reverse).
_PATCHERS = (patch_sockets, patch_resolvers, patch_thread_start, patch_children)


def install() -> Undo:
    """Patch sockets, resolvers, thread start and child spawning (reference-counted); returns the
    matching uninstall callable."""
    PATCHES.install(_PATCHERS)
    return once(lambda: PATCHES.release(stray_threads_alive))


def installed() -> bool:
    return PATCHES.installed()


def protect(ctx: GuardRun) -> Undo:
    """Guard for ``ctx`` from every thread of the process, whatever context the thread has."""
    return once(RUNS.protect(ctx))


def adopt(value: str) -> None:
    """In a child process: guard on behalf of the parent's runs described by ``value`` (from ENV_VAR)."""
    if adopt_handover(value):
        with PATCHES.lock:
            needs_install = not PATCHES.patched
        if needs_install:
            # Never released: the child lives inside the parent's run.
            install()


def start() -> None:
    """Start-up of a Python child process (the ``.pth`` hook): guard like the parent, if it guards."""
    value = os.environ.get(ENV_VAR)
    if value:
        adopt(value)


def stray_refusals() -> list[str]:
    """Refusals made on behalf of tests that had already ended, since the last call (then forgotten).

    Threads a replaying test started that called out after it ended, and child processes whose refusal
    arrived after their test finished. Each message starts with the test's node id. The session controller
    fails the session when this is not empty.
    """
    late_children = child_strays()
    messages = REPORTS.take_strays() + late_children
    PATCHES.settle(stray_threads_alive)
    return messages


__all__ = [
    "BLOCK_ONLY",
    "ENV_VAR",
    "ISOLATE_SETTING",
    "GuardRun",
    "ParentRun",
    "Verdict",
    "adopt",
    "allow_list_admits",
    "check",
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
