"""The socket gate: pass-through trampolines on the socket type, installed once when the plugin loads.

A method taken before the guard is installed (``C = socket.socket.connect`` at import, a library caching
``sock.sendall``) must still be the guarded one, so the socket methods are replaced as early as possible
(pytest's ``pytest_load_initial_conftests``, before any conftest or test module is imported) and stay
replaced. While no replay guards (:attr:`SocketGate.check` None) each trampoline costs one attribute read
and calls the genuine C method; the network guard (``guard/sockets.py``) arms the gate with its check.

Here, in core, rather than in the guard: loading the plugin must not import the guard (its import costs a
session that never replays ~25 ms); this module imports nothing of the package.

The methods are replaced on the C type ``_socket.socket`` itself (immutable in CPython 3.11: through its
type dictionary, :func:`set_type_attribute`), so ``socket.socket``, its subclasses (ssl, asyncio) and raw
``_socket.socket()`` objects all find them. Where that fails (not CPython) ``socket.socket`` gets them and
``_socket.socket`` names a subclass that has them.
"""

from __future__ import annotations

import _socket
import ctypes
import gc
import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

# The guard's check: (call name, socket or None, the call's arguments, or for "_accept" its result).
# Raises to refuse. None: nothing guards, every call passes straight through.
Check = Callable[[str, object, tuple[object, ...]], None]
Undo = Callable[[], None]

# Each replacement carries the function it replaced: a later install (by a second copy of the package
# that pytester re-imported) then finds the genuine function under it instead of taking a replacement for
# the original, which would make it call itself.
_ORIGINAL_ATTR = "__agentreplay_original__"


def genuine(value: object) -> object:
    for _ in range(16):
        under = getattr(value, _ORIGINAL_ATTR, None) if callable(value) else None
        if under is None:
            return value
        value = under
    return value


def genuine_function(value: object) -> Callable[..., Any]:
    found = genuine(value)
    if not callable(found):
        raise TypeError(f"cannot guard {value!r}: not callable")
    return found


def mark(patched: object, original: object) -> None:
    with suppress(AttributeError, TypeError):
        setattr(patched, _ORIGINAL_ATTR, original)


def set_type_attribute(cls: type, name: str, value: object) -> None:
    """``setattr`` that also reaches an immutable C type (``_socket.socket`` is one in CPython 3.11).

    The type's dict is reached through the mapping proxy and the type's method cache is invalidated
    afterwards, which is what ``setattr`` on a mutable type does.
    """
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


class SocketGate:
    """Whether the trampolines are in place (and for how long), and the check that guards them.

    Process-wide (:data:`GATE`): the socket type is shared by every thread and session of the process.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.check: Check | None = None
        # The genuine functions the trampolines call ("connect", "sendall", "create_connection"...).
        self.originals: dict[str, Callable[..., Any]] = {}
        self.undo: list[Undo] = []
        # Installed for the process's lifetime (the plugin's load), not only while a guard holds it.
        self.permanent = False

    def installed(self) -> bool:
        return bool(self.undo)


GATE = SocketGate()
_ORIGINALS = GATE.originals


# -- the trampolines -------------------------------------------------------------------------------


def _connect(self: _socket.socket, address: object) -> None:
    check = GATE.check
    if check is not None:
        check("connect", self, (address,))
    _ORIGINALS["connect"](self, address)


def _connect_ex(self: _socket.socket, address: object) -> int:
    check = GATE.check
    if check is not None:
        check("connect_ex", self, (address,))
    result: int = _ORIGINALS["connect_ex"](self, address)
    return result


def _send(self: _socket.socket, *args: object) -> int:
    check = GATE.check
    if check is not None:
        check("send", self, args)
    sent: int = _ORIGINALS["send"](self, *args)
    return sent


def _sendall(self: _socket.socket, *args: object) -> None:
    check = GATE.check
    if check is not None:
        check("sendall", self, args)
    _ORIGINALS["sendall"](self, *args)


def _sendto(self: _socket.socket, *args: object) -> int:
    check = GATE.check
    if check is not None:
        check("sendto", self, args)
    sent: int = _ORIGINALS["sendto"](self, *args)
    return sent


def _sendmsg(self: _socket.socket, *args: object) -> int:
    check = GATE.check
    if check is not None:
        check("sendmsg", self, args)
    sent: int = _ORIGINALS["sendmsg"](self, *args)
    return sent


def _accept(self: _socket.socket) -> tuple[int, object]:
    accepted: tuple[int, object] = _ORIGINALS["_accept"](self)
    check = GATE.check
    if check is not None:
        check("_accept", self, accepted)
    return accepted


def _sendfile(self: socket.socket, *args: object, **kwargs: object) -> int:
    check = GATE.check
    if check is not None:
        check("sendfile", self, args)
    sent: int = _ORIGINALS["sendfile"](self, *args, **kwargs)
    return sent


def _create_connection(address: object, *args: object, **kwargs: object) -> socket.socket:
    check = GATE.check
    if check is not None:
        check("create_connection", None, (address,))
    connection: socket.socket = _ORIGINALS["create_connection"](address, *args, **kwargs)
    return connection


_SOCKET_METHODS: dict[str, Callable[..., object]] = {
    "connect": _connect,
    "connect_ex": _connect_ex,
    "send": _send,
    "sendall": _sendall,
    "sendto": _sendto,
    "sendmsg": _sendmsg,
    "_accept": _accept,
}


class _Setter(Protocol):
    def __call__(self, cls: type, name: str, value: object) -> None: ...


def _restorer(
    set_attribute: Callable[[Any, str, object], None], target: object, name: str, value: object
) -> Undo:
    def restore() -> None:
        set_attribute(target, name, value)

    return restore


def _deleter(target: object, name: str) -> Undo:
    def restore() -> None:
        delattr(target, name)

    return restore


def _install(type_setter: _Setter) -> list[Undo]:
    undo: list[Undo] = []
    c_type: type = _socket.socket
    try:
        for name, trampoline in _SOCKET_METHODS.items():
            if name in c_type.__dict__:
                original = genuine_function(c_type.__dict__[name])
                _ORIGINALS[name] = original
                mark(trampoline, original)
                type_setter(c_type, name, trampoline)
                undo.append(_restorer(type_setter, c_type, name, original))
    except (TypeError, AttributeError, IndexError, ValueError, OSError):
        # Not CPython: the Python class gets them, and ``_socket`` hands out a subclass that has them
        # (socket.py itself calls _socket.socket.__init__, which the subclass inherits).
        for restore in reversed(undo):
            restore()
        undo = []
        for name, trampoline in _SOCKET_METHODS.items():
            if hasattr(c_type, name):
                _ORIGINALS[name] = getattr(c_type, name)
                setattr(socket.socket, name, trampoline)
                undo.append(_deleter(socket.socket, name))
        raw = type("socket", (c_type,), {**_SOCKET_METHODS, "__module__": "_socket"})
        for attr in ("socket", "SocketType"):
            if getattr(_socket, attr, None) is c_type:
                setattr(_socket, attr, raw)
                undo.append(_restorer(setattr, _socket, attr, c_type))
    # Python-level: socket.sendfile (os.sendfile on the descriptor, no send call) and create_connection.
    for holder, name, trampoline in (
        (socket.socket, "sendfile", _sendfile),
        (socket, "create_connection", _create_connection),
    ):
        previous = getattr(holder, name)
        _ORIGINALS[name] = original = genuine_function(previous)
        mark(trampoline, original)
        setattr(holder, name, trampoline)
        undo.append(_restorer(setattr, holder, name, original))
    return undo


def install(*, permanent: bool) -> bool:
    """Put the trampolines in place (once); ``permanent``: for the process's lifetime. Returns whether
    this call installed them (False: they were in place already)."""
    with GATE.lock:
        if GATE.undo:
            GATE.permanent = GATE.permanent or permanent
            return False
        GATE.undo = _install(set_type_attribute)
        GATE.permanent = permanent
        return True


def uninstall() -> None:
    """Restore the genuine methods (a temporary install, or a test taking the permanent one away)."""
    with GATE.lock:
        while GATE.undo:
            GATE.undo.pop()()
        GATE.permanent = False
        GATE.check = None


def release_temporary() -> None:
    """Remove trampolines a guard put in place, unless the plugin has since made them permanent."""
    if not GATE.permanent:
        uninstall()


def arm(check: Check | None) -> None:
    """Guard every gated call with ``check`` (None: pass them all through again)."""
    GATE.check = check
