"""Interception of the libraries an agent reaches the world through: HTTP clients (httpx and httpx2,
requests/urllib3, aiohttp) and the other transports listed in :mod:`.registry`. Each patched
call with no active run (:func:`pytest_agentreplay.core.capture.current_run`) is left untouched; otherwise
:func:`pytest_agentreplay.replay.policy.decide` returns the action (serve, send and capture, or refuse) and
the library's adapter here translates it. Imports go one way: these adapters -> ``replay.policy`` -> the
library-neutral :mod:`pytest_agentreplay.http`.

Importing this package imports no HTTP client: :func:`install` imports and patches those installed, and a
library imported later is patched the moment its module has run.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType

from .. import guard
from ..core.after_import import AfterImport
from .registry import patchers

__all__ = ["install", "installed"]


class InterceptorRefs:
    """The interception installed in this process: how many installs hold it and how to undo it.

    Process-wide (:data:`_INTERCEPTION`): the patches replace methods of the client libraries' classes,
    which every thread and session of the process share; the reference count lets nested sessions
    (pytester's inner runs, ``capture_run`` inside a replaying test) share one installation, removed when
    the last one leaves.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.refs = 0
        # Undo callables in patching order (restored last first): the guard, each library, the finder.
        self.restores: list[Callable[[], None]] = []

    def acquire(self) -> None:
        with self.lock:
            self.refs += 1
            if self.refs == 1:
                try:
                    self.restores.extend(_patch_all())
                except BaseException:
                    self.refs -= 1
                    self.restore_all()
                    raise

    def release(self) -> None:
        with self.lock:
            self.refs -= 1
            if self.refs == 0:
                self.restore_all()

    def imported(self, name: str, table: Mapping[str, Callable[[str], Callable[[], None]]]) -> None:
        """Patch ``name``, whose module has just run (for the first time, or again after pytester dropped
        it), if interception is still installed."""
        with self.lock:
            patcher = table.get(name)
            if patcher is not None and self.refs > 0:
                self.restores.append(patcher(name))

    def restore_all(self) -> None:
        while self.restores:
            self.restores.pop()()

    def installed(self) -> bool:
        return self.refs > 0


_INTERCEPTION = InterceptorRefs()


def _patch_all() -> list[Callable[[], None]]:
    restores = [guard.install()]
    table = patchers()
    restores.extend(patcher(name) for name, patcher in table.items() if name in sys.modules)

    # Importing aiohttp or urllib3 only to patch them costs a test that never uses them ~0.2 s (and asking
    # the import system whether each is installed costs more than the finder): a library is patched when
    # its top-level module has run, later or again (pytester drops the modules an inner session imported,
    # and interception stays installed from one replaying test to the next).
    def imported(module: ModuleType) -> None:
        _INTERCEPTION.imported(module.__name__, table)

    finder = AfterImport(dict.fromkeys(table, imported))
    finder.install()
    restores.append(finder.remove)
    return restores


def install() -> Callable[[], None]:
    """Install interception and the network guard (reference-counted); returns the uninstall callable.

    Calling the returned function more than once has no further effect.
    """
    _INTERCEPTION.acquire()
    done = threading.Event()
    lock = threading.Lock()

    def uninstall() -> None:
        with lock:
            if done.is_set():
                return
            done.set()
        _INTERCEPTION.release()

    return uninstall


def installed() -> bool:
    return _INTERCEPTION.installed()
