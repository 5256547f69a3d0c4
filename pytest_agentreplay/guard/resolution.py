"""Name resolution patches: ``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex``, ``gethostbyaddr``
and ``getnameinfo``, in both ``socket`` and ``_socket``.

``getaddrinfo`` is patched at the ``_socket`` level, which ``socket.getaddrinfo`` and asyncio use.
Refusing at resolution names the host, not an IP, and leaks no DNS query. Lookups that stay on the machine
(loopback, the machine's own name) pass. What an allowed name resolved to is remembered per run
(:meth:`~.runs.GuardedRuns.remember_resolution`): the connect that follows only sees the IP.
"""

from __future__ import annotations

import _socket
import socket
from collections.abc import Callable, Iterable
from typing import Any

from ..core.patching import Patches, genuine, genuine_function
from .decision import is_ip, resolution_is_local
from .reports import check_address
from .runs import ORIGINALS, RUNS, guarding_runs


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
    """Patch the resolvers in ``_socket`` and ``socket``."""
    for name, patched in _RESOLVERS.items():
        ORIGINALS[name] = genuine_function(getattr(_socket, name))
        for module in (_socket, socket):
            # socket.getaddrinfo is a Python wrapper that calls _socket.getaddrinfo: patch only the bottom.
            if module is not socket or name != "getaddrinfo":
                patches.set(module, name, patched, original=genuine(getattr(module, name)))
