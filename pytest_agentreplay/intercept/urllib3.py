"""Interception for urllib3 (and so for requests): ``HTTPConnectionPool.urlopen``.

Replay returns a real ``urllib3.HTTPResponse`` reading from an in-memory stream, so requests'
adapters, ``iter_content``/``iter_lines`` and ``.json()`` behave as with a socket. Recording wraps the
response's underlying file object: bytes are captured as the caller reads them (streaming preserved).
"""

from __future__ import annotations

import errno
import http.client
import io
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core.capture import RunContext, current_run
from ..core.patching import Patches
from ..http.exchange import HttpRequest, HttpResponse, decodes_all, lower_headers
from ..http.recording import LiveCapture
from ..replay.policy import Refuse, Send, decide
from . import permitted

if TYPE_CHECKING:
    from _typeshed import SupportsRead, WriteableBuffer
    from urllib3.connectionpool import HTTPConnectionPool
    from urllib3.response import HTTPResponse

    from ..replay.faults import Fault

    # The request bodies urllib3 sends: bytes, text, a file or an iterable of chunks.
    _Body = bytes | bytearray | memoryview | str | SupportsRead[bytes | str] | Iterable[bytes | str] | None

# Per-thread scratch, not shared state: whether this thread is inside a patched urlopen already.
_LOCAL = threading.local()
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _SandboxPools(dict[str, "HTTPConnectionPool"]):
    """A run's room: origin -> the connection pool a sandbox base-URL mapping sends to."""


class _TeeFP:
    """Stands in for ``http.client.HTTPResponse`` under urllib3: every read is also captured.

    It has no ``fp`` attribute on purpose: urllib3 then reads through ``read()`` (which de-chunks)
    instead of parsing chunks from the socket file itself, bypassing the tee.
    """

    def __init__(self, fp: http.client.HTTPResponse, capture: LiveCapture) -> None:
        self._fp = fp
        self._capture = capture

    def _after(self, data: bytes) -> bytes:
        self._capture.feed(data)
        if not data or self._fp.isclosed():
            self._capture.finish()
        return data

    def read(self, amt: int | None = None) -> bytes:
        data = self._fp.read() if amt is None else self._fp.read(amt)
        if amt is None:
            self._capture.feed(data)
            self._capture.finish()
            return bytes(data)
        return self._after(data)

    def read1(self, n: int = -1) -> bytes:
        return self._after(self._fp.read1(n))

    def readinto(self, b: WriteableBuffer) -> int:
        n = self._fp.readinto(b)
        self._after(bytes(memoryview(b)[:n]))
        return n

    def isclosed(self) -> bool:
        return self._fp.isclosed()

    def close(self) -> None:
        try:
            self._fp.close()
        finally:
            self._capture.finish()

    def __getattr__(self, name: str) -> object:
        if name == "fp":
            raise AttributeError(name)
        return getattr(self._fp, name)


class _ReplayFP(io.RawIOBase):
    """A served body as a file: chunks (SSE events) are produced only when read."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._buf = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        while not self._buf and not self._eof:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                self._eof = True
        view = memoryview(b).cast("B")
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def isclosed(self) -> bool:
        return self.closed or (self._eof and not self._buf)


def _full_url(pool: HTTPConnectionPool, url: str) -> str:
    if url.startswith(("http://", "https://")):
        return url
    scheme = pool.scheme
    host = pool.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = pool.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return f"{scheme}://{netloc}{url}"


def _body_bytes(body: _Body) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body)


def _with_body(headers: Mapping[str, object], body: bytes) -> dict[str, str]:
    out = {str(k): str(v) for k, v in dict(headers).items()}
    for name in list(out):
        if name.lower() == "content-length":
            out[name] = str(len(body))
    return out


def _fault_exception(fault: Fault, pool: HTTPConnectionPool, url: str) -> BaseException:
    """urllib3's own exception for an injected timeout or reset (requests wraps them as usual)."""
    from urllib3.exceptions import ProtocolError, ReadTimeoutError  # optional: comes with requests

    if fault.kind == "timeout":
        return ReadTimeoutError(pool, url, f"Read timed out. ({fault.message()})")
    reset = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    return ProtocolError(f"Connection aborted. ({fault.message()})", reset)


def patch(patches: Patches, module: ModuleType | None = None) -> None:
    # optional: urllib3 comes with requests; this runs once it is imported.
    import urllib3
    from urllib3.connectionpool import HTTPConnectionPool

    original: Callable[..., Any] = HTTPConnectionPool.urlopen

    def urlopen(
        self: HTTPConnectionPool,
        method: str,
        url: str,
        body: _Body = None,
        headers: Mapping[str, str] | None = None,
        **kw: Any,
    ) -> object:
        ctx = current_run()
        # A redirect followed inside urlopen re-enters here: the outermost call owns the exchange.
        if ctx is None or _LOCAL.__dict__.get("depth", 0):
            return original(self, method, url, body, headers, **kw)
        raw_body = _body_bytes(body)
        all_headers = headers if headers is not None else self.headers
        req = HttpRequest(method.upper(), _full_url(self, url), lower_headers(all_headers or {}), raw_body)
        action = decide(ctx, req)
        preload = kw.get("preload_content", True)
        decode = kw.get("decode_content", True)
        if not isinstance(action, Send):
            if isinstance(action, Refuse):
                raise action.exception(lambda fault: _fault_exception(fault, self, req.url))
            return served_response(self, action.response, method, req, preload, decode, kw)
        release = kw.get("release_conn")
        pool, call_url, call_headers = self, url, headers
        if action.url is not None:
            pool, call_url = _pool_for(ctx, action.url)
        if action.body is not None:
            raw_body = action.body
            if call_headers is not None:
                call_headers = _with_body(call_headers, raw_body)
        kw["preload_content"] = False
        kw["release_conn"] = False
        _LOCAL.depth = 1
        try:
            with permitted(action.permit):
                response: HTTPResponse = original(
                    pool, method, call_url, raw_body or None, call_headers, **kw
                )
        finally:
            _LOCAL.depth = 0
        if action.fault is not None:
            # Delivered, then the answer is lost: what the service did is recorded, the client fails.
            content = response.read(decode_content=True)
            response.release_conn()
            action.lost(response.status, list(response.headers.items()), content)
            raise _fault_exception(action.fault, self, req.url)
        action.capture.start_response(response.status, list(response.headers.items()))
        response._fp = _TeeFP(response._fp, action.capture)  # type: ignore[arg-type,assignment]
        if preload:
            response._body = response.read(decode_content=decode)
            if release if release is not None else True:
                response.release_conn()
        return response

    def served_response(
        pool: HTTPConnectionPool,
        served: HttpResponse,
        method: str,
        req: HttpRequest,
        preload: bool,
        decode: bool,
        kw: Mapping[str, object],
    ) -> urllib3.HTTPResponse:
        reason = http.client.responses.get(served.status, "")
        # A coding urllib3 does not undo was passed through to the client live: served coded again.
        served = served.for_client(decodes_all(urllib3.HTTPResponse.CONTENT_DECODERS))
        return urllib3.HTTPResponse(
            body=_ReplayFP(served.iter_chunks()),
            headers=urllib3.HTTPHeaderDict(served.wire_headers(req.method)),
            status=served.status,
            version=11,
            version_string="HTTP/1.1",
            reason=reason,
            preload_content=preload,
            decode_content=decode,
            original_response=None,
            pool=pool,
            retries=retries if isinstance(retries := kw.get("retries"), urllib3.Retry) else None,
            request_method=method,
            request_url=req.url,
        )

    def _pool_for(ctx: RunContext, target: str) -> tuple[HTTPConnectionPool, str]:
        """The pool for a sandbox base-URL mapping's target, kept per run, and the URL to ask it for."""
        parts = urlsplit(target)
        origin = f"{parts.scheme}://{parts.netloc}"
        pools = ctx.rooms.of(_SandboxPools, _SandboxPools)
        pool = pools.get(origin)
        if pool is None:
            pool = pools[origin] = urllib3.connection_from_url(origin)
        return pool, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    patches.set(HTTPConnectionPool, "urlopen", urlopen)
