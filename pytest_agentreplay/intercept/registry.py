"""The transport adapters, one module each, and the modules whose import activates each.

The triggers live here, not in the adapter modules, so that an adapter is imported only once its library
is: a session whose agent uses httpx alone never imports the gRPC, MCP or WebSocket adapters (each import
cost memory and, under ``PYTHONDONTWRITEBYTECODE``, pytest's assertion rewriting at every start).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType

from ..core.patching import Library, Patches

__all__ = ["ADAPTERS", "LIBRARIES"]

# Adapter module of this package (its ``patch(patches, module)`` patches the library whose module has just
# run) -> the modules whose import activates it, in patching order (restored in reverse). grpc imports
# grpc.aio itself; websockets has a sync and an asyncio client module.
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
            importlib.import_module(f"{__package__}.{adapter}").patch(patches, module)

    return Library(apply, triggers)


LIBRARIES: tuple[Library, ...] = tuple(_library(adapter, triggers) for adapter, triggers in ADAPTERS.items())
