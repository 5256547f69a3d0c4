"""The guard's installation: the reference count, what each patch replaced, and how to undo it all.

The guard's state is process-wide by nature: it patches the socket type, the resolvers, ``Thread.start``
and the spawn functions, which every thread and every session of the process share, and a patched call
in any thread must find it. Hence one owner per process (per copy of this package). Nested installs
(pytester's inner sessions, ``capture_run`` inside a replaying test) share it through the reference count.
A copy of this package that pytester re-imported gets an owner of its own and patches over what a stale
copy left installed: each patch carries the function it replaced (:func:`genuine`), so the new copy's
patches call the genuine functions and its uninstall restores them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

# What each patch replaced, and how the socket type (immutable in CPython) is patched: shared with the
# socket gate the plugin installs when it loads, which lives in core.
from ..core.socket_gate import genuine, genuine_function, mark, set_type_attribute

__all__ = [
    "PATCHES",
    "GuardPatches",
    "Patcher",
    "Undo",
    "deleter",
    "genuine",
    "genuine_function",
    "mark",
    "once",
    "set_type_attribute",
    "setter",
]

Undo = Callable[[], None]
# Patches one family of calls; returns how to restore them, in the order they were made.
Patcher = Callable[[], list[Undo]]


class GuardPatches:
    """The installed patches: how many installs hold them, what they replaced, how to undo them.

    Process-wide (:data:`PATCHES`): a monkeypatch of the socket type or of ``threading.Thread`` reaches
    every thread of the process; the reference count lets nested sessions share one installation.
    """

    def __init__(self) -> None:
        # Re-entrant: a patched call (a thread start, a fork's at-fork hook) may run while it is held.
        self.lock = threading.RLock()
        self.refs = 0
        self.patched = False
        # What each patch calls through to ("connect", "getaddrinfo", "thread_start", "execve"...). The
        # values are C functions of every signature, called with what the patch received.
        self.originals: dict[str, Callable[..., Any]] = {}
        self.undo: list[Undo] = []
        # os.system hands the runs over through os.environ, which every thread shares: one swap at a time.
        self.system_lock = threading.Lock()

    def install(self, patchers: Iterable[Patcher]) -> None:
        with self.lock:
            self.refs += 1
            if self.patched:
                return
            try:
                for patch in patchers:
                    self.undo.extend(patch())
            except BaseException:
                self.refs -= 1
                self.unpatch()
                raise
            self.patched = True

    def unpatch(self) -> None:
        while self.undo:
            self.undo.pop()()
        self.patched = False

    def release(self, busy: Callable[[], bool]) -> None:
        with self.lock:
            self.refs -= 1
        # A thread a replaying test started may still run: the patches then stay until it has ended.
        self.settle(busy)

    def settle(self, busy: Callable[[], bool]) -> None:
        """Remove the patches once nothing needs them: no install left and ``busy()`` false."""
        with self.lock:
            if self.patched and self.refs == 0 and not busy():
                self.unpatch()

    def installed(self) -> bool:
        return self.refs > 0


PATCHES = GuardPatches()


def setter(target: object, name: str, value: object) -> Undo:
    def restore() -> None:
        setattr(target, name, value)

    return restore


def deleter(target: object, name: str) -> Undo:
    def restore() -> None:
        delattr(target, name)

    return restore


def once(fn: Undo) -> Undo:
    """``fn`` made idempotent and thread-safe: an uninstall or release called twice acts once."""
    done = threading.Event()
    lock = threading.Lock()

    def call() -> None:
        with lock:
            if done.is_set():
                return
            done.set()
        fn()

    return call
