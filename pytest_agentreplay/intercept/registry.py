"""The transport adapters, one module each: which modules' import activates an adapter, and its patch.

An adapter module of this package exposes ``patch(patches, module)``, patching its library through
``patches`` (:class:`~pytest_agentreplay.core.patching.Patches`, which restores it); :data:`ADAPTERS` names
each one with its triggers (the module names whose import it waits for: the patch runs right after one of
them has run, or at install when it is already imported). The triggers live here, not in the adapter
modules, so that an adapter is imported only once its library is: a session whose agent uses httpx alone
never imports the gRPC, MCP or WebSocket adapters (each import cost memory and, under
``PYTHONDONTWRITEBYTECODE``, pytest's assertion rewriting of the module at every start). Adding a
transport is adding its module and naming it in :data:`ADAPTERS`; the session, the plugin and the
installer (:mod:`pytest_agentreplay.intercept`) name none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Protocol

from ..core.patching import Library, Patches

__all__ = ["ADAPTERS", "LIBRARIES", "TransportAdapter"]


class TransportAdapter(Protocol):
    """What an adapter module provides (a module satisfies the protocol through its globals)."""

    def patch(self, patches: Patches, module: ModuleType) -> None:
        """Patch the library whose module ``module`` (one of its triggers) has just run."""
        ...


# Adapter module of this package -> the modules whose import activates it, in patching order (restored in
# reverse). grpc imports grpc.aio itself; websockets has a sync and an asyncio client module.
ADAPTERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "httpx": ("httpx", "httpx2"),
        "urllib3": ("urllib3",),
        "aiohttp": ("aiohttp",),
        "websockets": ("websockets.sync.client", "websockets.asyncio.client"),
        "httpx_ws": ("httpx_ws",),
        "mcp": ("mcp",),
        "grpc": ("grpc",),
    }
)


def _library(adapter: str, triggers: tuple[str, ...]) -> Library:
    def apply(patches: Patches, module: ModuleType | None) -> None:
        # Looked up at each patch, not kept: pytester's in-process runs may drop an adapter module imported
        # first inside them, and the next install then patches with the copy imported anew.
        if module is not None:
            found: TransportAdapter = importlib.import_module(f"{__package__}.{adapter}")
            found.patch(patches, module)

    return Library(apply, triggers)


# Built once at import; no adapter module is imported until one of its triggers is.
LIBRARIES: tuple[Library, ...] = tuple(_library(adapter, triggers) for adapter, triggers in ADAPTERS.items())
