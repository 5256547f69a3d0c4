"""A bare listener on a stopped server's port, for the tests that replay with their server stopped:
it counts every connection anything still opens to that port (0 is what replay must show)."""

from __future__ import annotations

import socket
import threading


class ConnectionCounter:
    def __init__(self, port: int) -> None:
        self.count = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(8)
        self._sock.settimeout(0.05)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self) -> int:
        self._done.set()
        self._thread.join()
        self._sock.close()
        return self.count
