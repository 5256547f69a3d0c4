"""The connections served from the cassette to the ``websockets`` client (:mod:`.websockets`): the library's
connection classes with ``recv``, ``send``, ``close`` and ``ping`` answered by a
:class:`~..replay.websocket_sessions.ServedConversation`, no socket, thread or task behind them."""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any

from ..http.websocket_messages import Message
from ..replay.websocket_sessions import Received, ServedConversation

_LOG = logging.getLogger("websockets.client")


def lib() -> tuple[ModuleType, ModuleType, ModuleType]:
    # optional: websockets is imported by the agent (this adapter runs only once it has been)
    import websockets.datastructures
    import websockets.exceptions
    import websockets.frames

    return websockets.exceptions, websockets.frames, websockets.datastructures


def closed_error(served: ServedConversation) -> BaseException:
    exceptions, frames, _ = lib()
    code, reason, by_server = served.closed or (None, "", True)
    if code is None:
        error: BaseException = exceptions.ConnectionClosedError(None, None)
        return error
    close = frames.Close(code, reason)
    kind = exceptions.ConnectionClosedOK if code in (1000, 1001) else exceptions.ConnectionClosedError
    error = kind(close, close, by_server)
    return error


def served_message(served: ServedConversation, decode: bool | None) -> Message:
    step = served.receive()
    if isinstance(step, Received):
        if step.kind == "timeout":
            raise TimeoutError("timed out while waiting for a message (as recorded)")
        raise closed_error(served)
    if decode is True and isinstance(step, bytes):
        return step.decode("utf-8")
    if decode is False and isinstance(step, str):
        return step.encode("utf-8")
    return step


def joined(message: object) -> Message:
    if isinstance(message, str):
        return message
    if isinstance(message, bytes | bytearray | memoryview):
        return bytes(message)
    parts = list(message)  # type: ignore[call-overload]
    if parts and isinstance(parts[0], str):
        return "".join(parts)
    return b"".join(bytes(p) for p in parts)


class _Served:
    """What both clients' served connections share: the conversation, and the state read from it."""

    _served: ServedConversation
    # No socket behind it (the base's properties, shadowed).
    local_address: Any = None
    remote_address: Any = None

    def __init__(self, served: ServedConversation, request: Any, response: Any) -> None:
        # The base initialiser needs a socket or a transport (and starts threads or tasks): none here.
        self._served = served
        self.request = request
        self.response = response
        self.logger = _LOG
        self.latency = 0.0

    def _check_open(self) -> None:
        if self._served.closed is not None:
            raise closed_error(self._served)

    @property
    def state(self) -> Any:
        # optional: websockets is imported by the agent
        from websockets.protocol import State

        return State.OPEN if self._served.closed is None else State.CLOSED

    @property
    def subprotocol(self) -> Any:
        return self._served.subprotocol

    @property
    def close_code(self) -> int | None:
        return self._served.closed[0] if self._served.closed else None

    @property
    def close_reason(self) -> str | None:
        return self._served.closed[1] if self._served.closed else None


def sync_replayed_class(base: Any) -> Any:
    class ReplayedClientConnection(_Served, base):  # type: ignore[misc]
        """A connection served from the cassette: the threading client's API, no socket, no thread."""

        _pong = threading.Event()
        _pong.set()

        def recv(self, timeout: float | None = None, decode: bool | None = None) -> Message:
            return served_message(self._served, decode)

        def recv_streaming(self, decode: bool | None = None) -> Any:
            yield served_message(self._served, decode)

        def send(self, message: Any, text: bool | None = None) -> None:
            self._check_open()
            self._served.send(joined(message))

        def close(self, code: int = 1000, reason: str = "") -> None:
            self._served.close(code, reason)

        def ping(self, data: Any = None, ack_on_close: bool = False) -> threading.Event:
            self._check_open()
            return self._pong

        def pong(self, data: Any = b"") -> None:
            self._check_open()

    return ReplayedClientConnection


def async_replayed_class(base: Any) -> Any:
    class ReplayedClientConnection(_Served, base):  # type: ignore[misc]
        """A connection served from the cassette: the asyncio client's API, no transport, no task."""

        async def recv(self, decode: bool | None = None) -> Message:
            return served_message(self._served, decode)

        async def recv_streaming(self, decode: bool | None = None) -> Any:
            yield served_message(self._served, decode)

        async def send(self, message: Any, text: bool | None = None) -> None:
            self._check_open()
            if hasattr(message, "__aiter__"):
                message = [part async for part in message]
            self._served.send(joined(message))

        async def close(self, code: int = 1000, reason: str = "") -> None:
            self._served.close(code, reason)

        async def wait_closed(self) -> None:
            return None

        async def ping(self, data: Any = None) -> Any:
            self._check_open()
            # optional: asyncio only where the agent uses the asyncio client
            import asyncio

            pong: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            pong.set_result(0.0)
            return pong

        async def pong(self, data: Any = b"") -> None:
            self._check_open()

    return ReplayedClientConnection
