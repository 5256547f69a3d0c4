"""The socket gate: pass-through trampolines on the socket type, installed when the plugin loads and kept,
so a method cached before the guard armed (``C = socket.socket.connect``) is still the guarded one.

In core, not the guard: loading the plugin must not import the guard (~25 ms for a session that never
replays). Replaced on the C type ``_socket.socket`` itself, so subclasses (ssl, asyncio) find them too.
"""

from __future__ import annotations

import _socket
import ctypes
import gc
import socket
from collections.abc import Callable
from typing import Any

from .patching import Library, Owner, Patches, genuine_function

# The guard's check: (call name, socket or None, the call's arguments, or for "_accept" its result).
# Raises to refuse. None: nothing guards, every call passes straight through.
Check = Callable[[str, object, tuple[object, ...]], None]


def set_type_attribute(cls: type, name: str, value: object) -> None:
    """``setattr`` that also reaches an immutable C type (``_socket.socket`` in CPython 3.11), through its
    mapping proxy, then invalidates the type's method cache as ``setattr`` on a mutable type does."""
    try:
        setattr(cls, name, value)
        return
    except TypeError:
        pass
    namespace = gc.get_referents(cls.__dict__)[0]
    if not isinstance(namespace, dict):
        raise TypeError(f"cannot patch {cls!r}.{name}")
    namespace[name] = value
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


class SocketGate(Owner):
    """The trampolines' owner and their check; process-wide (:data:`GATE`), as the socket type is."""

    def __init__(self) -> None:
        super().__init__(Library(_install))
        self.check: Check | None = None
        # The genuine functions the trampolines call ("connect", "sendall", "create_connection"...).
        self.originals: dict[str, Callable[..., Any]] = {}


def _gated(name: str) -> Callable[..., object]:
    """The trampoline of the socket method ``name``: the check of its arguments, then the genuine method."""

    def trampoline(self: socket.socket, *args: object, **kwargs: object) -> object:
        check = GATE.check
        if check is not None:
            check(name, self, args)
        return _ORIGINALS[name](self, *args, **kwargs)

    return trampoline


def _accept(self: _socket.socket) -> tuple[int, object]:
    accepted: tuple[int, object] = _ORIGINALS["_accept"](self)
    check = GATE.check
    if check is not None:
        check("_accept", self, accepted)
    return accepted


def _create_connection(address: object, *args: object, **kwargs: object) -> socket.socket:
    check = GATE.check
    if check is not None:
        check("create_connection", None, (address,))
    connection: socket.socket = _ORIGINALS["create_connection"](address, *args, **kwargs)
    return connection


_SOCKET_METHODS: dict[str, Callable[..., object]] = {
    **{name: _gated(name) for name in ("connect", "connect_ex", "send", "sendall", "sendto", "sendmsg")},
    "_accept": _accept,
}


def _install(patches: Patches, _module: object) -> None:
    c_type: type = _socket.socket
    try:
        for name, trampoline in _SOCKET_METHODS.items():
            if name in c_type.__dict__:
                original = genuine_function(c_type.__dict__[name])
                _ORIGINALS[name] = original
                patches.set(c_type, name, trampoline, original=original, set_attribute=set_type_attribute)
    except (TypeError, AttributeError, IndexError, ValueError, OSError):
        # Not CPython: the Python class gets them, and ``_socket`` hands out a subclass that has them
        # (socket.py itself calls _socket.socket.__init__, which the subclass inherits).
        patches.restore()
        for name, trampoline in _SOCKET_METHODS.items():
            if hasattr(c_type, name):
                _ORIGINALS[name] = getattr(c_type, name)
                patches.set(socket.socket, name, trampoline)
        raw = type("socket", (c_type,), {**_SOCKET_METHODS, "__module__": "_socket"})
        for attr in ("socket", "SocketType"):
            if getattr(_socket, attr, None) is c_type:
                patches.set(_socket, attr, raw)
    # Python-level: socket.sendfile (os.sendfile on the descriptor, no send call) and create_connection.
    for holder, name, trampoline in (
        (socket.socket, "sendfile", _gated("sendfile")),
        (socket, "create_connection", _create_connection),
    ):
        _ORIGINALS[name] = original = genuine_function(getattr(holder, name))
        patches.set(holder, name, trampoline, original=original)


GATE = SocketGate()
_ORIGINALS = GATE.originals


def uninstall() -> None:
    """Restore the genuine methods (a test taking the kept trampolines away)."""
    GATE.restore()
    GATE.check = None
