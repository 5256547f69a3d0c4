"""Socket checks: ``connect``, ``connect_ex``, ``create_connection``, ``sendto``/``sendmsg`` with an address,
and every send on a socket connected before the guard applied (``send``, ``sendall``, ``sendto``,
``sendmsg``, ``sendfile``, and ``ssl.SSLSocket.send``).

The calls reach :func:`gate_check` through the socket gate (:mod:`pytest_agentreplay.core.socket_gate`),
whose trampolines are on the socket type before any method is taken; installing the guard arms it.

A socket connected through the guard while a run guarded, or accepted by a server of this process, sends
freely. Any other connected socket was connected before the guard applied (at import, in an earlier
test's fixture, a warmed keep-alive pool): its peer is checked like a connect.
"""

from __future__ import annotations

import socket
import sys

from ..core import socket_gate
from ..core.patching import Patches, genuine_function
from .decision import LOCAL_FAMILIES
from .reports import check_address
from .runs import RUNS, guarding_runs


def _family_of(sock: object) -> int | None:
    try:
        return int(getattr(sock, "family"))  # noqa: B009 (raw _socket objects are typed as object here)
    except (AttributeError, OSError, TypeError, ValueError):
        return None


def _fileno(sock: object) -> int:
    try:
        fileno = getattr(sock, "fileno")()  # noqa: B009
        return int(fileno)
    except (AttributeError, OSError, TypeError, ValueError):
        return -1


_BEFORE = " on a connection opened before the guard applied"


def _check_connect(sock: object, address: object, channel: str) -> None:
    runs = guarding_runs()
    if runs:
        check_address(_family_of(sock), address, channel, runs)
        RUNS.connected[id(sock)] = (_fileno(sock), frozenset(id(r) for r in runs))


def _check_peer(sock: object, channel: str) -> None:
    """A send without a destination: refused when the socket's peer was never checked and is not allowed."""
    runs = guarding_runs()
    if not runs:
        return
    family = _family_of(sock)
    fd, checked_by = RUNS.connected.get(id(sock), (None, frozenset()))
    if family in LOCAL_FAMILIES or (fd == _fileno(sock) and any(id(r) in checked_by for r in runs)):
        return
    try:
        peer = getattr(sock, "getpeername")()  # noqa: B009
    except (AttributeError, OSError):
        return  # not connected: the call fails on its own
    if RUNS.accepted.get(_fileno(sock)) == peer:
        return
    check_address(family, peer, channel + _BEFORE, runs)


def _fastopen(flags: object) -> bool:
    fastopen = getattr(socket, "MSG_FASTOPEN", 0)
    return isinstance(flags, int) and bool(fastopen) and bool(flags & fastopen)


def gate_check(name: str, sock: object, args: tuple[object, ...]) -> None:
    """The armed gate's check of one socket call (see :data:`~pytest_agentreplay.core.socket_gate.Check`)."""
    if name in ("connect", "connect_ex"):
        _check_connect(sock, args[0] if args else None, "socket." + name)
    elif name == "sendto":
        # sendto(data, address) or sendto(data, flags, address); the C method validates the rest.
        if len(args) >= 2:
            flags = args[1] if len(args) > 2 else 0
            channel = "socket.sendto" + (" (MSG_FASTOPEN)" if _fastopen(flags) else "")
            check_address(_family_of(sock), args[-1], channel)
    elif name == "sendmsg":
        # sendmsg(buffers[, ancdata[, flags[, address]]]): with an address it leaves on its own.
        if len(args) >= 4 and args[3] is not None:
            channel = "socket.sendmsg" + (" (MSG_FASTOPEN)" if _fastopen(args[2]) else "")
            check_address(_family_of(sock), args[3], channel)
        else:
            _check_peer(sock, "socket.sendmsg")
    elif name == "_accept":
        if args and isinstance(args[0], int):
            RUNS.accepted[args[0]] = args[1] if len(args) > 1 else None
    elif name == "create_connection":
        address = args[0] if args else None
        if isinstance(address, tuple) and address and isinstance(address[0], str):
            check_address(None, address, "socket.create_connection")
    else:  # send, sendall, sendfile
        _check_peer(sock, "socket." + name)


def _patch_ssl(patches: Patches) -> None:
    # ssl.SSLSocket.send writes through the TLS object in C, past the socket's own send: a TLS connection
    # opened before the run (a warmed HTTPS pool) is checked here. sendall and sendfile call send.
    ssl = sys.modules.get("ssl")
    cls = getattr(ssl, "SSLSocket", None)
    if not isinstance(cls, type) or "send" not in cls.__dict__:
        return
    original = genuine_function(cls.__dict__["send"])

    def send(self: socket.socket, *args: object, **kwargs: object) -> int:
        _check_peer(self, "ssl.SSLSocket.send")
        sent: int = original(self, *args, **kwargs)
        return sent

    patches.set(cls, "send", send, original=original)


def _disarm() -> None:
    socket_gate.arm(None)
    RUNS.connected.clear()
    RUNS.accepted.clear()


def patch_sockets(patches: Patches, _module: object) -> None:
    """Arm the socket gate (holding its trampolines in place, which the plugin keeps when it loads)."""
    patches.add(socket_gate.install(permanent=False))
    socket_gate.arm(gate_check)
    patches.add(_disarm)
    _patch_ssl(patches)
