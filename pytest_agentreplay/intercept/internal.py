"""Traffic a transport adapter's library sends on its own behalf, which the HTTP adapters pass through.

The HTTP requests carrying an MCP session (recorded at the session level, :mod:`.mcp`) and a WebSocket
upgrade sent through httpx (recorded by :mod:`.httpx_ws`) would otherwise be recorded twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["internal", "is_internal"]

_INTERNAL: ContextVar[bool] = ContextVar("pytest_agentreplay_internal_traffic", default=False)


@contextmanager
def internal() -> Iterator[None]:
    """Mark the calls made in this context (and in tasks it starts) as a transport's own traffic."""
    token = _INTERNAL.set(True)
    try:
        yield
    finally:
        _INTERNAL.reset(token)


def is_internal() -> bool:
    return _INTERNAL.get()
