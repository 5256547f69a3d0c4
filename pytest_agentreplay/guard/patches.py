"""The guard's patches: their owner (:data:`PATCHES`) and the functions they call through to.

The guard patches the socket type, the resolvers, ``Thread.start`` and the spawn functions, which every
thread and every session of the process share: one owner per process (per copy of this package), whose
count lets nested installs (pytester's inner sessions, ``capture_run`` inside a replaying test) share one
installation. The package's ``__init__`` declares what it patches; a copy of this package that pytester
re-imported patches over what a stale copy left installed through the genuine functions beneath
(:func:`~pytest_agentreplay.core.patching.genuine`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from ..core.patching import Owner

__all__ = ["ORIGINALS", "PATCHES", "THREAD_RUNS_ATTR", "stray_threads_alive"]

# Where a thread started under guarding runs keeps them (they outlive the test that started it).
THREAD_RUNS_ATTR: Final = "_agentreplay_guard_runs"


def stray_threads_alive() -> bool:
    """Whether a thread a replaying test started is still running (the patches must then stay)."""
    return any(getattr(t, THREAD_RUNS_ATTR, None) and t.is_alive() for t in threading.enumerate())


PATCHES = Owner(busy=stray_threads_alive)
# What each patch calls through to ("connect", "getaddrinfo", "thread_start", "execve"...). The values are
# C functions of every signature, called with what the patch received.
ORIGINALS: dict[str, Callable[..., Any]] = {}
