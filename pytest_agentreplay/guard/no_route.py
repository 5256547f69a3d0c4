"""What the session's network namespace stopped: the kernel's count of sends that found no route.

In an isolated session (:mod:`.session_namespace`), native code and children the guard does not reach get
``ENETUNREACH``, which such code often swallows. The kernel counts each attempt in ``Ip: OutNoRoutes``
(``/proc/net/snmp``) and ``Ip6OutNoRoutes`` (``/proc/net/snmp6``); a guarded test reads them when its set-up
starts and at the end of each phase, and a difference fails it. The counters are the namespace's: under
pytest-xdist the workers share it, so a send may come from another worker's test.
"""

from __future__ import annotations

import os
from typing import Final, NamedTuple

from ..core.commands import record_command
from ..core.constants import NETNS_ENV_VAR
from ..exceptions import NetworkBlockedError

SNMP: Final = "/proc/net/snmp"
SNMP6: Final = "/proc/net/snmp6"


# A NamedTuple, not a frozen dataclass: as immutable, and far cheaper to create at start-up.
class NoRoutes(NamedTuple):
    """``Ip: OutNoRoutes`` and ``Ip6OutNoRoutes``: sends that found no route, by IP version."""

    ipv4: int = 0
    ipv6: int = 0

    def since(self, earlier: NoRoutes) -> NoRoutes:
        return NoRoutes(self.ipv4 - earlier.ipv4, self.ipv6 - earlier.ipv6)

    @property
    def total(self) -> int:
        return self.ipv4 + self.ipv6


def parse_snmp(text: str) -> int | None:
    """``OutNoRoutes`` of the ``Ip:`` lines of ``/proc/net/snmp`` (a header line, then a value line)."""
    lines = [line.split() for line in text.splitlines() if line.startswith("Ip:")]
    if len(lines) < 2 or len(lines[0]) != len(lines[1]) or "OutNoRoutes" not in lines[0]:
        return None
    value = lines[1][lines[0].index("OutNoRoutes")]
    return int(value) if value.isdigit() else None


def parse_snmp6(text: str) -> int | None:
    """``Ip6OutNoRoutes`` of ``/proc/net/snmp6`` (one ``name value`` pair a line)."""
    for words in map(str.split, text.splitlines()):
        if len(words) == 2 and words[0] == "Ip6OutNoRoutes" and words[1].isdigit():
            return int(words[1])
    return None


def read_text(path: str) -> str:
    """A file of /proc, or "" where it is missing (no /proc, no IPv6 in this kernel)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def read_no_routes() -> NoRoutes | None:
    """The namespace's counters now, or None where the kernel does not show them."""
    ipv4 = parse_snmp(read_text(SNMP))
    return None if ipv4 is None else NoRoutes(ipv4, parse_snmp6(read_text(SNMP6)) or 0)


def namespace_id() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def counting() -> bool:
    """Whether this process runs in the namespace an isolated session entered (its own or, for an xdist
    worker, its parent's): a send that found no route was then one the namespace stopped."""
    marker = os.environ.get(NETNS_ENV_VAR)
    return bool(marker) and marker == namespace_id()


def other_workers() -> int:
    """How many other xdist workers share the namespace's counters with this process (0 without xdist)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return 0
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    return max(int(count) - 1, 0) if count.isdigit() else 0


class NoRouteWatch:
    """The counters of one test: :meth:`take` says what was counted since the last call."""

    def __init__(self) -> None:
        self._last = read_no_routes()

    def take(self) -> NoRoutes | None:
        """What the kernel counted since the last call, or None (nothing, or no counters here)."""
        now = read_no_routes()
        if self._last is None or now is None:
            return None
        counted, self._last = now.since(self._last), now
        return counted if counted.total > 0 else None


def watch() -> NoRouteWatch | None:
    """A watch for a test starting now, or None where nothing is to be counted (no isolated session)."""
    return NoRouteWatch() if counting() else None


# -- the failure ---------------------------------------------------------------------------------------


def no_route_error(
    counted: NoRoutes,
    *,
    test: str | None,
    phase: str,
    cassette: str | None,
    mode: str | None,
    block_only: bool,
) -> NetworkBlockedError:
    """The failure of a test during whose ``phase`` the namespace stopped ``counted`` sends."""
    sends = counted.total
    what = "send" if sends == 1 else "sends"
    evidence = [
        f"the kernel counted {sends} {what} with no route during {phase}: "
        f"Ip OutNoRoutes +{counted.ipv4} ({SNMP}), Ip6OutNoRoutes +{counted.ipv6} ({SNMP6})",
        "the Python guard saw no such call: code below Python (ctypes, a C extension such as grpcio or "
        "uvloop) or a child process it does not reach (python -S, another interpreter, a program) bypassed "
        "it, and the session's network namespace stopped it: the code got ENETUNREACH, nothing left",
        "that code may have swallowed the error: the test fails for it all the same, so that a replay "
        "never passes on a path that needs the network",
        "the counters are the namespace's: a thread or child process of the session counts in the test "
        "that runs at the time",
    ]
    others = other_workers()
    if others:
        evidence.append(
            f"under pytest-xdist the namespace and its counters are shared with {others} other worker(s): "
            "the send may come from a test running at the same time on another worker (that test fails too)"
        )
    first = (
        "make the test a replaying test (add @pytest.mark.agentreplay) with the call made through an "
        "intercepted client or a @tool function, then record it: " + record_command(test, "missing")
        if block_only
        else "serve the call from a cassette: make it through an intercepted client (httpx, "
        "requests/urllib3, aiohttp) or inside a @tool function, then record it against the real services: "
        + record_command(test, "all")
    )
    fixes = [
        first,
        "or run that code outside replay: in a test that does not replay, or a session run with "
        "--agentreplay-isolate=off (where native code and unguarded children reach the network unchecked)",
        "allowing the host does not help: the namespace has loopback only, whatever allow_hosts says",
    ]
    return NetworkBlockedError(
        f"network access blocked by the session's network namespace during {phase}: "
        f"{sends} {what} found no route",
        evidence=evidence,
        cassette=cassette,
        mode=mode,
        place=f"test {test}" if test else None,
        fixes=fixes,
    )
