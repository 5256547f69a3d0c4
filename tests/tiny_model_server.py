"""A model API of its own wire format ("tiny"), served on 127.0.0.1 for tests/test_providers_interface.py.

``POST /api/complete`` takes ``{"model_name", "preamble_text", "turns": [{"role", "text"}], "functions",
"stream"}`` and answers ``{"output": {"say", "invoke": [{"fn", "args"}]}, "finish", "tokens": {"in",
"out"}}``, or with ``"stream": true`` server-sent events ``{"delta": "..."}`` then ``{"finish",
"tokens"}``. The answer echoes the last turn's text. ``GET /anything`` answers a small JSON document.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TinyModelServer:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> TinyModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _handler(owner: TinyModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            owner.log.append(("GET", self.path))
            self._send(200, json.dumps({"path": self.path, "ok": True}).encode())

        def do_POST(self) -> None:
            owner.log.append(("POST", self.path))
            length = int(self.headers.get("content-length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/api/complete":
                self._send(200, json.dumps({"id": "w-1", "stored": True}).encode())
                return
            turns = request.get("turns") or [{}]
            said = f"echo: {turns[-1].get('text', '')}"
            tokens = {"in": sum(len(str(t.get("text", "")).split()) for t in turns), "out": len(said.split())}
            invoke = [{"fn": "lookup", "args": {"q": said}}] if request.get("functions") else []
            if not request.get("stream"):
                body = {"output": {"say": said, "invoke": invoke}, "finish": "done", "tokens": tokens}
                self._send(200, json.dumps(body).encode())
                return
            events: list[dict[str, object]] = [{"delta": word + " "} for word in said.split()]
            events.append({"finish": "done", "tokens": tokens})
            stream = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
            self._send(200, stream, "text/event-stream")

    return Handler
