"""Interception of the libraries an agent reaches the world through: outside a run a patched call is left
untouched; in one, :func:`pytest_agentreplay.replay.policy.decide` says what happens (serve, send and
capture, or refuse) and the library's adapter translates it.

An adapter module is imported only once its library is (:data:`ADAPTERS`): a session whose agent uses httpx
alone never imports the gRPC, MCP or WebSocket adapters (each import cost memory and, under
``PYTHONDONTWRITEBYTECODE``, pytest's assertion rewriting at every start).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .. import guard
from ..core.patching import Library, Owner, Patches, Undo

__all__ = ["ADAPTERS", "LIBRARIES", "install"]

# Adapter module of this package (its ``patch(patches, module)`` patches the library whose module has just
# run) -> the modules whose import activates it, in patching order (restored in reverse). grpc imports
# grpc.aio itself; websockets has a sync and an asyncio client module.
ADAPTERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("httpx", ("httpx", "httpx2")),
    ("urllib3", ("urllib3",)),
    ("aiohttp", ("aiohttp",)),
    ("websockets", ("websockets.sync.client", "websockets.asyncio.client")),
    ("httpx_ws", ("httpx_ws",)),
    ("mcp", ("mcp",)),
    ("grpc", ("grpc",)),
)


def _library(adapter: str, triggers: tuple[str, ...]) -> Library:
    def apply(patches: Patches, module: ModuleType | None) -> None:
        # Looked up at each patch, not kept: pytester's in-process runs may drop an adapter module imported
        # first inside them, and the next install then patches with the copy imported anew.
        if module is not None:
            importlib.import_module(f"{__name__}.{adapter}").patch(patches, module)

    return Library(apply, triggers)


LIBRARIES: tuple[Library, ...] = tuple(_library(adapter, triggers) for adapter, triggers in ADAPTERS)
# Process-wide: the patched classes are shared by every thread and session of the process. The guard comes
# first (restored last), one holder of its own owner.
_INTERCEPTION = Owner(Library(lambda patches, _module: patches.add(guard.install())), *LIBRARIES)


def install() -> Undo:
    """Install interception and the network guard (counted); returns the uninstall callable (idempotent)."""
    return _INTERCEPTION.acquire()
