"""A WebSocket service for tests/test_websockets.py, on 127.0.0.1 with a port the OS picks, counting the
connections it accepts (a replay must open none).

Paths:
- ``/echo``: answers each message: a JSON text message with ``{"echo": <value>, "n": <count>}``, other
  text with ``echo: <text>``, bytes with the bytes reversed; the client closes.
- ``/stream``: answers the first message with three JSON messages, then closes with 4001 ``done``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from websockets.sync.server import ServerConnection, serve


class WebSocketServer:
    def __init__(self) -> None:
        self.connections = 0
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"ws://{host}:{port}"

    def start(self) -> WebSocketServer:
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _handle(self, ws: ServerConnection) -> None:
        with self._lock:
            self.connections += 1
            self.headers.append({k.lower(): v for k, v in ws.request.headers.raw_items()})
        path = ws.request.path
        if path.startswith("/stream"):
            ws.recv()
            for n in range(3):
                ws.send(json.dumps({"delta": f"part {n}", "n": n}))
            ws.close(4001, "done")
            return
        count = 0
        for message in ws:
            count += 1
            if isinstance(message, bytes):
                ws.send(message[::-1])
                continue
            try:
                value = json.loads(message)
            except ValueError:
                ws.send(f"echo: {message}")
            else:
                ws.send(json.dumps({"echo": value, "n": count}))
