"""Interception of the libraries an agent reaches the world through: outside a run a patched call is left
untouched; in one, :func:`pytest_agentreplay.replay.policy.decide` says what happens and the library's
adapter translates it. An adapter module is imported only once its library is (:data:`ADAPTERS`): each
import costs memory and, under ``PYTHONDONTWRITEBYTECODE``, assertion rewriting at every start. What an
adapter's library sends on its own behalf (:func:`internal`) the HTTP adapters pass through, or it would be
recorded twice.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from .. import guard
from ..core.patching import Library, Owner, Patches, Undo

if TYPE_CHECKING:
    from ..http.websocket_messages import ConversationEvents, Direction
    from ..replay.websocket_sessions import LiveConnection

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


# Whether the calls of this context are a transport's own traffic (:func:`internal`).
INTERNAL: ContextVar[bool] = ContextVar("pytest_agentreplay_internal_traffic", default=False)
# Where a live WebSocket connection keeps its events (instance dict: the libraries' connections have no
# slots).
EVENTS: Final = "_agentreplay_ws_events"
# A handshake response -> what ``LiveConnection.answered`` takes (status, headers and, if any, body).
Answer = Callable[[Any], tuple[Any, ...]]


@contextmanager
def internal() -> Iterator[None]:
    """Mark the calls made in this context (and in tasks it starts) as a transport's own traffic."""
    token = INTERNAL.set(True)
    try:
        yield
    finally:
        INTERNAL.reset(token)


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
