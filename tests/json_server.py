"""A local HTTP/1.1 server on 127.0.0.1 answering JSON, for tests that need one small service of their own.

Subclass :class:`JsonHandler`, set what ``do_GET``/``do_POST`` answer with :meth:`JsonHandler.send_json`, and
run it in a :class:`JsonServer` (a context manager; ``url`` is its base URL).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def send_json(self, value: object, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class JsonServer:
    def __init__(self, handler: type[JsonHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> JsonServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop answering (a test replays with its service gone); stopping again does nothing."""
        self._server.shutdown()
        self._server.server_close()
