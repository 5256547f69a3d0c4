"""Interception for aiohttp: ``ClientSession._request``.

Replay builds a real ``ClientResponse`` whose ``content`` is aiohttp's own ``StreamReader`` holding
the served body, so ``async with session.get(...) as r: await r.json()``, ``r.content.iter_any()``
and line-by-line SSE reads behave as with a socket. Recording tees the response's ``StreamReader``:
its class is swapped for a subclass whose ``feed_data``/``feed_eof`` also feed the capture, so the
caller still receives each chunk as the connection delivers it.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import threading
from collections.abc import Callable
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from ..replay.faults import aiohttp_exception
from ..replay.modes import live_change
from ..replay.sandbox import delivered_response, emit_fault
from . import guard
from .dispatch import LIVE, active_run, plan
from .exchange import HttpRequest, HttpResponse, lower_headers
from .recording import LiveCapture

# id(StreamReader) -> capture. StreamReader has __slots__ (no instance dict, no weakrefs), so the
# capture cannot live on the instance; entries are removed at EOF.
_CAPTURES: dict[int, LiveCapture] = {}
_CAPTURES_LOCK = threading.Lock()


def _request_body(session: Any, data: Any, json_value: Any, headers: dict[str, str]) -> bytes:
    if json_value is not None:
        headers.setdefault("content-type", "application/json")
        dumps = getattr(session, "_json_serialize", jsonlib.dumps)
        out = dumps(json_value)
        return out.encode("utf-8") if isinstance(out, str) else bytes(out)
    if data is None:
        return b""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, dict | list | tuple):
        headers.setdefault("content-type", "application/x-www-form-urlencoded")
        items = data.items() if isinstance(data, dict) else data
        return urlencode(list(items)).encode("ascii")
    # Payload objects / FormData / streams: their bytes are not known before sending.
    value = getattr(data, "_value", None)
    return value if isinstance(value, bytes) else b""


def patch() -> Callable[[], None]:
    from aiohttp import ClientSession, RequestInfo, streams
    from aiohttp.client_reqrep import ClientResponse
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    original: Callable[..., Any] = ClientSession._request
    base_reader = streams.StreamReader

    class _TeeStreamReader(base_reader):  # type: ignore[misc,valid-type]
        __slots__ = ()

        def feed_data(self, data: bytes, *args: Any, **kwargs: Any) -> Any:
            capture = _CAPTURES.get(id(self))
            if capture is not None:
                capture.feed(bytes(data))
            return super().feed_data(data, *args, **kwargs)

        def feed_eof(self) -> None:
            with _CAPTURES_LOCK:
                capture = _CAPTURES.pop(id(self), None)
            if capture is not None:
                capture.finish()
            super().feed_eof()

    class _NoConnection:
        # The protocol a StreamReader expects; a served body has no connection to pause.
        _reading_paused = False
        connected = False

        def pause_reading(self) -> None:
            pass

        def resume_reading(self, resume_parser: bool = True) -> None:
            pass

    def served_response(method: str, url: Any, headers: Any, served: HttpResponse) -> Any:
        loop = asyncio.get_running_loop()
        request_info = RequestInfo(url, method, CIMultiDictProxy(CIMultiDict(headers)), url)
        response = ClientResponse(
            method,
            url,
            writer=None,
            continue100=None,
            timer=None,  # type: ignore[arg-type]
            request_info=request_info,
            traces=[],
            loop=loop,
            session=None,  # type: ignore[arg-type]
            stream_writer=SimpleNamespace(output_size=0),  # type: ignore[arg-type]
        )
        response.status = served.status
        try:
            import http

            response.reason = http.HTTPStatus(served.status).phrase
        except ValueError:
            response.reason = ""
        wire = served.wire_headers(method)
        response._headers = CIMultiDictProxy(CIMultiDict(wire))
        response._raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in wire)
        body = served.content()
        content = base_reader(_NoConnection(), max(len(body), 2**16), loop=loop)  # type: ignore[arg-type]
        if body:
            content.feed_data(body)
        content.feed_eof()
        response.content = content
        response._closed = False
        return response

    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        ctx = active_run()
        if ctx is None:
            return await original(self, method, str_or_url, **kwargs)
        url = self._build_url(str_or_url)
        params = kwargs.get("params")
        if params:
            url = url.extend_query(params)
        headers = lower_headers(list(self._prepare_headers(kwargs.get("headers")).items()))
        body = _request_body(self, kwargs.get("data"), kwargs.get("json"), headers)
        req = HttpRequest(method.upper(), str(url), headers, body)
        route, cls = plan(ctx, req)
        if route == LIVE:
            permit: str | None = req.host
            change = None
            if not ctx.recording:
                # A replay mode sends this on purpose (model-comparison, sandbox): maybe elsewhere.
                change = live_change(ctx, req, cls)
                fault = change.fault
                if fault is not None and not fault.delivered:
                    if fault.kind == "status":
                        emit_fault(ctx, req, cls, fault, fault.response())
                        return served_response(method.upper(), URL(str(url)), headers, fault.response())
                    emit_fault(ctx, req, cls, fault, None)
                    raise aiohttp_exception(fault)
                if change.url is not None:
                    # Query parameters are already in the mapped URL.
                    str_or_url = URL(change.url, encoded=True)
                    kwargs = {k: v for k, v in kwargs.items() if k != "params"}
                if change.body is not None:
                    kwargs = {k: v for k, v in kwargs.items() if k not in ("json", "data")}
                    kwargs["data"] = change.body
                req, permit = change.sent_request(req), change.permit
            capture = LiveCapture(ctx, req, cls)
            with guard.permitting(permit) if permit else nullcontext():
                response = await original(self, method, str_or_url, **kwargs)
            if change is not None and change.fault is not None:
                # Delivered, then the answer is lost: what the service did is recorded, the client fails.
                content = await response.read()
                response.release()
                lost = delivered_response(response.status, list(response.headers.items()), content)
                emit_fault(ctx, req, cls, change.fault, lost)
                raise aiohttp_exception(change.fault)
            auto = kwargs.get("auto_decompress")
            if auto is None:
                auto = getattr(self, "_auto_decompress", True)
            capture.start_response(response.status, list(response.headers.items()), decoded=bool(auto))
            _tee(response, capture)
            return response
        from ..replay.http import serve

        served = serve(ctx, req, cls)
        return served_response(method.upper(), URL(str(url)), headers, served)

    def _tee(response: Any, capture: LiveCapture) -> None:
        content = response.content
        if type(content) is not base_reader:
            # EmptyStreamReader (HEAD, 204...) or an unknown reader: nothing more will arrive.
            capture.finish()
            return
        # What the connection already delivered before we got the response.
        buffered = b"".join(bytes(c) for c in content._buffer)[content._buffer_offset :]
        if buffered:
            capture.feed(buffered)
        if content.is_eof():
            capture.finish()
            return
        with _CAPTURES_LOCK:
            _CAPTURES[id(content)] = capture
        content.__class__ = _TeeStreamReader

    ClientSession._request = _request  # type: ignore[method-assign]

    def restore() -> None:
        ClientSession._request = original  # type: ignore[method-assign]

    return restore
