"""Socket checks through the socket gate (:mod:`pytest_agentreplay.core.socket_gate`): connects, sends with
an address, and every send on a socket connected before the guard applied (its peer is checked like a
connect; one connected through the guard while a run guarded, or accepted by a server here, sends freely).

Name resolution is patched in ``socket`` and ``_socket`` (``getaddrinfo`` only in ``_socket``, which
``socket.getaddrinfo`` and asyncio call): refusing there names the host and leaks no DNS query. Lookups
that stay on the machine pass; what an allowed name resolved to is remembered per run, since the connect
that follows only sees the IP.
"""

from __future__ import annotations

import _socket
import socket
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..core import socket_gate
from ..core.patching import Patches, genuine, genuine_function
from .decision import LOCAL_FAMILIES, is_ip, resolution_is_local
from .reports import check_address
from .runs import ORIGINALS, RUNS, guarding_runs


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
        runs = guarding_runs()
        if runs:
            check_address(_family_of(sock), args[0] if args else None, "socket." + name, runs)
            RUNS.connected[id(sock)] = (_fileno(sock), frozenset(id(r) for r in runs))
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


def _ssl_send(self: socket.socket, *args: object, **kwargs: object) -> int:
    _check_peer(self, "ssl.SSLSocket.send")
    sent: int = ORIGINALS["ssl_send"](self, *args, **kwargs)
    return sent


def _patch_ssl(patches: Patches) -> None:
    # ssl.SSLSocket.send writes through the TLS object in C, past the socket's own send: a TLS connection
    # opened before the run (a warmed HTTPS pool) is checked here. sendall and sendfile call send.
    ssl = sys.modules.get("ssl")
    cls = getattr(ssl, "SSLSocket", None)
    if isinstance(cls, type) and "send" in cls.__dict__:
        ORIGINALS["ssl_send"] = original = genuine_function(cls.__dict__["send"])
        patches.set(cls, "send", _ssl_send, original=original)


def _disarm() -> None:
    socket_gate.GATE.check = None
    RUNS.connected.clear()
    RUNS.accepted.clear()


def patch_sockets(patches: Patches, _module: object) -> None:
    """Arm the socket gate (holding its trampolines in place, which the plugin keeps when it loads)."""
    patches.add(socket_gate.GATE.acquire())
    socket_gate.GATE.check = gate_check
    patches.add(_disarm)
    _patch_ssl(patches)


# -- name resolution --------------------------------------------------------------------------------


def _local_lookup(host: object) -> bool:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return isinstance(name, str) and resolution_is_local(name, socket.gethostname())


def _name_of(host: object) -> str | None:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return name if isinstance(name, str) and name and not is_ip(name) else None


def _forward_lookup(key: str, addresses: Callable[[Any], Iterable[object]]) -> Callable[..., object]:
    """The patch of the lookup ``key`` of a name: refused unless allowed; what an allowed name resolved to
    (``addresses`` of the result) is remembered, since the connect that follows only sees the IP."""

    def lookup(host: object, *args: object, **kwargs: object) -> object:
        name = _name_of(host)
        runs = guarding_runs() if name is not None else []
        if runs and not _local_lookup(name):
            check_address(None, (name, args[0] if args else kwargs.get("port")), key, runs)
        result = ORIGINALS[key](host, *args, **kwargs)
        if runs and name is not None:
            RUNS.remember_resolution(name, addresses(result), runs)
        return result

    return lookup


def _first(sockaddr: object) -> object:
    return sockaddr[0] if isinstance(sockaddr, tuple) and sockaddr else None


def _patched_gethostbyaddr(host: object) -> tuple[str, list[str], list[str]]:
    # A reverse lookup of an IP asks DNS too: checked like a connection to that IP.
    if isinstance(host, str | bytes) and not _local_lookup(host):
        check_address(None, (host, None), "gethostbyaddr")
    result: tuple[str, list[str], list[str]] = ORIGINALS["gethostbyaddr"](host)
    return result


def _patched_getnameinfo(sockaddr: object, flags: int) -> tuple[str, str]:
    numeric = getattr(socket, "NI_NUMERICHOST", 0)
    if (
        not (numeric and flags & numeric)
        and isinstance(sockaddr, tuple)
        and sockaddr
        and not _local_lookup(sockaddr[0])
    ):
        check_address(None, sockaddr, "getnameinfo")
    result: tuple[str, str] = ORIGINALS["getnameinfo"](sockaddr, flags)
    return result


_RESOLVERS: dict[str, Callable[..., object]] = {
    "getaddrinfo": _forward_lookup("getaddrinfo", lambda result: [_first(i[4]) for i in result if i[4]]),
    "gethostbyname": _forward_lookup("gethostbyname", lambda address: [address]),
    "gethostbyname_ex": _forward_lookup("gethostbyname_ex", lambda result: result[2]),
    "gethostbyaddr": _patched_gethostbyaddr,
    "getnameinfo": _patched_getnameinfo,
}


def patch_resolvers(patches: Patches, _module: object) -> None:
    for name, patched in _RESOLVERS.items():
        found = getattr(_socket, name)
        ORIGINALS[name] = original = genuine_function(found)
        patches.set(_socket, name, patched, original=original)
        # socket.getaddrinfo is a Python wrapper that calls _socket.getaddrinfo: patch only the bottom.
        if name != "getaddrinfo":
            other = getattr(socket, name)
            patches.set(socket, name, patched, original=original if other is found else genuine(other))
