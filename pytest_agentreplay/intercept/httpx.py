"""Interception for httpx and httpx2 (the official openai/anthropic SDKs send through httpx2) at the transport
(``HTTPTransport.handle_request``, ``AsyncHTTPTransport.handle_async_request``): clients, auth, redirects and
event hooks above it run unchanged; respx keeps working (live calls go to the original method, whose
connection pool respx patches) and a ``MockTransport`` is not an ``HTTPTransport`` at all."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core.capture import current_run
from ..core.patching import Patches
from ..http.exchange import HttpRequest, HttpResponse, decodes_all, lower_headers
from ..http.recording import LiveCapture
from ..replay.policy import Refuse, Send, Serve, decide
from . import INTERNAL, permitted

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..replay.faults import Fault


# httpx's or httpx2's requests and responses: the same API, other classes (looked up on the module passed in).
_Request = Any
_Response = Any
# ``HTTPTransport.handle_request`` and ``AsyncHTTPTransport.handle_async_request`` (self, request).
SyncHandler = Callable[[object, _Request], _Response]
AsyncHandler = Callable[[object, _Request], Awaitable[_Response]]


# Bounds a run's header texts: a client sending ever new header values must not grow them forever.
_HEADER_TEXTS_SIZE = 512


class _HeaderTexts(dict[tuple[bytes, bytes], tuple[str, str]]):
    """A run's header pairs as text: (name, value) as sent -> (the name lower-cased, the value), decoded as
    latin-1 (a function of the pair alone). A client sends the same headers on every call: each is decoded
    once per run, and a request's headers are one lookup each; a pair not seen yet (a new content length)
    is decoded where it is looked up."""

    def __missing__(self, pair: tuple[bytes, bytes]) -> tuple[str, str]:
        name, value = pair
        text = (name.lower().decode("latin-1"), value.decode("latin-1"))
        if len(self) < _HEADER_TEXTS_SIZE:
            self[pair] = text
        return text


def _to_request(request: _Request, body: bytes, texts: _HeaderTexts) -> HttpRequest:
    # ``Headers.raw``: the (name, value) bytes as sent; ``multi_items()`` would first re-detect the
    # encoding of every header, which costs more than the rest of this function.
    raw = request.headers.raw
    if texts:
        headers = dict(map(texts.__getitem__, raw))
    else:
        # The run's first request: its pairs decoded in one pass (a lookup each would cost more), then kept.
        pairs = [(name.lower().decode("latin-1"), value.decode("latin-1")) for name, value in raw]
        if len(pairs) <= _HEADER_TEXTS_SIZE:
            texts.update(zip(raw, pairs, strict=True))
        headers = dict(pairs)
    if len(headers) != len(raw):
        # A repeated header: its values joined in order, as HTTP allows.
        headers = lower_headers(raw)
    return HttpRequest(request.method, str(request.url), headers, body)


@contextmanager
def _feeding(capture: LiveCapture) -> Iterator[LiveCapture]:
    """Around the tee of a live stream: the capture ends with the stream, or with the error that ended it."""
    try:
        yield capture
    except GeneratorExit:
        # The client stopped reading (an SDK that stops at its stream's end marker, as mistralai does at
        # "[DONE]"), as close() says: what it read is the exchange, not a failed one.
        capture.finish()
        raise
    except BaseException as exc:
        capture.finish(exc)
        raise
    capture.finish()


def _stream_classes(mod: ModuleType) -> tuple[type, type]:
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

    class TeeStream(sync_base, async_base):  # type: ignore[misc]
        """Hands each live chunk to the client as it arrives and to the capture (sync or async stream)."""

        def __init__(self, inner: Any, capture: LiveCapture) -> None:
            self._inner = inner
            self._capture = capture

        def __iter__(self) -> Iterator[bytes]:
            with _feeding(self._capture) as capture:
                for chunk in self._inner:
                    capture.feed(chunk)
                    yield chunk

        async def __aiter__(self) -> AsyncIterator[bytes]:
            with _feeding(self._capture) as capture:
                async for chunk in self._inner:
                    capture.feed(chunk)
                    yield chunk

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._capture.finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._capture.finish()

    return ReplayStream, TeeStream


class _ServedHeaders(dict[tuple[ModuleType, tuple[tuple[str, str], ...]], Any]):
    """A run's httpx ``Headers`` of each header tuple served, by module and tuple: ``Response`` copies the
    one it is given (never handed out) instead of encoding every header again."""


def _not_sent(
    ctx: RunContext, mod: ModuleType, stream_cls: type, request: _Request, action: Serve | Refuse
) -> _Response:
    """The answer to a request the policy does not send: refused (raised as httpx's error) or served."""
    if isinstance(action, Refuse):
        raise action.exception(lambda fault: _fault_exception(mod, fault, request))
    # A coding this httpx does not undo was passed through to the client live: served coded again.
    served = action.response
    if served.body and "coding" in served.body:  # (else ``for_client`` returns it: asked nothing of httpx)
        served = served.for_client(decodes_all(mod._decoders.SUPPORTED_DECODERS))
    headers: Any
    if request.method == "HEAD":
        headers = served.wire_headers("HEAD")
    else:
        known = ctx.rooms.of(_ServedHeaders, _ServedHeaders)
        key = (mod, served.wire_tuple())
        headers = known.get(key)
        if headers is None:
            headers = known[key] = mod.Headers(key[1])
    # Plain bodies: one ByteStream, the same thing MockTransport would build; SSE: event by event.
    stream = stream_cls(served) if served.is_sse else mod.ByteStream(served.content())
    return mod.Response(served.status, headers=headers, stream=stream, request=request)


def _rewritten(mod: ModuleType, request: _Request, action: Send) -> _Request:
    """The request actually sent: another base URL (sandbox mapping) and/or another body (model)."""
    if action.url is None and action.body is None:
        return request
    headers = request.headers.copy()
    url = request.url
    if action.url is not None:
        url = mod.URL(action.url)
        headers["host"] = urlsplit(action.url).netloc
    content = action.request.body
    if action.body is not None:
        headers["content-length"] = str(len(content))
    return mod.Request(request.method, url, headers=headers, content=content, extensions=request.extensions)


def _fault_exception(mod: ModuleType, fault: Fault, request: _Request) -> BaseException:
    """httpx's own exception for an injected timeout or reset (``mod`` is httpx or httpx2)."""
    if fault.kind == "timeout":
        exc: BaseException = mod.ReadTimeout(fault.message(), request=request)
    else:
        exc = mod.ReadError(
            f"[Errno {errno.ECONNRESET}] Connection reset by peer ({fault.message()})", request=request
        )
    return exc


def patch(patches: Patches, mod: ModuleType) -> None:
    """Patch ``mod`` (httpx or httpx2; when one is an alias of the other, its classes are patched once)."""
    sync_cls: type = mod.HTTPTransport
    async_cls: type = mod.AsyncHTTPTransport
    replay_stream, tee_stream = _stream_classes(mod)
    orig_sync: SyncHandler = sync_cls.handle_request  # type: ignore[attr-defined]
    orig_async: AsyncHandler = async_cls.handle_async_request  # type: ignore[attr-defined]

    def handle_request(self: object, request: _Request) -> _Response:
        ctx = current_run()
        # Traffic a transport adapter owns (MCP over HTTP, a WebSocket upgrade): sent as is.
        if ctx is None or INTERNAL.get():
            return orig_sync(self, request)
        texts = ctx.rooms.of(_HeaderTexts, _HeaderTexts)
        action = decide(ctx, _to_request(request, request.read(), texts))
        if not isinstance(action, Send):
            return _not_sent(ctx, mod, replay_stream, request, action)
        request = _rewritten(mod, request, action)
        with permitted(action.permit):
            response = orig_sync(self, request)
        if action.fault is not None:
            # Delivered, then the answer is lost: what the service did is recorded, the client fails.
            content = response.read()
            response.close()
            action.lost(response.status_code, response.headers.multi_items(), content)
            raise _fault_exception(mod, action.fault, request)
        action.capture.start_response(response.status_code, response.headers.multi_items())
        response.stream = tee_stream(response.stream, action.capture)
        return response

    async def handle_async_request(self: object, request: _Request) -> _Response:
        ctx = current_run()
        if ctx is None or INTERNAL.get():
            return await orig_async(self, request)
        texts = ctx.rooms.of(_HeaderTexts, _HeaderTexts)
        action = decide(ctx, _to_request(request, await request.aread(), texts))
        if not isinstance(action, Send):
            return _not_sent(ctx, mod, replay_stream, request, action)
        request = _rewritten(mod, request, action)
        with permitted(action.permit):
            response = await orig_async(self, request)
        if action.fault is not None:
            content = await response.aread()
            await response.aclose()
            action.lost(response.status_code, response.headers.multi_items(), content)
            raise _fault_exception(mod, action.fault, request)
        action.capture.start_response(response.status_code, response.headers.multi_items())
        response.stream = tee_stream(response.stream, action.capture)
        return response

    patches.set(sync_cls, "handle_request", handle_request)
    patches.set(async_cls, "handle_async_request", handle_async_request)
