"""The transport adapters, one module each: which modules' import activates an adapter, and its patch.

An adapter module of this package exposes ``TRIGGERS`` (the module names whose import it waits for: the
patch runs right after one of them has run, or at install when it is already imported) and
``patch(module) -> restore``. Adding a transport is adding its module and naming it in :data:`ADAPTERS`;
the session, the plugin and the installer (:mod:`pytest_agentreplay.intercept`) name none of them.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Protocol

__all__ = ["ADAPTERS", "TransportAdapter", "patchers"]


class TransportAdapter(Protocol):
    """What an adapter module provides (a module satisfies the protocol through its globals)."""

    TRIGGERS: tuple[str, ...]

    def patch(self, module: ModuleType) -> Callable[[], None]:
        """Patch the library whose module ``module`` (one of ``TRIGGERS``) has just run; return the undo."""
        ...


# Adapter modules of this package, in patching order (restored in reverse).
ADAPTERS: tuple[str, ...] = ("httpx", "urllib3", "aiohttp", "websockets", "httpx_ws", "mcp", "grpc")


def _adapter(name: str) -> TransportAdapter:
    # sys.modules first: the table is looked up on every install, where import_module's machinery cost
    # more than the patches themselves.
    module: TransportAdapter = sys.modules.get(f"{__package__}.{name}") or importlib.import_module(
        f"{__package__}.{name}"
    )
    return module


def patchers() -> Mapping[str, Callable[[str], Callable[[], None]]]:
    """Trigger module name -> the function patching it when given that name (imports the module).

    Built once per set of adapter modules (a read-only mapping): pytester's in-process runs may drop an
    adapter module imported first inside them, and the next install then patches with the copy imported
    anew, never with a dropped one."""
    return _table(tuple(_adapter(name) for name in ADAPTERS))


@functools.lru_cache(maxsize=8)
def _table(adapters: tuple[TransportAdapter, ...]) -> Mapping[str, Callable[[str], Callable[[], None]]]:
    table: dict[str, Callable[[str], Callable[[], None]]] = {}
    for adapter in adapters:
        for trigger in adapter.TRIGGERS:
            table[trigger] = _patcher(adapter)
    return MappingProxyType(table)


def _patcher(adapter: TransportAdapter) -> Callable[[str], Callable[[], None]]:
    def patch(name: str) -> Callable[[], None]:
        return adapter.patch(importlib.import_module(name))

    return patch
