"""Helpers of the isolation tests: a TCP server that counts what reaches it, and this machine's addresses.

The server listens on an address of this machine outside loopback: a session in its own network namespace
cannot reach it (it has loopback only), a session without one can, so the count tells them apart.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from types import TracebackType

_SIOCGIFADDR = 0x8915


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of one of this process's interfaces outside loopback, or None (read from the
    interfaces: nothing is sent)."""
    try:
        interfaces = socket.if_nameindex()
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in interfaces:
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address on this interface
            address = socket.inet_ntoa(answer[20:24])
            if not ipaddress.ip_address(address).is_loopback:
                return address
    return None


class CountingServer:
    """Listens on ``host`` and counts the TCP connections and UDP datagrams (on :attr:`udp_port`) that
    reached it.

    No thread accepts them: the kernel completes each connection into the listen backlog, and
    :meth:`hits` accepts whatever is there. So the count is exact the moment the client is done, with no
    waiting on a serving thread."""

    def __init__(self, host: str) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind((host, 0))
        self._sock.listen(64)
        self._sock.setblocking(False)
        self.host, self.port = self._sock.getsockname()[:2]
        # Datagrams too, on a port of their own: the kernel queues them until hits() reads them.
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind((host, 0))
        self._udp.setblocking(False)
        self.udp_port = self._udp.getsockname()[1]
        self._hits = 0

    def hits(self) -> int:
        """TCP connections and UDP datagrams that arrived."""
        while True:
            try:
                self._udp.recv(65536)
            except BlockingIOError:
                break
            self._hits += 1
        while True:
            try:
                conn, _ = self._sock.accept()
            except BlockingIOError:
                return self._hits
            self._hits += 1
            conn.close()

    def reset(self) -> None:
        self.hits()
        self._hits = 0

    def __enter__(self) -> CountingServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._sock.close()
        self._udp.close()
