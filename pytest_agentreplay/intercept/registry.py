"""The transport adapters, one module each: which modules' import activates an adapter, and its patch.

An adapter module of this package exposes ``patch(module) -> restore``; :data:`ADAPTERS` names each one
with its triggers (the module names whose import it waits for: the patch runs right after one of them has
run, or at install when it is already imported). The triggers live here, not in the adapter modules, so
that an adapter is imported only once its library is: a session whose agent uses httpx alone never imports
the gRPC, MCP or WebSocket adapters (each import cost memory and, under ``PYTHONDONTWRITEBYTECODE``,
pytest's assertion rewriting of the module at every start). Adding a transport is adding its module and
naming it in :data:`ADAPTERS`; the session, the plugin and the installer
(:mod:`pytest_agentreplay.intercept`) name none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Protocol

__all__ = ["ADAPTERS", "TransportAdapter", "patchers"]


class TransportAdapter(Protocol):
    """What an adapter module provides (a module satisfies the protocol through its globals)."""

    def patch(self, module: ModuleType) -> Callable[[], None]:
        """Patch the library whose module ``module`` (one of its triggers) has just run; return the undo."""
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


def _adapter(name: str) -> TransportAdapter:
    # Looked up at each patch, not kept: pytester's in-process runs may drop an adapter module imported
    # first inside them, and the next install then patches with the copy imported anew.
    module: TransportAdapter = importlib.import_module(f"{__package__}.{name}")
    return module


def _patcher(adapter: str) -> Callable[[str], Callable[[], None]]:
    def patch(name: str) -> Callable[[], None]:
        return _adapter(adapter).patch(importlib.import_module(name))

    return patch


_PATCHERS: Mapping[str, Callable[[str], Callable[[], None]]] = MappingProxyType(
    {trigger: _patcher(adapter) for adapter, triggers in ADAPTERS.items() for trigger in triggers}
)


def patchers() -> Mapping[str, Callable[[str], Callable[[], None]]]:
    """Trigger module name -> the function patching it when given that name (imports its adapter and it).

    Built once at import (read-only); no adapter module is imported until one of its triggers is."""
    return _PATCHERS
