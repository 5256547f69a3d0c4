"""Traffic a transport adapter's library sends on its own behalf, which the HTTP adapters pass through, and
the live sends the guard lets through (:func:`permitted`).

The HTTP requests carrying an MCP session (recorded at the session level, :mod:`.mcp`) and a WebSocket
upgrade (recorded by :mod:`.httpx_ws` and :mod:`.websockets`, through :func:`connecting`) would otherwise be
recorded twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from .. import guard

if TYPE_CHECKING:
    from ..http.websocket_messages import ConversationEvents, Direction
    from ..replay.websocket_sessions import LiveConnection

__all__ = ["EVENTS", "connected", "connecting", "internal", "is_internal", "permitted", "receiving"]

_INTERNAL: ContextVar[bool] = ContextVar("pytest_agentreplay_internal_traffic", default=False)
# Where a live WebSocket connection keeps its events (instance dict: the libraries' connections have no
# slots).
EVENTS: Final = "_agentreplay_ws_events"
# A handshake response -> what ``LiveConnection.answered`` takes (status, headers and, if any, body).
Answer = Callable[[Any], tuple[Any, ...]]


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


def permitted(host: str | None) -> AbstractContextManager[None]:
    """The guard opened for ``host``, a live call the mode sends on purpose (None: nothing to open)."""
    return guard.permitting(host) if host else nullcontext()


@contextmanager
def connecting(live: LiveConnection, refused: type[BaseException], answer: Answer) -> Iterator[None]:
    """Around a WebSocket library's own connect: the handshake's answer (of a ``refused`` error's response),
    or its failure, goes to ``live``."""
    with internal(), permitted(live.permit):
        try:
            yield
        except refused as exc:
            live.answered(*answer(exc.response))  # type: ignore[attr-defined]
            raise
        except BaseException as exc:
            live.failed(exc)
            raise


def connected(live: LiveConnection, connection: Any, answer: Answer) -> Any:
    """``connection`` opened live: its handshake's answer goes to ``live``, its messages to its events."""
    live.answered(*answer(connection.response))
    connection.__dict__[EVENTS] = live.events
    return connection


@contextmanager
def receiving(
    events: ConversationEvents,
    timed_out: type[BaseException],
    closed: type[BaseException],
    close_of: Callable[[Any], tuple[Direction, int | None, str | None]],
) -> Iterator[None]:
    """Around a live WebSocket receive: a timeout, or the close it ends with (``close_of`` the ``closed``
    error), goes to the connection's events."""
    try:
        yield
    except timed_out:
        events.timeout()
        raise
    except closed as exc:
        events.close(*close_of(exc))
        raise
