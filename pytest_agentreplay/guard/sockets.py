"""Socket patches: ``connect``, ``connect_ex``, ``sendto``, ``sendmsg`` and ``create_connection``.

Every family and type is guarded. The methods are patched on the C type ``_socket.socket`` itself
(immutable in CPython 3.11, so through its type dictionary, see
:func:`~.patches.set_type_attribute`): ``socket.socket``, its subclasses (ssl, asyncio) and raw
``_socket.socket()`` objects are all covered. Where that fails (not CPython), ``socket.socket`` is patched
and ``_socket.socket`` names a guarded subclass. ``sendto`` and ``sendmsg`` are checked when they carry an
address (UDP datagrams, TCP Fast Open ``sendto(..., MSG_FASTOPEN, addr)``). ``AF_UNIX``, ``AF_NETLINK``
and ``AF_ALG`` (local to the machine) always pass; IP destinations are checked by host; any other family
(``AF_PACKET``, ``AF_VSOCK``, Bluetooth...) is refused (:func:`~.decision.decide`).
"""

from __future__ import annotations

import _socket
import socket
from collections.abc import Callable

from .checks import check_address
from .patches import PATCHES, Undo, deleter, genuine_function, mark, set_type_attribute, setter, type_setter


def _family_of(sock: _socket.socket) -> int | None:
    try:
        return int(sock.family)
    except (AttributeError, OSError, TypeError, ValueError):
        return None


def _patched_connect(self: _socket.socket, address: object) -> None:
    check_address(_family_of(self), address, "socket.connect")
    PATCHES.originals["connect"](self, address)


def _patched_connect_ex(self: _socket.socket, address: object) -> int:
    check_address(_family_of(self), address, "socket.connect_ex")
    result: int = PATCHES.originals["connect_ex"](self, address)
    return result


def _patched_sendto(self: _socket.socket, data: object, *args: object) -> int:
    # sendto(data, address) or sendto(data, flags, address); the C method validates the rest.
    if args:
        flags = args[0] if len(args) > 1 else 0
        channel = "socket.sendto" + (" (MSG_FASTOPEN)" if _fastopen(flags) else "")
        check_address(_family_of(self), args[-1], channel)
    sent: int = PATCHES.originals["sendto"](self, data, *args)
    return sent


def _patched_sendmsg(self: _socket.socket, buffers: object, *args: object) -> int:
    # sendmsg(buffers[, ancdata[, flags[, address]]]): only an address makes it leave on its own.
    if len(args) >= 3 and args[2] is not None:
        channel = "socket.sendmsg" + (" (MSG_FASTOPEN)" if _fastopen(args[1]) else "")
        check_address(_family_of(self), args[2], channel)
    sent: int = PATCHES.originals["sendmsg"](self, buffers, *args)
    return sent


def _fastopen(flags: object) -> bool:
    fastopen = getattr(socket, "MSG_FASTOPEN", 0)
    return isinstance(flags, int) and bool(fastopen) and bool(flags & fastopen)


def _patched_create_connection(address: object, *args: object, **kwargs: object) -> socket.socket:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        check_address(None, address, "socket.create_connection")
    connection: socket.socket = PATCHES.originals["create_connection"](address, *args, **kwargs)
    return connection


_SOCKET_METHODS: dict[str, Callable[..., object]] = {
    "connect": _patched_connect,
    "connect_ex": _patched_connect_ex,
    "sendto": _patched_sendto,
    "sendmsg": _patched_sendmsg,
}


def patch_sockets() -> list[Undo]:
    """Patch the socket methods and ``socket.create_connection``; returns how to undo it."""
    undo: list[Undo] = []
    c_type: type = _socket.socket
    try:
        # On the C type itself: socket.socket, ssl and asyncio sockets and raw _socket.socket() objects
        # all look their methods up there.
        for name, patched in _SOCKET_METHODS.items():
            if hasattr(c_type, name):
                PATCHES.originals[name] = genuine_function(c_type.__dict__[name])
                mark(patched, PATCHES.originals[name])
                set_type_attribute(c_type, name, patched)
                undo.append(type_setter(c_type, name, PATCHES.originals[name]))
    except (TypeError, AttributeError, IndexError, ValueError, OSError):
        # Not CPython: patch the Python class, and hand out a guarded subclass from ``_socket``
        # (socket.py itself calls _socket.socket.__init__, which the subclass inherits).
        for restore in reversed(undo):
            restore()
        undo = []
        for name, patched in _SOCKET_METHODS.items():
            if hasattr(socket.socket, name):
                PATCHES.originals[name] = getattr(c_type, name)
                setattr(socket.socket, name, patched)
                undo.append(deleter(socket.socket, name))
        raw = type("socket", (c_type,), {**_SOCKET_METHODS, "__module__": "_socket"})
        for attr in ("socket", "SocketType"):
            if getattr(_socket, attr, None) is c_type:
                setattr(_socket, attr, raw)
                undo.append(setter(_socket, attr, c_type))
    original = genuine_function(socket.create_connection)
    PATCHES.originals["create_connection"] = original
    mark(_patched_create_connection, original)
    socket.create_connection = _patched_create_connection
    undo.append(setter(socket, "create_connection", original))
    return undo
