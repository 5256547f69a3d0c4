"""Interception for the official MCP SDK (``mcp``): client sessions recorded and served at the session level.

Every request a client session sends goes through ``JSONRPCDispatcher.send_raw_request`` (the typed
``ClientSession`` methods, ``mcp.Client``, and the Pydantic AI and Agents SDK servers built on them):
patched there, each request is a tool call of :mod:`..replay.mcp_sessions`. Recording sends it and records
its raw JSON-RPC result; replay serves the recorded result and the session parses it as it parsed the live
one. Notifications the client sends are dropped in replay (nothing listens).

No server in replay: the transports' entry points are imported by name (``from mcp import stdio_client``)
long before a run starts, so what is patched is what they look up when they run. stdio:
``mcp.client.stdio._create_platform_compatible_process`` returns a stand-in process that never answers
(no process started); SSE: ``mcp.client.sse.sse_within_origin`` yields a stand-in event stream (no
connection); streamable HTTP connects only when the session sends, which it no longer does. Where the
server does run (recording; sandbox, where a server the test starts is its own service), the HTTP the
transports send is their own traffic (:mod:`.internal`): not recorded a second time as HTTP events, and
let through the network guard in sandbox.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager, contextmanager
from types import ModuleType
from typing import Protocol, cast
from urllib.parse import urlsplit

from .. import guard
from ..core.capture import RunContext, current_run
from ..core.documents import Document
from ..core.json_copy import copy_json
from ..core.patching import Patches
from ..exceptions import RecordedToolError
from ..replay.mcp_sessions import UNRECORDED, McpServer, error_parts, error_text, start_request
from .internal import internal

__all__ = ["patch"]

SendRaw = Callable[..., Awaitable[dict[str, object]]]
Notify = Callable[..., Awaitable[None]]


class _McpErrorType(Protocol):
    """``mcp.shared.exceptions.MCPError`` as used here."""

    def __call__(self, code: int, message: str) -> BaseException: ...


# What each dispatcher (one per client session) learnt about its server. Weak: sessions come and go.
_SERVERS: weakref.WeakKeyDictionary[object, McpServer] = weakref.WeakKeyDictionary()


def _server(dispatcher: object) -> McpServer:
    server = _SERVERS.get(dispatcher)
    if server is None:
        server = _SERVERS[dispatcher] = McpServer()
        # Opened while its run was served: no server process or connection stands behind the session.
        server.served = _served_run() is not None
    return server


def _served_run() -> RunContext | None:
    """The active run when it serves MCP instead of reaching servers (regression, model-comparison, audit)."""
    ctx = current_run()
    return ctx if ctx is not None and not ctx.executes_tool() else None


def patch(patches: Patches, module: ModuleType) -> None:
    """Patch the MCP SDK (``module`` is ``mcp``)."""
    # optional: the SDK's modules, loaded only once ``mcp`` itself has been imported by the project.
    from mcp.client import sse, stdio, streamable_http
    from mcp.shared import jsonrpc_dispatcher
    from mcp.shared.exceptions import MCPError

    dispatcher_cls = jsonrpc_dispatcher.JSONRPCDispatcher
    patches.set(dispatcher_cls, "send_raw_request", _send_raw(dispatcher_cls.send_raw_request, MCPError))
    patches.set(dispatcher_cls, "notify", _notify(dispatcher_cls.notify))
    spawn = "_create_platform_compatible_process"
    patches.set(stdio, spawn, _spawn(getattr(stdio, spawn)))
    transport_cls = streamable_http.StreamableHTTPTransport
    for name in ("post_writer", "handle_get_stream", "terminate_session"):
        patches.set(transport_cls, name, _own_traffic(getattr(transport_cls, name)))
    # Module globals of mcp.client.sse (imported there from mcp.shared._httpx_utils), looked up per call.
    patches.set(sse, "sse_within_origin", _sse_connect(vars(sse)["sse_within_origin"]))
    patches.set(sse, "request_within_origin", _sse_request(vars(sse)["request_within_origin"]))


def _send_raw(original: SendRaw, mcp_error: _McpErrorType) -> SendRaw:
    async def send_raw_request(
        self: object, method: str, params: object, opts: object = None, **kwargs: object
    ) -> dict[str, object]:
        ctx = current_run()
        if ctx is None:
            return await original(self, method, params, opts, **kwargs)
        server = _server(self)
        # A session opened while its run was served stays served when a re-recording turns live at its
        # first drift: no server process or connection stands behind it.
        live = ctx.executes_tool() and not server.served
        if method in UNRECORDED:
            return await original(self, method, params, opts, **kwargs) if live else {}
        if live and server.needs_listing(method, params):
            await _list_tools(self, server, original, opts)
        call = start_request(
            ctx, server, method, copy_json(dict(params)) if isinstance(params, dict) else None
        )
        if not call.executes or not live:
            try:
                served = call.served()
            except RecordedToolError as exc:
                parts = error_parts(exc.message)
                if parts is None:
                    raise
                raise mcp_error(*parts) from None
            result: Document = copy_json(served) if isinstance(served, dict) else {}
            server.learn(method, result)
            return result
        try:
            raw = await original(self, method, params, opts, **kwargs)
        except Exception as exc:
            code, message = getattr(exc, "code", None), getattr(exc, "message", None)
            if isinstance(exc, cast(type, mcp_error)) and isinstance(code, int) and isinstance(message, str):
                call.finished(None, error_text(code, message))
            else:
                call.finished(None, f"{type(exc).__name__}: {exc}")
            raise
        server.learn(method, raw)
        call.finished(raw, None)
        return raw

    return send_raw_request


async def _list_tools(session: object, server: McpServer, original: SendRaw, opts: object) -> None:
    """Ask the server for its tool list (every page), unrecorded: a call the agent makes before listing the
    tools is then classified by the annotations the server gives it. A server that cannot list is left
    unasked; its calls are writes, as the MCP spec's default says."""
    server.listed_by_adapter = True
    params: dict[str, object] = {}
    for _page in range(100):
        try:
            listed = await original(session, "tools/list", params or None, opts)
        except Exception:
            return
        server.learn("tools/list", listed)
        cursor = listed.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return
        params = {"cursor": cursor}


def _notify(original: Notify) -> Notify:
    async def notify(
        self: object, method: str, params: object, opts: object = None, **kwargs: object
    ) -> None:
        if _served_run() is not None or _server(self).served:
            return None  # no server to tell: the session is served from the cassette
        await original(self, method, params, opts, **kwargs)

    return notify


def _spawn(original: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
    async def create_process(*args: object, **kwargs: object) -> object:
        if _served_run() is not None:
            return _ServedProcess()
        return await original(*args, **kwargs)

    return create_process


class _ServedProcess:
    """What ``stdio_client`` gets instead of the server's process in replay: pipes that carry nothing (the
    session sends nothing), a process already exited (the transport's shutdown has nothing to wait for)."""

    def __init__(self) -> None:
        # optional: anyio comes with the MCP SDK.
        import anyio

        self._out_writer, self.stdout = anyio.create_memory_object_stream[bytes](1)
        self.stdin = _Discard(self._out_writer)
        self.returncode = 0
        self.pid = 0


class _Discard:
    """The stand-in process's stdin: takes what is written; closing it ends the stand-in's stdout."""

    def __init__(self, out_writer: _Closable) -> None:
        self._out_writer = out_writer

    async def send(self, data: bytes) -> None:
        return None

    async def aclose(self) -> None:
        await self._out_writer.aclose()


class _Closable(Protocol):
    async def aclose(self) -> None: ...


class _HasUrl(Protocol):
    url: str


@contextmanager
def _permitted(url: str) -> Iterator[None]:
    """A transport's own traffic: not recorded as HTTP; let through the guard to the server the test runs
    (sandbox mode sends MCP calls to it; recording has no guard up)."""
    with ExitStack() as stack:
        stack.enter_context(internal())
        host = urlsplit(url).hostname
        ctx = current_run()
        if host and ctx is not None and ctx.executes_tool() and not ctx.recording:
            stack.enter_context(guard.permitting(host))
        yield


def _own_traffic(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def method(self: _HasUrl, *args: object, **kwargs: object) -> None:
        with _permitted(self.url):
            await original(self, *args, **kwargs)

    return method


def _sse_connect(
    original: Callable[..., AbstractAsyncContextManager[object]],
) -> Callable[..., AbstractAsyncContextManager[object]]:
    @asynccontextmanager
    async def sse_within_origin(
        client: object, url: str, *args: object, **kwargs: object
    ) -> AsyncIterator[object]:
        if _served_run() is not None:
            yield _ServedEventSource(url)
            return
        connection = original(client, url, *args, **kwargs)
        # Only the connecting is marked: the flag must not outlive this call in the caller's context.
        with _permitted(url):
            source = await connection.__aenter__()
        try:
            yield source
        except BaseException:
            if not await connection.__aexit__(*sys.exc_info()):
                raise
        else:
            await connection.__aexit__(None, None, None)

    return sse_within_origin


def _sse_request(original: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
    async def request_within_origin(
        client: object, method: str, url: str, *args: object, **kwargs: object
    ) -> object:
        with _permitted(url):
            return await original(client, method, url, *args, **kwargs)

    return request_within_origin


class _Event:
    def __init__(self, event: str, data: str) -> None:
        self.event = event
        self.data = data


class _Response:
    def raise_for_status(self) -> None:
        return None


class _ServedEventSource:
    """The SSE stream ``sse_client`` reads in replay: the endpoint event it waits for, then silence."""

    def __init__(self, url: str) -> None:
        self.response = _Response()
        self._endpoint = urlsplit(url).path or "/"

    def __aiter__(self) -> AsyncIterator[_Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[_Event]:
        # optional: anyio comes with the MCP SDK.
        import anyio

        yield _Event("endpoint", self._endpoint)
        await anyio.sleep_forever()
