"""The guard's patches: their owner (:data:`PATCHES`, one per process: nested installs share it; the
package's ``__init__`` declares what it patches) and the functions they call through to."""

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
