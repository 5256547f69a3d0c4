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

from ..core.patching import Patches, genuine, genuine_function
from .checks import check_address
from .decision import is_ip, resolution_is_local
from .patches import ORIGINALS
from .runs import RUNS, GuardRun, guarding_runs


def _local_lookup(host: object) -> bool:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return isinstance(name, str) and resolution_is_local(name, socket.gethostname())


def _name_of(host: object) -> str | None:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return name if isinstance(name, str) and name and not is_ip(name) else None


def _guard_lookup(name: str | None, port: object, channel: str) -> list[GuardRun]:
    """Refuse looking ``name`` up unless allowed; returns the runs that should remember its addresses."""
    runs = guarding_runs() if name is not None else []
    if runs and not _local_lookup(name):
        check_address(None, (name, port), channel, runs)
    return runs


def _remember(name: str | None, addresses: Iterable[object], runs: list[GuardRun]) -> None:
    if runs and name is not None:
        RUNS.remember_resolution(name, addresses, runs)


def _patched_getaddrinfo(
    host: object, port: object, *args: object, **kwargs: object
) -> list[tuple[object, ...]]:
    name = _name_of(host)
    runs = _guard_lookup(name, port, "getaddrinfo")
    result: list[tuple[object, ...]] = ORIGINALS["getaddrinfo"](host, port, *args, **kwargs)
    # Remember what an allowed name resolved to: the connect that follows only sees the IP.
    _remember(name, [_first(info[4]) for info in result if info[4]], runs)
    return result


def _first(sockaddr: object) -> object:
    return sockaddr[0] if isinstance(sockaddr, tuple) and sockaddr else None


def _patched_gethostbyname(host: object) -> str:
    name = _name_of(host)
    runs = _guard_lookup(name, None, "gethostbyname")
    result: str = ORIGINALS["gethostbyname"](host)
    _remember(name, [result], runs)
    return result


def _patched_gethostbyname_ex(host: object) -> tuple[str, list[str], list[str]]:
    name = _name_of(host)
    runs = _guard_lookup(name, None, "gethostbyname_ex")
    result: tuple[str, list[str], list[str]] = ORIGINALS["gethostbyname_ex"](host)
    _remember(name, list(result[2]), runs)
    return result


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
    "getaddrinfo": _patched_getaddrinfo,
    "gethostbyname": _patched_gethostbyname,
    "gethostbyname_ex": _patched_gethostbyname_ex,
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
