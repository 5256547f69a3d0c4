"""Interception of the libraries an agent reaches the world through (:mod:`.registry`): outside a run a
patched call is left untouched; in one, :func:`pytest_agentreplay.replay.policy.decide` says what happens
(serve, send and capture, or refuse) and the library's adapter translates it.
"""

from __future__ import annotations

from .. import guard
from ..core.patching import Library, Owner, Undo
from .registry import LIBRARIES

__all__ = ["install", "installed"]

# Process-wide: the patched classes are shared by every thread and session of the process. The guard comes
# first (restored last), one holder of its own owner.
_INTERCEPTION = Owner(Library(lambda patches, _module: patches.add(guard.install())), *LIBRARIES)


def install() -> Undo:
    """Install interception and the network guard (counted); returns the uninstall callable (idempotent)."""
    return _INTERCEPTION.acquire()


def installed() -> bool:
    return _INTERCEPTION.installed()
