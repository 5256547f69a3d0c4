"""Interception for httpx-ws, at ``WebSocketClient.connect`` and ``AsyncWebSocketClient.connect`` (which
``connect_ws`` and ``aconnect_ws`` call), translating what :func:`..replay.websocket_sessions.open_connection`
decides. Live, the upgrade goes out through the agent's httpx client marked as a transport's own traffic
(:func:`.internal`: the handshake is recorded once, here), and the session's ``send``, ``receive`` and
``close`` (which every ``send_*`` / ``receive_*`` goes through) report the messages. Served, no request at
all: a session subclass serves the recorded messages as wsproto events, ``WebSocketDisconnect`` at the
recorded close and ``queue.Empty`` (sync) or ``TimeoutError`` (async) where the recording timed out.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from ..core.capture import current_run
from ..core.patching import Patches
from ..http.websocket_messages import (
    ConversationEvents,
    Direction,
    Message,
    encode_message,
    handshake_request,
)
from ..replay.websocket_sessions import LiveConnection, Received, ServedConversation, open_connection
from . import EVENTS, connected, connecting, receiving


def _wsproto() -> Any:
    # optional: wsproto comes with httpx-ws, which the agent has imported
    import wsproto.events

    return wsproto.events


def _answer(response: Any) -> tuple[int, dict[str, str]]:
    return response.status_code, dict(response.headers.multi_items())


def _closed_by(exc: Any) -> tuple[Direction, int, str | None]:
    return "received", exc.code, exc.reason


def _served_event(served: ServedConversation, timeout_error: type[BaseException], api: Any) -> Any:
    events = _wsproto()
    step = served.receive()
    if isinstance(step, Received):
        if step.kind == "timeout":
            raise timeout_error()
        code, reason, _ = served.closed or (None, "", True)
        raise api.WebSocketDisconnect(code if code is not None else 1006, reason or None)
    if isinstance(step, bytes):
        return events.BytesMessage(data=step)
    return events.TextMessage(data=step)


def _sent_message(event: Any) -> Message | None:
    events = _wsproto()
    if isinstance(event, events.TextMessage):
        text: str = event.data
        return text
    if isinstance(event, events.BytesMessage):
        return bytes(event.data)
    return None


def _record(events: ConversationEvents | None, direction: Direction, event: Any) -> None:
    """A wsproto event sent or received on a live session: a message or the close goes to its events."""
    if events is None:
        return
    message = _sent_message(event)
    if message is not None:
        events.message(direction, encode_message(message))
    elif isinstance(event, _wsproto().CloseConnection):
        events.close(direction, event.code, event.reason)


def patch(patches: Patches, mod: ModuleType) -> None:
    api: Any = mod._api
    sync_client: Any = api.WebSocketClient
    async_client: Any = api.AsyncWebSocketClient
    sync_session: Any = api.WebSocketSession
    async_session: Any = api.AsyncWebSocketSession
    orig_connect, orig_aconnect = sync_client.connect, async_client.connect
    orig_send, orig_receive, orig_close = sync_session.send, sync_session.receive, sync_session.close
    orig_asend, orig_areceive, orig_aclose = async_session.send, async_session.receive, async_session.close
    replayed_sync, replayed_async = _replayed_classes(sync_session, async_session, api)
    refused: type[BaseException] = api.WebSocketUpgradeError
    disconnect: type[BaseException] = api.WebSocketDisconnect

    def opened(
        client: Any,
        url: str,
        subprotocols: list[str] | None,
        kwargs: dict[str, Any],
        original: Any,
        served: Any,
    ) -> tuple[Any, LiveConnection | None]:
        """The session's context manager to enter, and the live connection it opens (None: none to tell)."""
        ctx = current_run()
        if ctx is None:
            return original(client, url, subprotocols, **kwargs), None
        # The upgrade request httpx would send (built, not sent), with the headers httpx-ws adds.
        headers = dict(kwargs.get("headers") or {})
        headers.update(api._get_headers(subprotocols))
        request = client.client.build_request(
            "GET", url, headers=headers, params=kwargs.get("params"), cookies=kwargs.get("cookies")
        )
        opening = open_connection(
            ctx, handshake_request(str(request.url), dict(request.headers.multi_items()))
        )
        if not isinstance(opening, ServedConversation):
            return original(client, opening.url, subprotocols, **kwargs), opening
        # optional: httpx is what httpx-ws rides on, imported with it
        import httpx

        response = httpx.Response(opening.status, headers=opening.headers, request=request)
        if opening.status != 101:
            raise refused(response)
        return served(opening, response), None

    def upgrading(live: LiveConnection | None) -> contextlib.AbstractContextManager[None]:
        """Around httpx-ws's own connect: the upgrade's answer, or its failure, goes to ``live`` (if any)."""
        return contextlib.nullcontext() if live is None else connecting(live, refused, _answer)

    @contextlib.contextmanager
    def connect(self: Any, url: str, subprotocols: list[str] | None = None, **kwargs: Any) -> Iterator[Any]:
        manager, live = opened(self, url, subprotocols, kwargs, orig_connect, replayed_sync)
        with contextlib.ExitStack() as stack:
            with upgrading(live):
                session = stack.enter_context(manager)
            yield session if live is None else connected(live, session, _answer)

    @contextlib.asynccontextmanager
    async def aconnect(
        self: Any, url: str, subprotocols: list[str] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        manager, live = opened(self, url, subprotocols, kwargs, orig_aconnect, replayed_async)
        async with contextlib.AsyncExitStack() as stack:
            with upgrading(live):
                session = await stack.enter_async_context(manager)
            yield session if live is None else connected(live, session, _answer)

    def send(self: Any, event: Any) -> None:
        orig_send(self, event)
        _record(self.__dict__.get(EVENTS), "sent", event)

    def receive(self: Any, timeout: float | None = None) -> Any:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return orig_receive(self, timeout)
        with receiving(events, queue.Empty, disconnect, _closed_by):
            event = orig_receive(self, timeout)
        _record(events, "received", event)
        return event

    def close(self: Any, code: int = 1000, reason: str | None = None) -> None:
        _record_close(self, code, reason)
        orig_close(self, code, reason)

    async def asend(self: Any, event: Any) -> None:
        await orig_asend(self, event)
        _record(self.__dict__.get(EVENTS), "sent", event)

    async def areceive(self: Any, timeout: float | None = None) -> Any:
        events: ConversationEvents | None = self.__dict__.get(EVENTS)
        if events is None:
            return await orig_areceive(self, timeout)
        with receiving(events, TimeoutError, disconnect, _closed_by):
            event = await orig_areceive(self, timeout)
        _record(events, "received", event)
        return event

    async def aclose(self: Any, code: int = 1000, reason: str | None = None) -> None:
        _record_close(self, code, reason)
        await orig_aclose(self, code, reason)

    patches.set(sync_client, "connect", connect)
    patches.set(async_client, "connect", aconnect)
    patches.set(sync_session, "send", send)
    patches.set(sync_session, "receive", receive)
    patches.set(sync_session, "close", close)
    patches.set(async_session, "send", asend)
    patches.set(async_session, "receive", areceive)
    patches.set(async_session, "close", aclose)


def _record_close(session: Any, code: int, reason: str | None) -> None:
    events: ConversationEvents | None = session.__dict__.get(EVENTS)
    # A session closed by the server closes its side too: the close stays the server's.
    if events is not None and not session._should_close.is_set():
        events.close("sent", code, reason)


class _Served:
    """What both served sessions share: the conversation, and the handshake's response."""

    def __init__(self, served: ServedConversation, response: Any) -> None:
        # The base initialiser wants the upgraded network stream (and starts background work): none here.
        self._served = served
        self.response = response
        self.subprotocol = served.subprotocol


def _replayed_classes(sync_base: Any, async_base: Any, api: Any) -> tuple[Any, Any]:
    class ReplayedSession(_Served, sync_base):  # type: ignore[misc]
        """A session served from the cassette: httpx-ws's API, no stream, no background threads."""

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

        def ping(self, payload: bytes = b"") -> Any:
            # optional: threading only for the served pong
            import threading

            pong = threading.Event()
            pong.set()
            return pong

        def send(self, event: Any) -> None:
            _served_send(self._served, event, api)

        def receive(self, timeout: float | None = None) -> Any:
            return _served_event(self._served, queue.Empty, api)

        def close(self, code: int = 1000, reason: str | None = None) -> None:
            self._served.close(code, reason or "")

    class AsyncReplayedSession(_Served, async_base):  # type: ignore[misc]
        @contextlib.asynccontextmanager
        async def __asynccontextmanager__(self) -> AsyncIterator[Any]:
            try:
                yield self
            finally:
                await self.close()

        async def ping(self, payload: bytes = b"") -> Any:
            # optional: anyio comes with httpx-ws
            import anyio

            pong = anyio.Event()
            pong.set()
            return pong

        async def send(self, event: Any) -> None:
            _served_send(self._served, event, api)

        async def receive(self, timeout: float | None = None) -> Any:
            return _served_event(self._served, TimeoutError, api)

        async def close(self, code: int = 1000, reason: str | None = None) -> None:
            self._served.close(code, reason or "")

    return ReplayedSession, AsyncReplayedSession


def _served_send(served: ServedConversation, event: Any, api: Any) -> None:
    if served.closed is not None:
        raise api.WebSocketNetworkError()
    message = _sent_message(event)
    if message is not None:
        served.send(message)
    elif isinstance(event, _wsproto().CloseConnection):
        served.close(event.code, event.reason or "")
