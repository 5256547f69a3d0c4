"""The guard's allow/refuse decision: pure functions of a destination and the guarding runs' allow lists.

Nothing here patches or reads process state; the patched calls (:mod:`.sockets`) ask :func:`decide` and
refuse through :mod:`.reports`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

LOCAL_FAMILIES = frozenset(
    getattr(socket, name) for name in ("AF_UNIX", "AF_NETLINK", "AF_ALG") if hasattr(socket, name)
)
IP_FAMILIES = frozenset(getattr(socket, name) for name in ("AF_INET", "AF_INET6") if hasattr(socket, name))


# A NamedTuple, not a frozen dataclass: as immutable, and far cheaper to create at start-up.
class Verdict(NamedTuple):
    allowed: bool
    # What the refusal names: "host:port", "host:port (resolved from name)" or the family and address.
    destination: str


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])  # without an IPv6 zone ("fe80::1%eth0")
    except ValueError:
        return None


def is_ip(host: str) -> bool:
    return _ip(host) is not None


def is_loopback(host: str) -> bool:
    local_name = host.lower() in ("localhost", "localhost.localdomain")
    return local_name or ((ip := _ip(host)) is not None and ip.is_loopback)


def allow_list_admits(host: str, allow_hosts: Iterable[object] | None) -> bool:
    """Whether ``host`` (as the client named it, not resolved) is on one run's ``allow_hosts`` list."""
    name = host.lower().strip("[]")
    for entry in allow_hosts or ():
        entry_l = str(entry).lower()
        if entry_l == name or (entry_l == "loopback" and is_loopback(name)):
            return True
        if entry_l.startswith("*.") and name.endswith(entry_l[1:]):
            return True
    return False


def resolution_is_local(name: str, hostname: str) -> bool:
    """Whether looking ``name`` up stays on this machine (loopback names and IPs, the machine's own name).

    Servers a test starts resolve these (``HTTPServer`` calls ``getfqdn``); connections are still checked.
    """
    name = name.lower().strip("[]").rstrip(".")
    return is_loopback(name) or name in ("", "0.0.0.0", "::") or name == hostname.lower()


def family_name(family: int | None) -> str:
    if family is None:
        return "unknown family"
    try:
        return socket.AddressFamily(family).name
    except ValueError:
        return f"address family {family}"


def decide(
    family: int | None,
    address: object,
    allow_lists: Sequence[Iterable[object]],
    *,
    permitted: Collection[str] = (),
    resolved: Mapping[str, str] | None = None,
) -> Verdict:
    """Whether a connection or datagram to ``address`` may leave, given the guarding runs' allow lists.

    ``family`` None means "an IP destination by name" (name resolution, ``create_connection``).
    ``address`` None means no destination (a send on a socket connected through the guard). ``permitted``
    are hosts the HTTP layer is sending to on purpose (a mode's live calls); ``resolved`` maps IPs back to
    the allowed names they were resolved from. No allow lists (no guarding run) allow everything; the
    families local to the machine always pass; any family but IP and those is refused.
    """
    if not allow_lists or address is None or family in LOCAL_FAMILIES:
        return Verdict(True, "")
    by_host = isinstance(address, tuple) and address and isinstance(address[0], str | bytes)
    if (family is None or family in IP_FAMILIES) and isinstance(address, tuple) and by_host:
        host_part: str | bytes = address[0]
        host = (host_part.decode("ascii", "replace") if isinstance(host_part, bytes) else host_part).lower()
        host = host.strip("[]")
        port = address[1] if len(address) > 1 else None
        resolved_from = (resolved or {}).get(host)
        names = [host] if resolved_from is None else [host, resolved_from]
        destination = f"{host}:{port}" + (f" (resolved from {resolved_from})" if resolved_from else "")
        allowed = any(
            name in permitted or any(allow_list_admits(name, a) for a in allow_lists) for name in names
        )
        return Verdict(allowed, destination)
    return Verdict(False, f"{family_name(family)} address {address!r}")
