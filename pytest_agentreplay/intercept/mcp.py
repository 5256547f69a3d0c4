"""Interception for the official MCP SDK (``mcp``): client sessions recorded and served at the session level.

Every request a client session sends goes through ``JSONRPCDispatcher.send_raw_request``: patched there, each
is a tool call of :mod:`..replay.mcp_sessions` (recorded raw, served for the session to parse as it parsed
the live one). No server in replay: the transports' entry points are bound by name long before a run
starts, so what is patched is what they look up when they run (stdio: a stand-in process that never
answers; SSE: a stand-in event stream; streamable HTTP connects only when the session sends). Where a server
does run, the HTTP the transports send is their own traffic (:func:`.internal`).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.capture import RunContext, current_run
from ..core.documents import Document
from ..core.json_copy import copy_json
from ..core.patching import Patches
from ..exceptions import RecordedToolError
from ..replay.mcp_sessions import UNRECORDED, McpServer, error_parts, error_text, start_request
from . import internal, permitted

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.client.streamable_http import StreamableHTTPTransport

__all__ = ["patch"]

SendRaw = Callable[..., Awaitable[dict[str, object]]]


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
    # optional: the SDK's modules, loaded only once ``mcp`` itself has been imported by the project.
    from mcp.client import sse, stdio, streamable_http
    from mcp.shared.exceptions import MCPError
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    send_raw: SendRaw = JSONRPCDispatcher.send_raw_request
    orig_notify: Callable[..., Awaitable[None]] = JSONRPCDispatcher.notify
    spawn = "_create_platform_compatible_process"
    orig_spawn = getattr(stdio, spawn)
    # Module globals of mcp.client.sse (imported there from mcp.shared._httpx_utils), looked up per call.
    orig_sse_connect = vars(sse)["sse_within_origin"]
    orig_sse_request = vars(sse)["request_within_origin"]

    async def send_raw_request(
        self: object, method: str, params: object, opts: object = None, **kwargs: object
    ) -> dict[str, object]:
        ctx = current_run()
        if ctx is None:
            return await send_raw(self, method, params, opts, **kwargs)
        server = _server(self)
        # A session opened while its run was served stays served when a re-recording turns live at its
        # first drift: no server process or connection stands behind it.
        live = ctx.executes_tool() and not server.served
        if method in UNRECORDED:
            return await send_raw(self, method, params, opts, **kwargs) if live else {}
        if live and server.needs_listing(method, params):
            await _list_tools(self, server, send_raw, opts)
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
                raise MCPError(*parts) from None
            result: Document = copy_json(served) if isinstance(served, dict) else {}
            server.learn(method, result)
            return result
        try:
            raw = await send_raw(self, method, params, opts, **kwargs)
        except MCPError as exc:
            call.finished(None, error_text(exc.code, exc.message))
            raise
        except Exception as exc:
            call.finished(None, f"{type(exc).__name__}: {exc}")
            raise
        server.learn(method, raw)
        call.finished(raw, None)
        return raw

    async def notify(
        self: object, method: str, params: object, opts: object = None, **kwargs: object
    ) -> None:
        if _served_run() is not None or _server(self).served:
            return None  # no server to tell: the session is served from the cassette
        await orig_notify(self, method, params, opts, **kwargs)

    async def create_process(*args: object, **kwargs: object) -> object:
        return _ServedProcess() if _served_run() is not None else await orig_spawn(*args, **kwargs)

    @asynccontextmanager
    async def sse_within_origin(
        client: object, url: str, *args: object, **kwargs: object
    ) -> AsyncIterator[object]:
        if _served_run() is not None:
            yield _ServedEventSource(url)
            return
        async with AsyncExitStack() as stack:
            # Only the connecting is marked: the flag must not outlive this call in the caller's context.
            with _server_traffic(url):
                source = await stack.enter_async_context(orig_sse_connect(client, url, *args, **kwargs))
            yield source

    async def request_within_origin(
        client: object, method: str, url: str, *args: object, **kwargs: object
    ) -> object:
        with _server_traffic(url):
            return await orig_sse_request(client, method, url, *args, **kwargs)

    patches.set(JSONRPCDispatcher, "send_raw_request", send_raw_request)
    patches.set(JSONRPCDispatcher, "notify", notify)
    patches.set(stdio, spawn, create_process)
    transport_cls = streamable_http.StreamableHTTPTransport
    for name in ("post_writer", "handle_get_stream", "terminate_session"):
        patches.set(transport_cls, name, _own_traffic(getattr(transport_cls, name)))
    patches.set(sse, "sse_within_origin", sse_within_origin)
    patches.set(sse, "request_within_origin", request_within_origin)


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

    def __init__(self, out_writer: MemoryObjectSendStream[bytes]) -> None:
        self._out_writer = out_writer

    async def send(self, data: bytes) -> None:
        return None

    async def aclose(self) -> None:
        await self._out_writer.aclose()


@contextmanager
def _server_traffic(url: str) -> Iterator[None]:
    """A transport's own traffic: not recorded as HTTP; let through the guard to the server the test runs
    (sandbox mode sends MCP calls to it; recording has no guard up)."""
    host = urlsplit(url).hostname
    ctx = current_run()
    sandboxed = ctx is not None and ctx.executes_tool() and not ctx.recording
    with internal(), permitted(host if sandboxed else None):
        yield


def _own_traffic(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def method(self: StreamableHTTPTransport, *args: object, **kwargs: object) -> None:
        with _server_traffic(self.url):
            await original(self, *args, **kwargs)

    return method


class _ServedEventSource:
    """The SSE stream ``sse_client`` reads in replay: the endpoint event it waits for, then silence."""

    def __init__(self, url: str) -> None:
        self.response = SimpleNamespace(raise_for_status=lambda: None)
        self._endpoint = urlsplit(url).path or "/"

    async def __aiter__(self) -> AsyncIterator[SimpleNamespace]:
        # optional: anyio comes with the MCP SDK.
        import anyio

        yield SimpleNamespace(event="endpoint", data=self._endpoint)
        await anyio.sleep_forever()
