"""Fail-closed network guard: while a replay run is active, nothing leaves the process unless allowed.

What is guarded (while installed; :func:`install` is reference-counted):

- sockets, every family and type: ``connect``, ``connect_ex``, ``sendto`` and ``sendmsg`` with an address
  (UDP datagrams, TCP Fast Open ``sendto(..., MSG_FASTOPEN, addr)``). They are patched on the C type
  ``_socket.socket`` itself (immutable in CPython 3.11, so through its type dictionary, see
  :func:`_set_type_attribute`): ``socket.socket``, its subclasses (ssl, asyncio) and raw
  ``_socket.socket()`` objects are all covered. Where that fails (not CPython), ``socket.socket`` is
  patched and ``_socket.socket`` names a guarded subclass. ``AF_UNIX``, ``AF_NETLINK`` and
  ``AF_ALG`` (local to the machine) always pass; IP destinations are checked by host; any other family
  (``AF_PACKET``, ``AF_VSOCK``, Bluetooth...) is refused.
- name resolution: ``getaddrinfo`` (at the ``_socket`` level, which ``socket.getaddrinfo`` and asyncio
  use), ``gethostbyname``, ``gethostbyname_ex``, ``gethostbyaddr`` and ``getnameinfo`` in both ``socket``
  and ``_socket``. Refusing at resolution names the host, not an IP, and leaks no DNS query.
- threads: a thread started while a replay run guards remembers that run; after the run ends the thread
  stays guarded by it, and a refusal there is kept for :func:`stray_refusals` naming the test.
- child processes: every spawn path (``subprocess``, ``os.posix_spawn*``, ``os.exec*``, ``os.system``,
  ``multiprocessing`` spawn and forkserver) passes the active runs to the child in the environment
  variable :data:`ENV_VAR`; the ``.pth`` start-up hook shipped with the package
  (:mod:`.childguard`) installs this guard in a Python child that sees it. Forked children inherit the
  guard in memory. A child's refusals are appended to files in a report directory; the parent reads them
  when the run finishes (:func:`collect_child_refusals`). With ``isolate_subprocesses`` (Linux), children
  run in a new, empty network namespace, which also covers programs that are not Python (curl).

Which runs guard: every active replay-mode run of the process (the context variable's run, runs
registered with :func:`protect`, the process-wide run list of :mod:`capture`), the runs a thread was
started under, and in a child process the runs of its parent. A context whose own run is recording
(``mode="record"``) is not blocked; a production ``capture`` run never lowers the guard.

The allow/refuse decision itself is the pure function :func:`decide`; the rest is patching.
"""

from __future__ import annotations

import atexit
import importlib
import ipaddress
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.after_import import AfterImport
from ..core.run_settings import RunSettings
from ..core.run_state import GuardState
from ..exceptions import ConfigError, NetworkBlockedError
from .refusal import BLOCK_ONLY, child_refusal, refusal

if TYPE_CHECKING:
    from ..core.capture import RunContext

ENV_VAR = "PYTEST_AGENTREPLAY_GUARD"
ISOLATE_SETTING = "isolate_subprocesses"

_THREAD_RUNS_ATTR = "_agentreplay_guard_runs"

_LOCAL_FAMILIES = frozenset(
    getattr(socket, name) for name in ("AF_UNIX", "AF_NETLINK", "AF_ALG") if hasattr(socket, name)
)
_IP_FAMILIES = frozenset(getattr(socket, name) for name in ("AF_INET", "AF_INET6") if hasattr(socket, name))


# -- state -----------------------------------------------------------------------------------------
#
# The guard's state is process-wide by nature: it patches the socket type, the resolvers, ``Thread.start``
# and the spawn functions, which every thread and every session of the process share, and a patched call
# in any thread must find it. Hence one instance of each owner per process (per copy of this module).
# Nested installs (pytester's inner sessions, ``capture_run`` inside a replaying test) share them through
# the reference count. A copy of this module that pytester re-imported gets owners of its own and patches
# over what a stale copy left installed: each patch carries the function it replaced (:func:`_genuine`),
# so the new copy's patches call the genuine functions and its uninstall restores them.


class GuardPatches:
    """The installed patches: how many installs hold them, what they replaced, how to undo them.

    Process-wide (:data:`_PATCHES`): a monkeypatch of the socket type or of ``threading.Thread`` reaches
    every thread of the process; the reference count lets nested sessions share one installation.
    """

    def __init__(self) -> None:
        # Re-entrant: a patched call (a thread start, a fork's at-fork hook) may run while it is held.
        self.lock = threading.RLock()
        self.refs = 0
        self.patched = False
        # What each patch calls through to ("connect", "getaddrinfo", "thread_start", "execve"...).
        self.originals: dict[str, Any] = {}
        self.undo: list[Callable[[], None]] = []
        # os.system hands the runs over through os.environ, which every thread shares: one swap at a time.
        self.system_lock = threading.Lock()

    def install(self) -> None:
        with self.lock:
            self.refs += 1
            if self.patched:
                return
            try:
                self.undo.extend(_patch_sockets())
                self.originals["thread_start"] = _genuine(threading.Thread.start)
                _mark(_patched_thread_start, self.originals["thread_start"])
                threading.Thread.start = _patched_thread_start  # type: ignore[method-assign]
                self.undo.append(lambda: setattr(threading.Thread, "start", self.originals["thread_start"]))
                self.undo.extend(_patch_children())
            except BaseException:
                self.refs -= 1
                self.unpatch()
                raise
            self.patched = True

    def unpatch(self) -> None:
        while self.undo:
            self.undo.pop()()
        self.patched = False

    def release(self) -> None:
        with self.lock:
            self.refs -= 1
        # A thread a replaying test started may still run: the patches then stay until it has ended.
        self.settle()

    def settle(self) -> None:
        """Remove the patches once nothing needs them: no install left and no guarded thread alive."""
        with self.lock:
            if self.patched and self.refs == 0 and not _stray_threads_alive():
                self.unpatch()

    def installed(self) -> bool:
        return self.refs > 0


class GuardedRuns:
    """Whom the guard protects beyond the context's run: runs registered from any thread, the parent's
    runs in a child process, and the hosts the HTTP layer is sending to on purpose right now.

    Process-wide (:data:`_RUNS`): the patched socket calls consult it from whatever thread makes them.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Runs registered with :func:`protect`: guarded from every thread, whatever its context.
        self.protected: list[Any] = []
        # In a child process: the parent's runs (from ENV_VAR or a multiprocessing hand-over).
        self.parents: list[ParentRun] = []
        # Host -> how many live calls the HTTP layer is making to it (the calls a mode sends on purpose).
        self.permitted: dict[str, int] = {}

    def registered(self) -> list[Any]:
        with self.lock:
            return [*self.protected, *self.parents]

    def is_protected(self, run: Any) -> bool:
        with self.lock:
            return run in self.protected

    def protect(self, ctx: Any) -> Callable[[], None]:
        with self.lock:
            self.protected.append(ctx)

        def release() -> None:
            with self.lock:
                if ctx in self.protected:
                    self.protected.remove(ctx)

        return release

    def adopt(self, parents: list[ParentRun]) -> None:
        with self.lock:
            self.parents[:] = parents

    def permit(self, host: str) -> None:
        with self.lock:
            self.permitted[host] = self.permitted.get(host, 0) + 1

    def unpermit(self, host: str) -> None:
        with self.lock:
            left = self.permitted[host] - 1
            if left:
                self.permitted[host] = left
            else:
                del self.permitted[host]

    def allowances(self, runs: list[Any]) -> tuple[list[str], dict[str, str]]:
        """The hosts permitted now, and the IP -> allowed name resolutions ``runs`` remember."""
        with self.lock:
            permitted = [h for h, n in self.permitted.items() if n]
            resolved: dict[str, str] = {}
            for run in runs:
                resolved.update(run.guard.resolved)
        return permitted, resolved

    def remember_resolution(self, name: str, addresses: Any, runs: list[Any]) -> None:
        with self.lock:
            for run in runs:
                memory = run.guard.resolved
                for address in addresses:
                    if isinstance(address, str):
                        memory[address.lower()] = name.lower()


class RefusalReports:
    """Refusals the session has not collected yet: those made for tests that had already ended (stray
    threads), and the directory where child processes append theirs.

    Process-wide (:data:`_REPORTS`) rather than the session's: a stray thread refuses long after its test,
    from no context the session could hand it, and a child finds the directory through the environment.
    The session drains it when it finishes (:func:`stray_refusals`); the directory lives as long as the
    process that created it.
    """

    def __init__(self) -> None:
        # Re-entrant like the others: the at-fork hook creates the directory in whatever thread forks.
        self.lock = threading.RLock()
        self.strays: list[str] = []
        self.directory: str | None = None
        # The process that owns the in-memory runs; a forked child has another pid and reports to it.
        self.home_pid = os.getpid()

    def in_child(self) -> bool:
        return os.getpid() != self.home_pid

    def add_stray(self, message: str) -> None:
        with self.lock:
            self.strays.append(message)

    def take_strays(self) -> list[str]:
        with self.lock:
            taken = self.strays[:]
            self.strays.clear()
        return taken

    def adopt(self, directory: str | None) -> None:
        with self.lock:
            self.directory = directory

    def ensure_directory(self) -> str:
        with self.lock:
            if self.directory is None or not os.path.isdir(self.directory):
                self.directory = tempfile.mkdtemp(prefix="agentreplay-guard-")
                atexit.register(_remove_report_dir, self.directory, os.getpid())
            return self.directory


class NamespaceProbe:
    """Whether this machine can start a child in a new, empty network namespace: probed once, by forking.

    Process-wide (:data:`_NAMESPACES`): the answer depends on the kernel and the process's privileges only.
    """

    def __init__(self) -> None:
        self.probed = False
        # The ``unshare`` flags that work here, or None when none does.
        self.flags: int | None = None
        self._unshare: Callable[[int], Any] | None = None

    def unshare_flags(self) -> int | None:
        if self.probed:
            return self.flags
        result: int | None = None
        if sys.platform.startswith("linux") and hasattr(os, "fork"):
            self.unshare(0)
            for flags in (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET):
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the probe child
                    os._exit(0 if self.unshare(flags) == 0 else 1)
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) == 0:
                    result = flags
                    break
        self.flags = result
        self.probed = True
        return result

    def unshare(self, flags: int) -> int:
        # Looked up in the parent: a dlopen in a child forked from a threaded process can deadlock.
        call = self._unshare
        if call is None:
            import ctypes

            call = self._unshare = ctypes.CDLL(None, use_errno=True).unshare
        return int(call(flags))


_PATCHES = GuardPatches()
_RUNS = GuardedRuns()
_REPORTS = RefusalReports()
_NAMESPACES = NamespaceProbe()


# -- the decision (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    # What the refusal names: "host:port", "host:port (resolved from name)" or the family and address.
    destination: str
    reason: str


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


def allow_list_admits(host: str, allow_hosts: Any) -> bool:
    """Whether ``host`` (as the client named it, not resolved) is on one run's ``allow_hosts`` list."""
    name = host.lower().strip("[]")
    for entry in allow_hosts or ():
        entry_l = str(entry).lower()
        if entry_l == name or (entry_l == "loopback" and _is_loopback(name)):
            return True
        if entry_l.startswith("*.") and name.endswith(entry_l[1:]):
            return True
    return False


def _family_name(family: int | None) -> str:
    if family is None:
        return "unknown family"
    try:
        return socket.AddressFamily(family).name
    except ValueError:
        return f"address family {family}"


def decide(
    family: int | None,
    address: Any,
    allow_lists: Sequence[Any],
    *,
    permitted: Collection[str] = (),
    resolved: Mapping[str, str] | None = None,
) -> Verdict:
    """Whether a connection or datagram to ``address`` may leave, given the guarding runs' allow lists.

    ``family`` None means "an IP destination by name" (name resolution, ``create_connection``).
    ``address`` None means no destination (a send on an already connected socket). ``permitted`` are
    hosts the HTTP layer is sending to on purpose; ``resolved`` maps IPs back to the allowed names they
    were resolved from. No allow lists at all (no guarding run) allows everything.
    """
    if not allow_lists:
        return Verdict(True, "", "no replay run guards this call")
    if address is None:
        return Verdict(True, "", "no destination: the socket was connected through the guard")
    if family in _LOCAL_FAMILIES:
        return Verdict(True, "", f"{_family_name(family)} stays on this machine")
    host_part = address[0] if isinstance(address, tuple) and address else None
    if (family is None or family in _IP_FAMILIES) and isinstance(host_part, str | bytes):
        host = (host_part.decode("ascii", "replace") if isinstance(host_part, bytes) else host_part).lower()
        host = host.strip("[]")
        port = address[1] if len(address) > 1 else None
        resolved_from = (resolved or {}).get(host)
        names = [host] if resolved_from is None else [host, resolved_from]
        destination = f"{host}:{port}" + (f" (resolved from {resolved_from})" if resolved_from else "")
        if any(name in permitted for name in names):
            return Verdict(True, destination, "the replay mode sends this call on purpose")
        for allow in allow_lists:
            if any(allow_list_admits(name, allow) for name in names):
                return Verdict(True, destination, "on allow_hosts")
        return Verdict(False, destination, "not on allow_hosts")
    return Verdict(False, f"{_family_name(family)} address {address!r}", "not an IP or local socket family")


# -- which runs guard ------------------------------------------------------------------------------


class ParentRun:
    """In a child process: the parent's replay run, as far as the guard needs it."""

    recording = False

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.token = str(data.get("token") or "")
        self.cassette: str | None = data.get("cassette")
        self.mode = str(data.get("mode") or "regression")
        nodeid = data.get("test")
        self.settings = RunSettings(
            allow_hosts=tuple(str(h) for h in data.get("allow_hosts") or ()),
            nodeid=nodeid if isinstance(nodeid, str) else None,
            isolate_subprocesses=bool(data.get(ISOLATE_SETTING)),
            block_network_only=bool(data.get(BLOCK_ONLY)),
        )
        self.failures: list[BaseException] = []
        self.guard = GuardState(token=self.token)


def _active_runs() -> list[Any]:
    # Not imported: a child process that only runs the guard never loads the recorder.
    capture = sys.modules.get("pytest_agentreplay.core.capture")
    return list(capture.active_runs()) if capture is not None else []


def guarding_runs() -> list[RunContext]:
    """The replay runs that currently forbid unallowed connections from this thread/task."""
    capture = sys.modules.get("pytest_agentreplay.core.capture")
    runs: list[Any] = []
    if capture is not None:
        current = capture.current_run()
        # A recording test talks to the real world; a production capture (mode "capture") does not lower
        # the guard of replay runs around it.
        if current is not None and current.mode == "record":
            return []
        if current is not None:
            runs.append(current)
        runs.extend(r for r in capture.active_runs() if r not in runs)
    runs.extend(r for r in _RUNS.registered() if r not in runs)
    born = getattr(threading.current_thread(), _THREAD_RUNS_ATTR, ())
    runs.extend(r for r in born if r not in runs)
    return [r for r in runs if not r.recording]


def _ended(run: Any) -> bool:
    if isinstance(run, ParentRun) or _RUNS.is_protected(run):
        return False
    return run not in _active_runs()


def _token(run: Any) -> str:
    state: GuardState = run.guard
    if state.token is None:
        state.token = uuid.uuid4().hex
    return state.token


# -- refusing --------------------------------------------------------------------------------------


def check(host: str, port: Any, runs: list[RunContext] | None = None, *, channel: str = "connect") -> None:
    """Raise :class:`NetworkBlockedError` if a connection to ``host:port`` is not allowed now."""
    _check(None, (host, port), channel, runs)


def _check(family: int | None, address: Any, channel: str, runs: list[Any] | None = None) -> None:
    runs = guarding_runs() if runs is None else runs
    if not runs:
        return
    permitted, resolved = _RUNS.allowances(runs)
    verdict = decide(
        family,
        address,
        [r.settings.allow_hosts for r in runs],
        permitted=permitted,
        resolved=resolved,
    )
    if not verdict.allowed:
        _refuse(verdict, channel, runs)


def _refuse(verdict: Verdict, channel: str, runs: list[Any]) -> None:
    run = runs[0]
    thread = threading.current_thread()
    in_child = _REPORTS.in_child() or isinstance(run, ParentRun)
    error = refusal(
        run, verdict.destination, channel, thread=thread.name, child_pid=os.getpid() if in_child else None
    )
    # The agent may swallow the error (retries, broad excepts): the test must still fail.
    for r in runs:
        r.failures.append(error)
    if _REPORTS.in_child() or any(isinstance(r, ParentRun) for r in runs):
        _report_to_parent(error, runs)
    else:
        for r in runs:
            if _ended(r):
                test = r.settings.nodeid or r.cassette or "a replaying test"
                _REPORTS.add_stray(
                    f"{test}: thread {thread.name!r} it started made a network call after the test "
                    f"ended ({channel} to {verdict.destination}); it was refused"
                )
    raise error


def _report_to_parent(error: NetworkBlockedError, runs: list[Any]) -> None:
    directory = _REPORTS.directory
    if directory is None:
        return
    for r in runs:
        line = json.dumps(
            {
                "token": _token(r),
                "test": r.settings.nodeid,
                "pid": os.getpid(),
                "headline": error.headline,
                "evidence": list(error.evidence),
            }
        )
        try:
            fd = os.open(
                os.path.join(directory, f"{_token(r)}.{os.getpid()}.jsonl"),
                os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                0o600,
            )
            try:
                # One write of one line: appends from several children never interleave.
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass


def _read_reports(pattern: str) -> list[dict[str, Any]]:
    directory = _REPORTS.directory
    if directory is None or not os.path.isdir(directory):
        return []
    entries: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob(pattern)):
        taken = path.with_name(path.name + ".read")
        try:
            # Renamed first: a child still writing opens a fresh file, read later as a stray.
            path.rename(taken)
            text = taken.read_text("utf-8", "replace")
            taken.unlink()
        except OSError:
            continue
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def collect_child_refusals(ctx: Any) -> list[NetworkBlockedError]:
    """The refusals child processes of ``ctx`` reported so far (each once); call when the run finishes."""
    token = ctx.guard.token
    if token is None:
        return []
    return [child_refusal(entry, ctx) for entry in _read_reports(f"{token}.*.jsonl")]


def stray_refusals() -> list[str]:
    """Refusals made on behalf of tests that had already ended, since the last call (then forgotten).

    Threads a replaying test started that called out after it ended, and child processes whose refusal
    arrived after their test finished. Each message starts with the test's node id. The session controller
    fails the session when this is not empty.
    """
    messages = [
        f"{e.get('test') or 'a replaying test'}: its child process {e.get('pid')} made a network call "
        f"after the test ended ({e.get('headline')}); it was refused"
        for e in _read_reports("*.jsonl")
    ]
    messages = _REPORTS.take_strays() + messages
    _PATCHES.settle()
    return messages


@contextmanager
def permitting(host: str) -> Iterator[None]:
    """Let the HTTP layer's own live call to ``host`` through (a mode that sends it on purpose)."""
    key = host.lower()
    _RUNS.permit(key)
    try:
        yield
    finally:
        _RUNS.unpermit(key)


# -- socket patches --------------------------------------------------------------------------------


def _family_of(sock: Any) -> int | None:
    try:
        return int(sock.family)
    except (AttributeError, OSError, TypeError, ValueError):
        return None


def _patched_connect(self: Any, address: Any) -> Any:
    _check(_family_of(self), address, "socket.connect")
    return _PATCHES.originals["connect"](self, address)


def _patched_connect_ex(self: Any, address: Any) -> Any:
    _check(_family_of(self), address, "socket.connect_ex")
    return _PATCHES.originals["connect_ex"](self, address)


def _patched_sendto(self: Any, data: Any, *args: Any) -> Any:
    # sendto(data, address) or sendto(data, flags, address); the C method validates the rest.
    if args:
        flags = args[0] if len(args) > 1 else 0
        channel = "socket.sendto" + (" (MSG_FASTOPEN)" if _fastopen(flags) else "")
        _check(_family_of(self), args[-1], channel)
    return _PATCHES.originals["sendto"](self, data, *args)


def _patched_sendmsg(self: Any, buffers: Any, *args: Any) -> Any:
    # sendmsg(buffers[, ancdata[, flags[, address]]]): only an address makes it leave on its own.
    if len(args) >= 3 and args[2] is not None:
        channel = "socket.sendmsg" + (" (MSG_FASTOPEN)" if _fastopen(args[1]) else "")
        _check(_family_of(self), args[2], channel)
    return _PATCHES.originals["sendmsg"](self, buffers, *args)


def _fastopen(flags: Any) -> bool:
    fastopen = getattr(socket, "MSG_FASTOPEN", 0)
    return isinstance(flags, int) and bool(fastopen) and bool(flags & fastopen)


def _patched_create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        _check(None, address, "socket.create_connection")
    return _PATCHES.originals["create_connection"](address, *args, **kwargs)


def _remember_resolution(name: str, addresses: Any, runs: list[Any]) -> None:
    _RUNS.remember_resolution(name, addresses, runs)


def resolution_is_local(name: str, hostname: str) -> bool:
    """Whether looking ``name`` up stays on this machine (loopback names and IPs, the machine's own name).

    Servers a test starts resolve these (``HTTPServer`` calls ``getfqdn``); connections are still checked.
    """
    name = name.lower().strip("[]").rstrip(".")
    return _is_loopback(name) or name in ("", "0.0.0.0", "::") or name == hostname.lower()


def _local_lookup(host: Any) -> bool:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return isinstance(name, str) and resolution_is_local(name, socket.gethostname())


def _name_of(host: Any) -> str | None:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    return name if isinstance(name, str) and name and not _is_ip(name) else None


def _patched_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = _name_of(host)
    runs = guarding_runs() if name is not None else []
    if runs and not _local_lookup(name):
        _check(None, (name, port), "getaddrinfo", runs)
    result = _PATCHES.originals["getaddrinfo"](host, port, *args, **kwargs)
    if runs and name is not None:
        # Remember what an allowed name resolved to: the connect that follows only sees the IP.
        _remember_resolution(name, [info[4][0] for info in result if info[4]], runs)
    return result


def _patched_gethostbyname(host: Any) -> Any:
    name = _name_of(host)
    runs = guarding_runs() if name is not None else []
    if runs and not _local_lookup(name):
        _check(None, (name, None), "gethostbyname", runs)
    result = _PATCHES.originals["gethostbyname"](host)
    if runs and name is not None:
        _remember_resolution(name, [result], runs)
    return result


def _patched_gethostbyname_ex(host: Any) -> Any:
    name = _name_of(host)
    runs = guarding_runs() if name is not None else []
    if runs and not _local_lookup(name):
        _check(None, (name, None), "gethostbyname_ex", runs)
    result = _PATCHES.originals["gethostbyname_ex"](host)
    if runs and name is not None:
        _remember_resolution(name, list(result[2]), runs)
    return result


def _patched_gethostbyaddr(host: Any) -> Any:
    # A reverse lookup of an IP asks DNS too: checked like a connection to that IP.
    if isinstance(host, str | bytes) and not _local_lookup(host):
        _check(None, (host, None), "gethostbyaddr")
    return _PATCHES.originals["gethostbyaddr"](host)


def _patched_getnameinfo(sockaddr: Any, flags: int) -> Any:
    numeric = getattr(socket, "NI_NUMERICHOST", 0)
    if (
        not (numeric and flags & numeric)
        and isinstance(sockaddr, tuple)
        and sockaddr
        and not _local_lookup(sockaddr[0])
    ):
        _check(None, sockaddr, "getnameinfo")
    return _PATCHES.originals["getnameinfo"](sockaddr, flags)


_SOCKET_METHODS: dict[str, Callable[..., Any]] = {
    "connect": _patched_connect,
    "connect_ex": _patched_connect_ex,
    "sendto": _patched_sendto,
    "sendmsg": _patched_sendmsg,
}
_RESOLVERS: dict[str, Callable[..., Any]] = {
    "getaddrinfo": _patched_getaddrinfo,
    "gethostbyname": _patched_gethostbyname,
    "gethostbyname_ex": _patched_gethostbyname_ex,
    "gethostbyaddr": _patched_gethostbyaddr,
    "getnameinfo": _patched_getnameinfo,
}


def _setter(target: Any, name: str, value: Any) -> Callable[[], None]:
    def restore() -> None:
        setattr(target, name, value)

    return restore


def _deleter(target: Any, name: str) -> Callable[[], None]:
    def restore() -> None:
        delattr(target, name)

    return restore


def _set_type_attribute(cls: Any, name: str, value: Any) -> None:
    """``setattr`` that also reaches an immutable C type (``_socket.socket`` is one in CPython 3.11).

    The type's dict is reached through the mapping proxy and the type's method cache is invalidated
    afterwards, which is what ``setattr`` on a mutable type does.
    """
    try:
        setattr(cls, name, value)
        return
    except TypeError:
        pass
    import ctypes
    import gc

    namespace = gc.get_referents(cls.__dict__)[0]
    if not isinstance(namespace, dict):
        raise TypeError(f"cannot patch {cls!r}.{name}")
    namespace[name] = value
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


# Each patch carries the function it replaced: a later install (after an uninstall that could not run,
# or by a second copy of this module that pytester re-imported) then finds the genuine function under it
# instead of taking a patch for the original, which would make the patch call itself.
_ORIGINAL_ATTR = "__agentreplay_original__"


def _genuine(value: Any) -> Any:
    for _ in range(16):
        under = getattr(value, _ORIGINAL_ATTR, None) if callable(value) else None
        if under is None:
            return value
        value = under
    return value


def _mark(patched: Any, original: Any) -> None:
    with suppress(AttributeError, TypeError):
        setattr(patched, _ORIGINAL_ATTR, original)


def _type_setter(cls: Any, name: str, value: Any) -> Callable[[], None]:
    def restore() -> None:
        _set_type_attribute(cls, name, value)

    return restore


def _patch_sockets() -> list[Callable[[], None]]:
    import _socket

    undo: list[Callable[[], None]] = []
    c_type: Any = _socket.socket
    try:
        # On the C type itself: socket.socket, ssl and asyncio sockets and raw _socket.socket() objects
        # all look their methods up there.
        for name, patched in _SOCKET_METHODS.items():
            if hasattr(c_type, name):
                _PATCHES.originals[name] = _genuine(c_type.__dict__[name])
                _mark(patched, _PATCHES.originals[name])
                _set_type_attribute(c_type, name, patched)
                undo.append(_type_setter(c_type, name, _PATCHES.originals[name]))
    except (TypeError, AttributeError, IndexError, ValueError, OSError):
        # Not CPython: patch the Python class, and hand out a guarded subclass from ``_socket``
        # (socket.py itself calls _socket.socket.__init__, which the subclass inherits).
        for restore in reversed(undo):
            restore()
        undo = []
        for name, patched in _SOCKET_METHODS.items():
            if hasattr(socket.socket, name):
                _PATCHES.originals[name] = getattr(c_type, name)
                setattr(socket.socket, name, patched)
                undo.append(_deleter(socket.socket, name))
        raw = type("socket", (c_type,), {**_SOCKET_METHODS, "__module__": "_socket"})
        for attr in ("socket", "SocketType"):
            if getattr(_socket, attr, None) is c_type:
                setattr(_socket, attr, raw)
                undo.append(_setter(_socket, attr, c_type))
    _PATCHES.originals["create_connection"] = _genuine(socket.create_connection)
    _mark(_patched_create_connection, _PATCHES.originals["create_connection"])
    socket.create_connection = _patched_create_connection
    undo.append(_setter(socket, "create_connection", _PATCHES.originals["create_connection"]))
    for name, patched in _RESOLVERS.items():
        _PATCHES.originals[name] = _genuine(getattr(_socket, name))
        _mark(patched, _PATCHES.originals[name])
        for module in (_socket, socket):
            # socket.getaddrinfo is a Python wrapper that calls _socket.getaddrinfo: patch only the bottom.
            if module is socket and name == "getaddrinfo":
                continue
            previous = _genuine(getattr(module, name))
            setattr(module, name, patched)
            undo.append(_setter(module, name, previous))
    return undo


# -- threads ---------------------------------------------------------------------------------------


def _patched_thread_start(self: threading.Thread) -> None:
    runs = guarding_runs()
    if runs:
        # The thread may outlive the run: it stays guarded by it, and a refusal then names the test.
        setattr(self, _THREAD_RUNS_ATTR, tuple(runs))
    _PATCHES.originals["thread_start"](self)


def _stray_threads_alive() -> bool:
    return any(getattr(t, _THREAD_RUNS_ATTR, None) and t.is_alive() for t in threading.enumerate())


# -- child processes -------------------------------------------------------------------------------


def _report_dir() -> str:
    return _REPORTS.ensure_directory()


def _remove_report_dir(path: str, owner: int) -> None:
    # atexit handlers are inherited by forked children: only the creating process removes it.
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


def snapshot(runs: list[Any] | None = None) -> str | None:
    """The value of :data:`ENV_VAR` for a child started now, or None when no replay run guards."""
    runs = guarding_runs() if runs is None else runs
    if not runs:
        return None
    return json.dumps(
        {
            "dir": _report_dir(),
            "runs": [
                {
                    "token": _token(r),
                    "test": r.settings.nodeid,
                    "mode": r.mode,
                    "cassette": r.cassette,
                    "allow_hosts": [str(h) for h in r.settings.allow_hosts],
                    ISOLATE_SETTING: r.settings.isolate_subprocesses,
                    BLOCK_ONLY: r.settings.block_network_only,
                }
                for r in runs
            ],
        },
        separators=(",", ":"),
    )


def adopt(value: str) -> None:
    """In a child process: guard on behalf of the parent's runs described by ``value`` (from ENV_VAR)."""
    data = json.loads(value)
    parents = [ParentRun(r) for r in data.get("runs") or () if isinstance(r, dict)]
    _RUNS.adopt(parents)
    _REPORTS.adopt(data.get("dir") or None)
    if parents:
        with _PATCHES.lock:
            needs_install = not _PATCHES.patched
        if needs_install:
            # Never released: the child lives inside the parent's run.
            install()


_SERVER_COMMANDS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def _is_server(argv: Any) -> bool:
    # Long-lived helpers shared by later tests must not keep this run's guard; their children get the
    # right one through multiprocessing's preparation data instead.
    for arg in argv or ():
        text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
        if any(command in text for command in _SERVER_COMMANDS):
            return True
    return False


def _env_for_child(env: Any, argv: Any, *, as_list: bool) -> tuple[Any, list[Any]]:
    """The environment to start a child with, and the guarding runs (for isolation).

    ``as_list``: ``fork_exec``'s form (a list of ``b"NAME=value"``); else a mapping (``posix_spawn``,
    ``execve``). ``env`` None means "inherit ours".
    """
    runs = guarding_runs()
    value = None if _is_server(argv) else snapshot(runs)
    if value is None and (env is None and ENV_VAR not in os.environ):
        return env, runs
    if as_list:
        prefix = ENV_VAR.encode() + b"="
        source = [k + b"=" + v for k, v in os.environb.items()] if env is None else list(env)
        out_list = [e for e in source if not bytes(e).startswith(prefix)]
        if value is not None:
            out_list.append(prefix + value.encode())
        return out_list, runs
    source_map = os.environ if env is None else env
    out_map = {k: v for k, v in source_map.items() if k not in (ENV_VAR, ENV_VAR.encode())}
    if value is not None:
        out_map[ENV_VAR] = value
    return out_map, runs


def _wants_isolation(runs: list[Any]) -> bool:
    return any(r.settings.isolate_subprocesses for r in runs)


_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


def _unshare_flags() -> int | None:
    """The ``unshare`` flags that give a child its own empty network namespace here, or None."""
    return _NAMESPACES.unshare_flags()


def _unshare(flags: int) -> int:
    return _NAMESPACES.unshare(flags)


def _isolation_preexec(user_preexec: Any, runs: list[Any]) -> Callable[[], None]:
    flags = _unshare_flags()
    if flags is None:
        run = runs[0]
        error = ConfigError(
            "isolate_subprocesses is set, but this platform cannot start a child in a new network namespace",
            evidence=[
                f"platform: {sys.platform}",
                "unshare(CLONE_NEWNET) and unshare(CLONE_NEWUSER | CLONE_NEWNET) were both refused",
                f"test: {run.settings.nodeid}",
            ],
            cassette=run.cassette,
            mode=run.mode,
            fixes=[
                "run the tests on Linux with user namespaces enabled (or with CAP_SYS_ADMIN)",
                "or turn the option off (isolate_subprocesses = false): Python children stay guarded, "
                "other programs then reach the network",
            ],
        )
        for r in runs:
            r.failures.append(error)
        raise error

    def preexec() -> None:
        if _unshare(flags) != 0:
            raise OSError("unshare of the network namespace failed")
        if user_preexec is not None:
            user_preexec()

    return preexec


def _patched_fork_exec(original: Callable[..., Any]) -> Callable[..., Any]:
    # fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, ..., preexec_fn, allow_vfork):
    # env is the 6th argument and preexec_fn the second to last in CPython 3.11 and 3.12.
    def fork_exec(*args: Any) -> Any:
        if len(args) > 7 and (guarding_runs() or ENV_VAR in os.environ):
            new = list(args)
            new[5], runs = _env_for_child(new[5], new[0], as_list=True)
            if _wants_isolation(runs) and not _is_server(new[0]):
                new[-2] = _isolation_preexec(new[-2], runs)
                new[-1] = False
            args = tuple(new)
        return original(*args)

    return fork_exec


def _patched_posix_spawn(name: str) -> Callable[..., Any]:
    def posix_spawn(path: Any, argv: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        env, _runs = _env_for_child(env, argv, as_list=False)
        return _PATCHES.originals[name](path, argv, env, *args, **kwargs)

    return posix_spawn


def _patched_execv(path: Any, argv: Any) -> Any:
    env, _runs = _env_for_child(None, argv, as_list=False)
    if env is None:
        return _PATCHES.originals["execv"](path, argv)
    return _PATCHES.originals["execve"](path, argv, env)


def _patched_execve(path: Any, argv: Any, env: Any) -> Any:
    env, _runs = _env_for_child(env, argv, as_list=False)
    return _PATCHES.originals["execve"](path, argv, env)


def _patched_system(command: Any) -> int:
    runs = guarding_runs()
    if not runs:
        result: int = _PATCHES.originals["system"](command)
        return result
    if _wants_isolation(runs):
        import subprocess

        # system() forks in C where no preexec hook reaches: run the shell through subprocess instead.
        code = subprocess.call(command, shell=True)
        return code << 8 if code >= 0 else -code
    value = snapshot(runs)
    with _PATCHES.system_lock:
        previous = os.environ.get(ENV_VAR)
        os.environ[ENV_VAR] = value or ""
        try:
            result = _PATCHES.originals["system"](command)
        finally:
            if previous is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = previous
    return result


class _Handover:
    """Pickled into multiprocessing's preparation data: unpickling it in the child adopts the runs.

    A forkserver child is forked from a server started earlier (perhaps under another test or none), so
    its environment says nothing reliable; the preparation data is sent per child.
    """

    def __init__(self, value: str) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        code = (
            "try:\n"
            "    from pytest_agentreplay.http import guard as _guard\n"
            f"    _guard.adopt({self.value!r})\n"
            "except Exception:\n"
            "    pass\n"
        )
        return (exec, (code, {}))


def _patched_get_preparation_data(name: Any) -> Any:
    data = _PATCHES.originals["get_preparation_data"](name)
    value = snapshot()
    if value is not None and isinstance(data, dict):
        data["pytest_agentreplay_guard"] = _Handover(value)
    return data


_SPAWN_MODULE = "multiprocessing.spawn"


class _SpawnPatch:
    """``multiprocessing.spawn.get_preparation_data`` patched in each module object that runs while the
    guard is installed, and restored in all of them by :meth:`remove`.

    Importing multiprocessing (context, reduction, pickle...) costs milliseconds of CPU that most replaying
    tests, and the guarded Python children, never need, so the guard does not import it: the module is
    patched when it is imported (:class:`~pytest_agentreplay.core.after_import.AfterImport`).
    """

    def __init__(self) -> None:
        self.active = True
        # Each module object patched, with the function it had. There can be several: pytester drops the
        # modules an inner session imported first, and the next import runs multiprocessing.spawn again.
        self.patched: list[tuple[Any, Any]] = []
        self.finder = AfterImport({_SPAWN_MODULE: self.patch})

    def patch(self, module: Any) -> None:
        with _PATCHES.lock:
            # After remove() (an uninstall raced with the import) nothing may be patched any more.
            if not self.active or not hasattr(module, "get_preparation_data"):
                return
            original = module.get_preparation_data
            if original is _patched_get_preparation_data:
                return
            _PATCHES.originals["get_preparation_data"] = original
            module.get_preparation_data = _patched_get_preparation_data
            # A module run again in place (importlib.reload) gets back its new function, not the old one.
            self.patched = [(m, f) for m, f in self.patched if m is not module]
            self.patched.append((module, original))

    def remove(self) -> None:
        with _PATCHES.lock:
            self.active = False
            self.finder.remove()
            while self.patched:
                module, original = self.patched.pop()
                module.get_preparation_data = original


def _spawn_modules() -> list[ModuleType]:
    """The ``multiprocessing.spawn`` modules in use: the imported one, and the package's attribute.

    ``from . import spawn`` (popen_forkserver, popen_spawn_posix, forkserver) reads the attribute.
    pytester drops the modules an inner session imported first: when that drops the submodule but not
    the package, the attribute keeps naming the dropped module, which no import brings back.
    """
    package = sys.modules.get("multiprocessing")
    found = (sys.modules.get(_SPAWN_MODULE), getattr(package, "spawn", None))
    return [m for m in found if isinstance(m, ModuleType) and m.__name__ == _SPAWN_MODULE]


def _patch_spawn() -> Callable[[], None]:
    spawn = _SpawnPatch()
    if _SPAWN_MODULE in sys.modules:
        # Waits for another thread that may still be running the module, so that its function is there
        # to patch. (No finder of ours is in sys.meta_path yet that could need _PATCHES.lock there.)
        importlib.import_module(_SPAWN_MODULE)
    for module in _spawn_modules():
        spawn.patch(module)
    # Even when imported already: a module dropped from sys.modules (pytester) and imported again while
    # the guard stays installed must be patched too, or forkserver children would go unguarded.
    spawn.finder.install()
    # Imported by another thread between the check and the insertion, past the finder: patch it here,
    # without waiting for a module still running (its import may be waiting for our lock in patch()).
    for module in _spawn_modules():
        spawn.patch(module)
    return spawn.remove


def _patch_children() -> list[Callable[[], None]]:
    undo: list[Callable[[], None]] = []

    def swap(module: Any, name: str, replacement: Any, key: str | None = None) -> None:
        if not hasattr(module, name):
            return
        original = getattr(module, name)
        _PATCHES.originals[key or name] = original
        setattr(module, name, replacement)
        undo.append(lambda: setattr(module, name, original))

    try:
        import _posixsubprocess
        import subprocess
    except ImportError:
        return undo

    subprocess_fork_exec = getattr(subprocess, "_fork_exec", None)
    if subprocess_fork_exec is not None:
        swap(subprocess, "_fork_exec", _patched_fork_exec(subprocess_fork_exec), "subprocess_fork_exec")
    swap(_posixsubprocess, "fork_exec", _patched_fork_exec(_posixsubprocess.fork_exec))
    # posix_spawn has no pre-exec hook for isolation: subprocess then always takes the fork_exec path.
    swap(subprocess, "_USE_POSIX_SPAWN", False)
    for name in ("posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            swap(os, name, _patched_posix_spawn(name))
    swap(os, "execv", _patched_execv)
    swap(os, "execve", _patched_execve)
    swap(os, "system", _patched_system)
    undo.append(_patch_spawn())
    return undo


def _before_fork() -> None:
    # A forked child reports under the run's token: give every guarding run one while still in the parent.
    if _PATCHES.patched:
        for run in guarding_runs():
            _token(run)
        _report_dir()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)


# -- install / uninstall ---------------------------------------------------------------------------


def install() -> Callable[[], None]:
    """Patch sockets, resolvers, thread start and child spawning (reference-counted); returns the
    matching uninstall callable."""
    _PATCHES.install()
    return _once(_PATCHES.release)


def installed() -> bool:
    return _PATCHES.installed()


def protect(ctx: RunContext) -> Callable[[], None]:
    """Guard for ``ctx`` from every thread of the process, whatever context the thread has."""
    return _once(_RUNS.protect(ctx))


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
