"""Interception for aiohttp: ``ClientSession._request``. Replay builds a real ``ClientResponse`` whose
``content`` is aiohttp's own ``StreamReader`` holding the served body (``await r.json()``, ``iter_any()`` and
line-by-line SSE reads behave as with a socket); recording swaps the response's reader class for one whose
``feed_data``/``feed_eof`` also feed the capture, so the caller still gets each chunk as it arrives."""

from __future__ import annotations

import errno
import http.client
import json as jsonlib
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..core.capture import current_run
from ..core.patching import Patches
from ..http import bodies
from ..http.exchange import HttpRequest, HttpResponse, aiohttp_decodes, lower_headers
from ..http.recording import LiveCapture
from ..replay.policy import Refuse, Send, decide
from . import permitted

if TYPE_CHECKING:
    from aiohttp.typedefs import StrOrURL

    from ..replay.faults import Fault


# The capture of each response body being teed, by id of its ``StreamReader`` (which has ``__slots__``: no
# room for it on the reader), until its EOF. Process-wide, like the patch: a reader is fed by whatever event
# loop and thread own its connection; each access is one dict operation, atomic.
_TEED: dict[int, LiveCapture] = {}


def _request_body(session: object, data: object, json_value: object, headers: dict[str, str]) -> bytes:
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
        return urlencode(data).encode("ascii")
    # Payload objects / FormData / streams: their bytes are not known before sending.
    value = getattr(data, "_value", None)
    return value if isinstance(value, bytes) else b""


def _fault_exception(fault: Fault) -> BaseException:
    import aiohttp  # optional: only a run that patched aiohttp gets here

    if fault.kind == "timeout":
        return aiohttp.ServerTimeoutError(f"Timeout on reading data from socket ({fault.message()})")
    return aiohttp.ClientOSError(errno.ECONNRESET, f"Connection reset by peer ({fault.message()})")


def patch(patches: Patches, module: ModuleType | None = None) -> None:
    # optional: aiohttp (and its multidict and yarl) is patched only once it is imported.
    # heavy: asyncio costs ~0.1 s to import, and aiohttp has imported it by now.
    import asyncio

    from aiohttp import ClientSession, RequestInfo, streams
    from aiohttp.client_reqrep import ClientResponse
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    original = ClientSession._request
    base_reader = streams.StreamReader

    class _TeeStreamReader(base_reader):  # type: ignore[misc,valid-type]
        __slots__ = ()

        def feed_data(self, data: bytes, *args: object, **kwargs: object) -> object:
            capture = _TEED.get(id(self))
            if capture is not None:
                capture.feed(bytes(data))
            return super().feed_data(data, *args, **kwargs)

        def feed_eof(self) -> None:
            capture = _TEED.pop(id(self), None)
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

    def served_response(
        method: str, url: URL, headers: dict[str, str], served: HttpResponse, auto: bool
    ) -> ClientResponse:
        # The body goes straight into the reader, past aiohttp's decompression: a coding aiohttp left
        # undone live (a chain, auto_decompress off) is coded again here.
        served = served.for_client(aiohttp_decodes(auto))
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
        response.reason = http.client.responses.get(served.status, "")
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

    async def _request(
        self: ClientSession, method: str, str_or_url: StrOrURL, **kwargs: Any
    ) -> ClientResponse:
        ctx = current_run()
        if ctx is None:
            return await original(self, method, str_or_url, **kwargs)
        url = self._build_url(str_or_url)
        params = kwargs.get("params")
        if params:
            url = url.extend_query(params)
        headers = lower_headers(list(self._prepare_headers(kwargs.get("headers")).items()))
        body = _request_body(self, kwargs.get("data"), kwargs.get("json"), headers)
        action = decide(ctx, HttpRequest(method.upper(), str(url), headers, body))
        auto = kwargs.get("auto_decompress")
        if auto is None:
            auto = getattr(self, "_auto_decompress", True)
        if not isinstance(action, Send):
            if isinstance(action, Refuse):
                raise action.exception(_fault_exception)
            return served_response(method.upper(), URL(str(url)), headers, action.response, bool(auto))
        if action.url is not None:
            # Query parameters are already in the mapped URL.
            str_or_url = URL(action.url, encoded=True)
            kwargs = {k: v for k, v in kwargs.items() if k != "params"}
        if action.body is not None:
            kwargs = {k: v for k, v in kwargs.items() if k not in ("json", "data")}
            kwargs["data"] = action.body
        with permitted(action.permit):
            response = await original(self, method, str_or_url, **kwargs)
        if action.fault is not None:
            # Delivered, then the answer is lost: what the service did is recorded, the client fails.
            content = await response.read()
            response.release()
            action.lost(response.status, list(response.headers.items()), content)
            raise _fault_exception(action.fault)
        # aiohttp hands the reader decoded bytes only for the codings it undoes; the capture undoes the rest.
        coding = response.headers.get("content-encoding", "")
        decoded = aiohttp_decodes(bool(auto))(bodies.codings(coding))
        action.capture.start_response(response.status, list(response.headers.items()), decoded=decoded)
        _tee(response, action.capture)
        return response

    def _tee(response: ClientResponse, capture: LiveCapture) -> None:
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
        _TEED[id(content)] = capture
        content.__class__ = _TeeStreamReader

    patches.set(ClientSession, "_request", _request)
