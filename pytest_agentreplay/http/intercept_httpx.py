"""Interception for httpx and httpx2 (the official openai/anthropic SDKs send through httpx2).

Patched at the transport: ``HTTPTransport.handle_request`` and ``AsyncHTTPTransport.handle_async_request``.
Code above the transport (clients, auth, redirects, event hooks) runs unchanged; respx and
``MockTransport`` users keep working because live calls go to the original method, whose connection
pool respx patches, and a ``MockTransport`` is not an ``HTTPTransport`` at all. The same code serves
both libraries: everything client-specific is looked up on the module passed in.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import nullcontext
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..replay.faults import Fault, httpx_exception
from ..replay.modes import LiveChange, live_change
from ..replay.sandbox import delivered_response, emit_fault
from . import guard
from .dispatch import LIVE, active_run, plan
from .exchange import HttpRequest, HttpResponse
from .recording import LiveCapture

if TYPE_CHECKING:
    from ..capture import RunContext
    from .classify import Classification

_LOCK = threading.Lock()
# id(transport class) -> (class, originals): httpx may be aliased to httpx2 (same classes): patch once.
_PATCHED: dict[int, tuple[type, dict[str, Any]]] = {}


_SERVE: Callable[..., HttpResponse] | None = None


def _serve() -> Callable[..., HttpResponse]:
    """``replay.http.serve``, imported on first use (replay imports this package) and then kept."""
    global _SERVE
    if _SERVE is None:
        from ..replay.http import serve

        _SERVE = serve
    return _SERVE


def _to_request(request: Any, body: bytes) -> HttpRequest:
    raw = getattr(request.headers, "_list", None)
    # ``Headers._list`` holds (raw name, lower-case name, value) as bytes; ``multi_items()`` would
    # first re-detect the encoding of every header, which costs more than the rest of this function.
    if raw is not None:
        items = [(lower.decode("latin-1"), value.decode("latin-1")) for _, lower, value in raw]
    else:
        items = request.headers.multi_items()
    headers = dict(items)
    if len(headers) != len(items):
        # A repeated header: join its values in order, as HTTP allows.
        headers = {}
        for name, value in items:
            if name in headers:
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
    return HttpRequest(request.method, str(request.url), headers, body)


def _stream_classes(mod: ModuleType) -> tuple[type, type, type]:
    """Stream types deriving from this module's base classes (httpx checks isinstance on them)."""
    sync_base: Any = mod.SyncByteStream
    async_base: Any = mod.AsyncByteStream

    class ReplayStream(sync_base, async_base):  # type: ignore[misc]
        """Yields the served body chunk by chunk; SSE events are encoded only when pulled."""

        __slots__ = ("_response",)

        def __init__(self, response: HttpResponse) -> None:
            self._response = response

        def __iter__(self) -> Iterator[bytes]:
            return self._response.iter_chunks()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self._response.iter_chunks():
                yield chunk

    class TeeStream(sync_base):  # type: ignore[misc]
        """Hands each live chunk to the client as it arrives and to the capture."""

        def __init__(self, inner: Any, capture: LiveCapture) -> None:
            self._inner = inner
            self._capture = capture

        def __iter__(self) -> Iterator[bytes]:
            capture = self._capture
            try:
                for chunk in self._inner:
                    capture.feed(chunk)
                    yield chunk
            except BaseException as exc:
                capture.finish(exc)
                raise
            capture.finish()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._capture.finish()

    class AsyncTeeStream(async_base):  # type: ignore[misc]
        def __init__(self, inner: Any, capture: LiveCapture) -> None:
            self._inner = inner
            self._capture = capture

        async def __aiter__(self) -> AsyncIterator[bytes]:
            capture = self._capture
            try:
                async for chunk in self._inner:
                    capture.feed(chunk)
                    yield chunk
            except BaseException as exc:
                capture.finish(exc)
                raise
            capture.finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._capture.finish()

    return ReplayStream, TeeStream, AsyncTeeStream


def _served_response(mod: ModuleType, stream_cls: type, request: Any, served: HttpResponse) -> Any:
    # The shared tuple as it is: ``Response`` copies headers into its own ``Headers``.
    headers = served.wire_headers("HEAD") if request.method == "HEAD" else served.wire_tuple()
    # Plain bodies: one ByteStream, the same thing MockTransport would build; SSE: event by event.
    stream = stream_cls(served) if served.is_sse else mod.ByteStream(served.content())
    return mod.Response(served.status, headers=headers, stream=stream, request=request)


def _rewritten(mod: ModuleType, request: Any, req: HttpRequest, change: LiveChange) -> Any:
    """The request actually sent: another base URL (sandbox mapping) and/or another body (model)."""
    if change.url is None and change.body is None:
        return request
    headers = request.headers.copy()
    url = request.url
    if change.url is not None:
        url = mod.URL(change.url)
        headers["host"] = urlsplit(change.url).netloc
    content = req.body if change.body is None else change.body
    if change.body is not None:
        headers["content-length"] = str(len(content))
    return mod.Request(request.method, url, headers=headers, content=content, extensions=request.extensions)


def _undelivered_fault(
    mod: ModuleType, stream_cls: type, ctx: Any, req: HttpRequest, cls: Any, fault: Fault, request: Any
) -> Any:
    """A fault injected before sending: answer with its status, or raise the client's exception."""
    if fault.kind == "status":
        response = fault.response()
        emit_fault(ctx, req, cls, fault, response)
        return _served_response(mod, stream_cls, request, response)
    emit_fault(ctx, req, cls, fault, None)
    raise httpx_exception(fault, mod, request)


def _lost(ctx: Any, req: HttpRequest, cls: Any, fault: Fault, response: Any, content: bytes) -> None:
    emit_fault(
        ctx,
        req,
        cls,
        fault,
        delivered_response(response.status_code, response.headers.multi_items(), content),
    )


def patch(mod: ModuleType) -> Callable[[], None]:
    """Patch ``mod`` (httpx or httpx2); returns the function restoring it."""
    sync_cls: type = mod.HTTPTransport
    async_cls: type = mod.AsyncHTTPTransport
    replay_stream, tee_stream, async_tee_stream = _stream_classes(mod)
    orig_sync: Callable[..., Any] = sync_cls.handle_request  # type: ignore[attr-defined]
    orig_async: Callable[..., Any] = async_cls.handle_async_request  # type: ignore[attr-defined]

    def prepare_live(
        ctx: RunContext, req: HttpRequest, cls: Classification, request: Any
    ) -> tuple[Any, HttpRequest, str | None, LiveChange | None, Any]:
        """Where a live call goes, shared by the sync and async paths.

        Returns (client request, our request, host the guard lets through, the mode's change, and a
        ready response when an injected fault answers without sending).
        """
        if ctx.recording:
            return request, req, req.host, None, None
        # A replay mode sends this on purpose (model-comparison, sandbox): maybe elsewhere.
        change = live_change(ctx, req, cls)
        if change.fault is not None and not change.fault.delivered:
            ready = _undelivered_fault(mod, replay_stream, ctx, req, cls, change.fault, request)
            return request, req, None, change, ready
        return _rewritten(mod, request, req, change), change.sent_request(req), change.permit, change, None

    def handle_request(self: Any, request: Any) -> Any:
        ctx = active_run()
        if ctx is None:
            return orig_sync(self, request)
        req = _to_request(request, request.read())
        route, cls = plan(ctx, req)
        if route == LIVE:
            request, req, permit, change, ready = prepare_live(ctx, req, cls, request)
            if ready is not None:
                return ready
            capture = LiveCapture(ctx, req, cls)
            with guard.permitting(permit) if permit else nullcontext():
                response = orig_sync(self, request)
            if change is not None and change.fault is not None:
                # Delivered, then the answer is lost: what the service did is recorded, the client fails.
                content = response.read()
                response.close()
                _lost(ctx, req, cls, change.fault, response, content)
                raise httpx_exception(change.fault, mod, request)
            capture.start_response(response.status_code, response.headers.multi_items())
            response.stream = tee_stream(response.stream, capture)
            return response
        return _served_response(mod, replay_stream, request, _serve()(ctx, req, cls))

    async def handle_async_request(self: Any, request: Any) -> Any:
        ctx = active_run()
        if ctx is None:
            return await orig_async(self, request)
        req = _to_request(request, await request.aread())
        route, cls = plan(ctx, req)
        if route == LIVE:
            request, req, permit, change, ready = prepare_live(ctx, req, cls, request)
            if ready is not None:
                return ready
            capture = LiveCapture(ctx, req, cls)
            with guard.permitting(permit) if permit else nullcontext():
                response = await orig_async(self, request)
            if change is not None and change.fault is not None:
                content = await response.aread()
                await response.aclose()
                _lost(ctx, req, cls, change.fault, response, content)
                raise httpx_exception(change.fault, mod, request)
            capture.start_response(response.status_code, response.headers.multi_items())
            response.stream = async_tee_stream(response.stream, capture)
            return response
        return _served_response(mod, replay_stream, request, _serve()(ctx, req, cls))

    with _LOCK:
        if id(sync_cls) in _PATCHED:
            return lambda: None
        sync_cls.handle_request = handle_request  # type: ignore[attr-defined]
        async_cls.handle_async_request = handle_async_request  # type: ignore[attr-defined]
        _PATCHED[id(sync_cls)] = (sync_cls, {"sync": orig_sync, "async": orig_async, "async_cls": async_cls})

    def restore() -> None:
        with _LOCK:
            entry = _PATCHED.pop(id(sync_cls), None)
            if entry is None:
                return
            sync_cls.handle_request = orig_sync  # type: ignore[attr-defined]
            async_cls.handle_async_request = orig_async  # type: ignore[attr-defined]

    return restore
