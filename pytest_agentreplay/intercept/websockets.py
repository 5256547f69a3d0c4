"""Interception for the ``websockets`` client: the threading client (``websockets.sync.client.connect``) and
the asyncio one (``websockets.asyncio.client.connect``: awaited, ``async with``, ``async for``), translating
what :func:`..replay.websocket_sessions.open_connection` decides. Live, the library connects as usual and its
connection's patched ``send``, ``recv`` and ``close`` report to the connection's events; served, the client
gets the library's connection class with ``recv``, ``send``, ``close`` and ``ping`` answered by the
:class:`~..replay.websocket_sessions.ServedConversation`, no socket, thread or task behind it. The
deprecated ``websockets.legacy`` client is not intercepted: in replay the network guard refuses it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import FunctionType, ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core.capture import current_run
from ..core.patching import Patches
from ..http.websocket_messages import Message, encode_message, handshake_request
from ..replay.websocket_sessions import Received, ServedConversation, open_connection
from . import EVENTS, connected, connecting, receiving

if TYPE_CHECKING:
    from ..http.websocket_messages import ConversationEvents, Direction


def patch(patches: Patches, module: ModuleType) -> None:
    if module.__name__ == "websockets.sync.client":
        _patch_sync(patches, module)
    else:
        _patch_asyncio(patches, module)


_LOG = logging.getLogger("websockets.client")


def _lib() -> Any:
    # optional: websockets is imported by the agent (this adapter runs only once it has been)
    import websockets.datastructures
    import websockets.exceptions
    import websockets.frames
    import websockets.http11

    return websockets


def _closed_error(served: ServedConversation) -> BaseException:
    exceptions = _lib().exceptions
    code, reason, by_server = served.closed or (None, "", True)
    if code is None:
        error: BaseException = exceptions.ConnectionClosedError(None, None)
        return error
    close = _lib().frames.Close(code, reason)
    kind = exceptions.ConnectionClosedOK if code in (1000, 1001) else exceptions.ConnectionClosedError
    error = kind(close, close, by_server)
    return error


def _served_message(served: ServedConversation, decode: bool | None) -> Message:
    step = served.receive()
    if isinstance(step, Received):
        if step.kind == "timeout":
            raise TimeoutError("timed out while waiting for a message (as recorded)")
        raise _closed_error(served)
    if decode is True and isinstance(step, bytes):
        return step.decode("utf-8")
    if decode is False and isinstance(step, str):
        return step.encode("utf-8")
    return step


def _joined(message: object) -> Message:
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
            raise _closed_error(self._served)

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


def _sync_replayed_class(base: Any) -> Any:
    class ReplayedClientConnection(_Served, base):  # type: ignore[misc]
        """A connection served from the cassette: the threading client's API, no socket, no thread."""

        _pong = threading.Event()
        _pong.set()

        def recv(self, timeout: float | None = None, decode: bool | None = None) -> Message:
            return _served_message(self._served, decode)

        def recv_streaming(self, decode: bool | None = None) -> Any:
            yield _served_message(self._served, decode)

        def send(self, message: Any, text: bool | None = None) -> None:
            self._check_open()
            self._served.send(_joined(message))

        def close(self, code: int = 1000, reason: str = "") -> None:
            self._served.close(code, reason)

        def ping(self, data: Any = None, ack_on_close: bool = False) -> threading.Event:
            self._check_open()
            return self._pong

        def pong(self, data: Any = b"") -> None:
            self._check_open()

    return ReplayedClientConnection


def _async_replayed_class(base: Any) -> Any:
    class ReplayedClientConnection(_Served, base):  # type: ignore[misc]
        """A connection served from the cassette: the asyncio client's API, no transport, no task."""

        async def recv(self, decode: bool | None = None) -> Message:
            return _served_message(self._served, decode)

        async def recv_streaming(self, decode: bool | None = None) -> Any:
            yield _served_message(self._served, decode)

        async def send(self, message: Any, text: bool | None = None) -> None:
            self._check_open()
            if hasattr(message, "__aiter__"):
                message = [part async for part in message]
            self._served.send(_joined(message))

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


def _request_headers(protocol: Any, additional: object, user_agent: str | None) -> dict[str, str]:
    """The handshake headers the library sends, built by its own sans-I/O protocol (no I/O)."""
    request = protocol.connect()
    if additional is not None:
        request.headers.update(additional)
    if user_agent is not None:
        request.headers.setdefault("User-Agent", user_agent)
    return {k.lower(): v for k, v in request.headers.raw_items()}


def _served_connection(replayed: Any, served: ServedConversation, request_headers: Mapping[str, str]) -> Any:
    """The connection served from the cassette; a recorded refused handshake raises as the library does."""
    ws = _lib()
    parts = urlsplit(served.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = ws.http11.Request(path, ws.datastructures.Headers(dict(request_headers)))
    response = ws.http11.Response(
        served.status, "Switching Protocols", ws.datastructures.Headers(served.headers), b""
    )
    if served.status != 101:
        raise ws.exceptions.InvalidStatus(response)
    return replayed(served, request, response)


def _answer(response: Any) -> tuple[int, dict[str, str], bytes]:
    # No body: None before websockets 14 (a 101 has none).
    return response.status_code, dict(response.headers.raw_items()), bytes(response.body or b"")


def _ws_url(url: str) -> str:
    """A sandbox maps to an http(s) base URL: the same service's WebSocket scheme (ws, wss)."""
    return "ws" + url[4:] if url.startswith(("http://", "https://")) else url


def _closed_by(exc: Any) -> tuple[Direction, int | None, str]:
    """Which close ended the connection (the one received first, else the one sent)."""
    rcvd, sent = exc.rcvd, exc.sent
    if rcvd is not None and (sent is None or exc.rcvd_then_sent):
        return "received", rcvd.code, rcvd.reason
    if sent is not None:
        return "sent", sent.code, sent.reason
    return "received", None, ""


def _outgoing(message: Any) -> Any:
    """A message in fragments is sent whole, as it is recorded."""
    if isinstance(message, str | bytes | bytearray | memoryview | Mapping):
        return message
    return _joined(message)


def _sending_close(connection: Any, code: int, reason: str) -> None:
    events: ConversationEvents | None = connection.__dict__.get(EVENTS)
    if events is not None:
        events.close("sent", code, reason)


def _redirect(patches: Patches, function: FunctionType, to: Callable[..., object]) -> FunctionType:
    """Make every reference to ``function`` call ``to``; returns a copy of the original.

    The threading ``connect`` is a module function that opens its socket before any method a patch could
    reach, and agents bind it at import (``from websockets.sync.client import connect``), before a run
    installs interception: its code object is redirected, and restored with the interception.
    """
    code, defaults = function.__code__, function.__defaults__
    original = FunctionType(code, function.__globals__, function.__name__, defaults, function.__closure__)
    original.__kwdefaults__ = function.__kwdefaults__

    def trampoline(
        *args: object, _agentreplay_target: Callable[..., object] = to, **kwargs: object
    ) -> object:
        return _agentreplay_target(*args, **kwargs)

    patches.set(function, "__code__", trampoline.__code__)
    patches.set(function, "__defaults__", None)
    patches.set(function, "__kwdefaults__", {"_agentreplay_target": to})
    return original


def _sync_headers(mod: ModuleType, uri: str, kwargs: Mapping[str, Any]) -> dict[str, str]:
    # optional: websockets is imported by the agent
    from websockets.client import ClientProtocol
    from websockets.extensions.permessage_deflate import enable_client_permessage_deflate
    from websockets.uri import parse_uri

    extensions = kwargs.get("extensions")
    if kwargs.get("compression", "deflate") == "deflate":
        extensions = enable_client_permessage_deflate(extensions)
    protocol = ClientProtocol(
        parse_uri(uri),
        origin=kwargs.get("origin"),
        extensions=extensions,
        subprotocols=kwargs.get("subprotocols"),
    )
    return _request_headers(
        protocol, kwargs.get("additional_headers"), kwargs.get("user_agent_header", mod.USER_AGENT)
    )


def _patch_sync(patches: Patches, mod: ModuleType) -> None:
    base: Any = mod.ClientConnection
    replayed = _sync_replayed_class(base)
    orig_recv, orig_send, orig_close = base.recv, base.send, base.close

    def connect(uri: str, **kwargs: Any) -> Any:
        ctx = current_run()
        if ctx is None:
            return original(uri, **kwargs)
        headers = _sync_headers(mod, uri, kwargs)
        opening = open_connection(ctx, handshake_request(uri, headers))
        if isinstance(opening, ServedConversation):
            return _served_connection(replayed, opening, headers)
        with connecting(opening, _lib().exceptions.InvalidStatus, _answer):
            connection = original(_ws_url(opening.url), **kwargs)
        return connected(opening, connection, _answer)

    def recv(self: Any, *args: Any, **kwargs: Any) -> Message:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return orig_recv(self, *args, **kwargs)  # type: ignore[no-any-return]
        with receiving(events, TimeoutError, _lib().exceptions.ConnectionClosed, _closed_by):
            message: Message = orig_recv(self, *args, **kwargs)
        events.message("received", encode_message(message))
        return message

    def send(self: Any, message: Any, *args: Any, **kwargs: Any) -> None:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return orig_send(self, message, *args, **kwargs)  # type: ignore[no-any-return]
        message = _outgoing(message)
        orig_send(self, message, *args, **kwargs)
        events.message("sent", encode_message(_joined(message)))

    def close(self: Any, code: int = 1000, reason: str = "") -> None:
        _sending_close(self, code, reason)
        orig_close(self, code, reason)

    original = _redirect(patches, mod.connect, connect)
    for name, method in (("recv", recv), ("send", send), ("close", close)):
        patches.set(base, name, method)


def _patch_asyncio(patches: Patches, mod: ModuleType) -> None:
    # ``connect`` is a class: every way of using it goes through ``__await_impl__``.
    connect_cls: Any = mod.connect
    base: Any = mod.ClientConnection
    replayed = _async_replayed_class(base)
    orig_await = connect_cls.__await_impl__
    orig_recv, orig_send, orig_close = base.recv, base.send, base.close

    async def await_impl(self: Any) -> Any:
        ctx = current_run()
        if ctx is None:
            return await orig_await(self)
        # optional: websockets is imported by the agent
        from websockets.uri import parse_uri

        probe = self.protocol_factory(parse_uri(self.uri))
        headers = _request_headers(probe.protocol, self.additional_headers, self.user_agent_header)
        opening = open_connection(ctx, handshake_request(self.uri, headers))
        if isinstance(opening, ServedConversation):
            self.connection = _served_connection(replayed, opening, headers)
            return self.connection
        agent_uri = self.uri
        self.uri = _ws_url(opening.url)
        try:
            with connecting(opening, _lib().exceptions.InvalidStatus, _answer):
                connection = await orig_await(self)
        finally:
            self.uri = agent_uri
        return connected(opening, connection, _answer)

    async def recv(self: Any, *args: Any, **kwargs: Any) -> Message:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return await orig_recv(self, *args, **kwargs)  # type: ignore[no-any-return]
        with receiving(events, TimeoutError, _lib().exceptions.ConnectionClosed, _closed_by):
            message: Message = await orig_recv(self, *args, **kwargs)
        events.message("received", encode_message(message))
        return message

    async def send(self: Any, message: Any, *args: Any, **kwargs: Any) -> None:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return await orig_send(self, message, *args, **kwargs)  # type: ignore[no-any-return]
        if hasattr(message, "__aiter__"):
            message = [part async for part in message]
        message = _outgoing(message)
        await orig_send(self, message, *args, **kwargs)
        events.message("sent", encode_message(_joined(message)))

    async def close(self: Any, code: int = 1000, reason: str = "") -> None:
        _sending_close(self, code, reason)
        await orig_close(self, code, reason)

    patches.set(connect_cls, "__await_impl__", await_impl)
    for name, method in (("recv", recv), ("send", send), ("close", close)):
        patches.set(base, name, method)
