"""A small threaded HTTP service on a fixed loopback port, with deterministic response headers."""

from __future__ import annotations

import errno
import json
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from filelock import FileLock, Timeout

HOST = "127.0.0.1"
# One fixed port per service: cassettes match on URL, so record and replay must use the same addresses.
PORTS: dict[str, int] = {
    "backoffice": 18431,
    "openai": 18432,
    "anthropic": 18433,
}
# Responses carry this Date so that two recordings are byte-identical.
FIXED_DATE = "Tue, 14 Nov 2023 22:13:20 GMT"


# Processes that bind the fixed ports (a recording session, the re-record check's subprocess, a
# model-comparison replay, a colleague's run in the same checkout) take turns instead of colliding.
PORT_LOCK = FileLock(
    str(Path(tempfile.gettempdir()) / "support-agent-example-ports.lock"), thread_local=False
)
PORT_LOCK_TIMEOUT = 180.0


def url_for(service: str) -> str:
    return f"http://{HOST}:{PORTS[service]}"


class ServiceError(RuntimeError):
    """A local service could not start (typically: its fixed port is taken)."""


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class LocalService:
    """Base class: subclasses implement :meth:`handle` and answer with :meth:`Exchange.json`/``stream``."""

    name: ClassVar[str] = "service"

    def __init__(self, port: int | None = None) -> None:
        self.port = PORTS[self.name] if port is None else port
        self._requested_port = self.port
        self.log: list[LoggedRequest] = []
        self.lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def fixed_port(self) -> bool:
        """Bound to one of the fixed ports cassettes record (not a free port chosen by the OS)."""
        return self._requested_port in PORTS.values()

    def start(self) -> LocalService:
        if self.fixed_port:
            try:
                PORT_LOCK.acquire(timeout=PORT_LOCK_TIMEOUT)
            except Timeout as exc:
                raise ServiceError(
                    f"another process has held the example's fixed ports for {PORT_LOCK_TIMEOUT:g}s "
                    f"(lock file {PORT_LOCK.lock_file})"
                ) from exc
        try:
            server = _Server((HOST, self.port), _handler_for(self))
        except OSError as exc:
            if self.fixed_port:
                PORT_LOCK.release()
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise ServiceError(
                    f"cannot start the local {self.name} service: {HOST}:{self.port} is in use. "
                    f"The example's cassettes record this fixed address; stop whatever listens on port "
                    f"{self.port} (e.g. `ss -ltnp | grep {self.port}`) and record again."
                ) from exc
            raise
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"{self.name}-service",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            if self.fixed_port:
                PORT_LOCK.release()

    def __enter__(self) -> LocalService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle(self, exchange: Exchange) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class Exchange:
    """One request being answered (wraps the handler so services never touch ``http.server``)."""

    def __init__(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        self._h = handler
        self.method = handler.command
        self.path = handler.path
        self.headers = {k.lower(): v for k, v in handler.headers.items()}
        self.body = body

    def json_body(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    def json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(value, sort_keys=True).encode()
        h = self._h
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            for name, val in (headers or {}).items():
                h.send_header(name, val)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): the work is done all the same

    def stream(self, events: Iterable[bytes]) -> None:
        """An SSE response, chunked, one event per chunk."""
        h = self._h
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream; charset=utf-8")
            h.send_header("Cache-Control", "no-cache")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for data in events:
                h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def _handler_for(service: LocalService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = f"{service.name}-service/1.0"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def date_time_string(self, timestamp: float | None = None) -> str:
            return FIXED_DATE

        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            exchange = Exchange(self, body)
            with service.lock:
                service.log.append(LoggedRequest(exchange.method, exchange.path, exchange.headers, body))
            service.handle(exchange)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    return Handler
