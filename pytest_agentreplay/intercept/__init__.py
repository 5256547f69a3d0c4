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

from .. import guard
from ..core.patching import Library, Owner, Undo
from .registry import LIBRARIES

__all__ = ["install", "installed"]

# Process-wide: the patches replace methods of the client libraries' classes, which every thread and
# session of the process share. The guard comes first (restored last), one holder of its own owner.
# Importing aiohttp or urllib3 only to patch them costs a test that never uses them ~0.2 s: each library
# is patched when its top-level module has run, later or again (pytester drops the modules an inner
# session imported, and interception stays installed from one replaying test to the next).
_INTERCEPTION = Owner(Library(lambda patches, _module: patches.add(guard.install())), *LIBRARIES)


def install() -> Undo:
    """Install interception and the network guard (counted); returns the uninstall callable (idempotent)."""
    return _INTERCEPTION.acquire()


def installed() -> bool:
    return _INTERCEPTION.installed()
