"""Fail-closed network guard: while a replay run is active, outbound connections are refused.

Patched at the socket layer so every client is covered, known or not: ``socket.socket.connect`` /
``connect_ex`` (asyncio's selector loops connect through them too), ``socket.create_connection`` and
``socket.getaddrinfo`` (refusing at name resolution names the host, not an IP, and leaks no DNS).

Which runs guard: every active replay-mode run of the process (the context variable's run, runs
registered with :func:`protect`, and the process-wide run list of :mod:`capture`), so a worker thread
that did not inherit the context is guarded too. A context whose own run is recording is not blocked.

Allowed destinations come from ``settings["allow_hosts"]``: hostnames matched as given (``localhost``
is allowed by name, not by what it resolves to; IPs resolved from an allowed name are remembered),
IP literals, ``*.suffix`` wildcards, and ``loopback``. AF_UNIX sockets are always allowed. The HTTP
layer lets its own deliberate live calls through with :func:`permitting`.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..exceptions import NetworkBlockedError

if TYPE_CHECKING:
    from ..capture import RunContext

_LOCK = threading.RLock()
_REFS = 0
_ORIGINALS: dict[str, Any] = {}
_PROTECTED: list[RunContext] = []
# Hosts the HTTP layer is deliberately sending to right now (live calls a mode allows).
_PERMITTED: dict[str, int] = {}
# IP -> the allowed hostname it was resolved from (so a later connect to the IP is recognised).
_RESOLVED: dict[str, str] = {}


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def guarding_runs() -> list[RunContext]:
    """The replay runs that currently forbid unallowed connections from this thread/task."""
    from .. import capture

    current = capture.current_run()
    if current is not None and current.recording:
        return []
    runs: list[RunContext] = []
    if current is not None:
        runs.append(current)
    with _LOCK:
        runs.extend(r for r in _PROTECTED if r not in runs)
    # The process-wide list of active runs (capture keeps it for context-less threads).
    runs.extend(r for r in capture.active_runs() if r not in runs)
    return [r for r in runs if not r.recording]


def allow_list_admits(host: str, allow_hosts: Any) -> bool:
    """Whether ``host`` (as the client named it, not resolved) is on one run's ``allow_hosts`` list."""
    name = host.lower().strip("[]")
    for entry in allow_hosts or ():
        entry_l = str(entry).lower()
        if entry_l == name or (entry_l == "loopback" and (name == "localhost" or _is_loopback(name))):
            return True
        if entry_l.startswith("*.") and name.endswith(entry_l[1:]):
            return True
    return False


def _host_allowed(host: str, runs: list[RunContext]) -> bool:
    host_l = host.lower().strip("[]")
    with _LOCK:
        if _PERMITTED.get(host_l):
            return True
        resolved_from = _RESOLVED.get(host_l)
    names = [host_l] if resolved_from is None else [host_l, resolved_from]
    for run in runs:
        for entry in run.settings.get("allow_hosts") or ():
            entry_l = str(entry).lower()
            for name in names:
                if entry_l == name:
                    return True
                if entry_l == "loopback" and _is_loopback(name):
                    return True
                if entry_l.startswith("*.") and name.endswith(entry_l[1:]):
                    return True
    if resolved_from is not None:
        with _LOCK:
            return bool(_PERMITTED.get(resolved_from))
    return False


def check(host: str, port: Any, runs: list[RunContext] | None = None) -> None:
    """Raise :class:`NetworkBlockedError` if a connection to ``host:port`` is not allowed now."""
    runs = guarding_runs() if runs is None else runs
    if not runs or _host_allowed(host, runs):
        return
    with _LOCK:
        resolved_from = _RESOLVED.get(host.lower())
    dest = f"{host}:{port}" + (f" (resolved from {resolved_from})" if resolved_from else "")
    run = runs[0]
    error = NetworkBlockedError(
        f"network access blocked during replay: {dest}",
        evidence=[
            f"destination: {dest}",
            f"thread: {threading.current_thread().name}",
            "replay is fail-closed: only the cassette answers outbound calls",
        ],
        cassette=run.cassette,
        mode=run.mode,
        fixes=[
            "if the call is new, record it against the real services: pytest --agentreplay-record=all <test>",
            f'if it is a local test service, allow it: allow_hosts = ["{host}"] (or "loopback") '
            "in [tool.agentreplay] or on the agentreplay marker",
            "send it through an intercepted client (httpx, httpx2, requests/urllib3, aiohttp) so the "
            "cassette can serve it",
        ],
    )
    # The agent may swallow the error (retries, broad excepts): the test must still fail.
    for r in runs:
        r.failures.append(error)
    raise error


@contextmanager
def permitting(host: str) -> Iterator[None]:
    """Let the HTTP layer's own live call to ``host`` through (a mode that sends it on purpose)."""
    key = host.lower()
    with _LOCK:
        _PERMITTED[key] = _PERMITTED.get(key, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            left = _PERMITTED[key] - 1
            if left:
                _PERMITTED[key] = left
            else:
                del _PERMITTED[key]


def _address_host(sock: Any, address: Any) -> tuple[str, Any] | None:
    family = getattr(sock, "family", None)
    if getattr(socket, "AF_UNIX", None) is not None and family == socket.AF_UNIX:
        return None
    if isinstance(address, tuple) and address and isinstance(address[0], str | bytes):
        host = address[0].decode() if isinstance(address[0], bytes) else address[0]
        return host, address[1] if len(address) > 1 else None
    return None


def _patched_connect(self: socket.socket, address: Any) -> None:
    dest = _address_host(self, address)
    if dest is not None:
        check(*dest)
    _ORIGINALS["connect"](self, address)


def _patched_connect_ex(self: socket.socket, address: Any) -> int:
    dest = _address_host(self, address)
    if dest is not None:
        check(*dest)
    result: int = _ORIGINALS["connect_ex"](self, address)
    return result


def _patched_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        check(address[0], address[1] if len(address) > 1 else None)
    sock: socket.socket = _ORIGINALS["create_connection"](address, *args, **kwargs)
    return sock


def _patched_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    runs = guarding_runs() if isinstance(name, str) and name and not _is_ip(name) else []
    if runs:
        check(name, port, runs)
    result = _ORIGINALS["getaddrinfo"](host, port, *args, **kwargs)
    if runs and isinstance(name, str):
        # Remember what an allowed name resolved to: the connect that follows only sees the IP.
        with _LOCK:
            for info in result:
                sockaddr = info[4]
                if sockaddr and isinstance(sockaddr[0], str):
                    _RESOLVED[sockaddr[0].lower()] = name.lower()
    return result


def install() -> Callable[[], None]:
    """Patch the socket layer (reference-counted); returns the matching uninstall callable."""
    global _REFS
    with _LOCK:
        _REFS += 1
        if _REFS == 1:
            _ORIGINALS["connect"] = socket.socket.connect
            _ORIGINALS["connect_ex"] = socket.socket.connect_ex
            _ORIGINALS["create_connection"] = socket.create_connection
            _ORIGINALS["getaddrinfo"] = socket.getaddrinfo
            socket.socket.connect = _patched_connect  # type: ignore[method-assign,assignment]
            socket.socket.connect_ex = _patched_connect_ex  # type: ignore[method-assign,assignment]
            socket.create_connection = _patched_create_connection
            socket.getaddrinfo = _patched_getaddrinfo
    return _once(_uninstall)


def _uninstall() -> None:
    global _REFS
    with _LOCK:
        _REFS -= 1
        if _REFS == 0:
            socket.socket.connect = _ORIGINALS.pop("connect")  # type: ignore[method-assign]
            socket.socket.connect_ex = _ORIGINALS.pop("connect_ex")  # type: ignore[method-assign]
            socket.create_connection = _ORIGINALS.pop("create_connection")
            socket.getaddrinfo = _ORIGINALS.pop("getaddrinfo")
            _RESOLVED.clear()


def installed() -> bool:
    return _REFS > 0


def protect(ctx: RunContext) -> Callable[[], None]:
    """Guard for ``ctx`` from every thread of the process, whatever context the thread has."""
    with _LOCK:
        _PROTECTED.append(ctx)

    def release() -> None:
        with _LOCK:
            if ctx in _PROTECTED:
                _PROTECTED.remove(ctx)

    return _once(release)


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    done = threading.Event()
    lock = threading.Lock()

    def call() -> None:
        with lock:
            if done.is_set():
                return
            done.set()
        fn()

    return call
