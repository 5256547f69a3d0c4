"""Traffic a transport adapter's library sends on its own behalf, which the HTTP adapters leave alone.

An MCP session over streamable HTTP or SSE is recorded at the session level (``intercept/mcp.py``): its
requests are the history, and the HTTP requests carrying them are the transport's business (recording them
too would record every tool call twice, and replay them as HTTP calls nothing makes). A WebSocket upgrade
sent through httpx (httpx-ws) is recorded or refused by the WebSocket adapter before it goes out. Those
adapters run the transport's sending code inside :func:`internal`; the HTTP adapters pass a call made
there straight to the library, as they do outside a run.
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
