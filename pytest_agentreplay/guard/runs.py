"""Which runs guard: every active replay-mode run of the process (the context's, those registered with
:meth:`GuardedRuns.protect`, :mod:`~pytest_agentreplay.core.capture`'s run list, the runs a thread was
started under) and in a child process its parent's (:class:`ParentRun`, with the ``settings`` and
guard memory the guard reads of a run). A context whose own run records is not blocked. The patches
that ask (:data:`PATCHES`) and what they call through to (:data:`ORIGINALS`) live here too."""

from __future__ import annotations

import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ..core.failures import RunFailures
from ..core.patching import Owner, Patches, Undo, genuine_function
from ..core.run_settings import RunSettings

if TYPE_CHECKING:
    from ..core.capture import RunContext

# A run the guard acts for: one of this process, or (in a child process) one of its parent.
GuardRun: TypeAlias = "RunContext | ParentRun"

# The setting asking for children in an empty network namespace (see :mod:`.isolation`).
ISOLATE_SETTING = "isolate_subprocesses"
# The setting a guard-only run (``--agentreplay-block-network`` on a test that does not replay) carries.
BLOCK_ONLY = "block_network_only"


class ParentRun:
    """In a child process: the parent's replay run, as far as the guard needs it."""

    recording = False

    def __init__(self, data: Mapping[str, object]) -> None:
        # The name this child reports under (``RunContext.guard_token``), and what it resolved.
        self.guard_token = str(data.get("token") or "")
        cassette = data.get("cassette")
        self.cassette = cassette if isinstance(cassette, str) else None
        self.mode = str(data.get("mode") or "regression")
        hosts = data.get("allow_hosts")
        nodeid = data.get("test")
        self.settings = RunSettings(
            allow_hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
            nodeid=nodeid if isinstance(nodeid, str) else None,
            isolate_subprocesses=bool(data.get(ISOLATE_SETTING)),
            block_network_only=bool(data.get(BLOCK_ONLY)),
        )
        self.failures = RunFailures()
        self.resolved_hosts: dict[str, str] = {}


def nodeid(run: GuardRun) -> str | None:
    return run.settings.nodeid or None


def token(run: GuardRun) -> str:
    """The name ``run``'s child processes report under (made on first use)."""
    if run.guard_token is None:
        run.guard_token = uuid.uuid4().hex
    return run.guard_token


# -- the runs guarding now -------------------------------------------------------------------------


class GuardedRuns:
    """Whom the guard protects beyond the context's run, and what it remembers between calls.
    Process-wide (:data:`RUNS`): the patched socket calls consult it from whatever thread makes them."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Runs registered with :meth:`protect`: guarded from every thread, whatever its context.
        self.protected: list[GuardRun] = []
        # In a child process: the parent's runs (from the environment or a multiprocessing hand-over).
        self.parents: list[ParentRun] = []
        # Host -> how many live calls the HTTP layer is making to it (the calls a mode sends on purpose).
        self.permitted: Counter[str] = Counter()
        # Run token -> the child processes (pid, command) started while the run guarded, until its test is
        # over; one that never says :meth:`~.reports.RefusalReports.hello` was out of the guard's reach.
        self.spawned: dict[str, list[tuple[int, str]]] = {}
        # The sockets that may send without a peer check (:mod:`.sockets`), each access one dict operation;
        # emptied when the guard is removed, so a socket reused in a later test is checked there again.
        # id(socket) -> (its descriptor, the ids of the runs that checked its connect):
        self.connected: dict[int, tuple[int, frozenset[int]]] = {}
        # descriptor -> peer address of a connection a server of this process accepted:
        self.accepted: dict[int, object] = {}

    def registered(self) -> list[GuardRun]:
        with self.lock:
            return [*self.protected, *self.parents]

    def protect(self, ctx: GuardRun) -> Undo:
        with self.lock:
            self.protected.append(ctx)

        def release() -> None:
            with self.lock:
                if ctx in self.protected:
                    self.protected.remove(ctx)

        return release

    def note_spawned(self, runs: list[GuardRun], pid: int, command: str) -> None:
        with self.lock:
            for run in runs:
                self.spawned.setdefault(token(run), []).append((pid, command))

    def allowances(self, runs: list[GuardRun]) -> tuple[list[str], dict[str, str]]:
        """The hosts permitted now, and the IP -> allowed name resolutions ``runs`` remember."""
        with self.lock:
            permitted = [h for h, n in self.permitted.items() if n]
            resolved: dict[str, str] = {}
            for run in runs:
                resolved.update(run.resolved_hosts)
        return permitted, resolved

    def remember_resolution(self, name: str, addresses: Iterable[object], runs: list[GuardRun]) -> None:
        with self.lock:
            for run in runs:
                memory = run.resolved_hosts
                for address in addresses:
                    if isinstance(address, str):
                        memory[address.lower()] = name.lower()


RUNS = GuardedRuns()


@contextmanager
def permitting(host: str) -> Iterator[None]:
    """Let the HTTP layer's own live call to ``host`` through (a mode that sends it on purpose)."""
    key = host.lower()
    with RUNS.lock:
        RUNS.permitted[key] += 1
    try:
        yield
    finally:
        with RUNS.lock:
            RUNS.permitted[key] -= 1


def _capture() -> ModuleType | None:
    # Not imported: a child process that only runs the guard never loads the recorder.
    return sys.modules.get("pytest_agentreplay.core.capture")


def guarding_runs() -> list[GuardRun]:
    """The replay runs that currently forbid unallowed connections from this thread/task."""
    capture = _capture()
    runs: list[GuardRun] = []
    if capture is not None:
        current: RunContext | None = capture.current_run()
        # A recording test talks to the real world; a production capture (mode "capture") does not lower
        # the guard of replay runs around it.
        if current is not None and current.mode == "record":
            return []
        if current is not None:
            runs.append(current)
        runs.extend(r for r in capture.active_runs() if r not in runs)
    runs.extend(r for r in RUNS.registered() if r not in runs)
    born: tuple[GuardRun, ...] = getattr(threading.current_thread(), THREAD_RUNS_ATTR, ())
    runs.extend(r for r in born if r not in runs)
    return [r for r in runs if not r.recording]


def ended(run: GuardRun) -> bool:
    """Whether ``run``'s test is over (a thread it started is still calling out)."""
    capture = _capture()
    active = capture.active_runs() if capture is not None else ()
    return not isinstance(run, ParentRun) and run not in RUNS.registered() and run not in active


# -- the patches: one owner per process (nested installs share it; ``__init__`` declares them) ---------

# Where a thread started under guarding runs keeps them (they outlive the test that started it).
THREAD_RUNS_ATTR: Final = "_agentreplay_guard_runs"


def stray_threads_alive() -> bool:
    """Whether a thread a replaying test started is still running (the patches must then stay)."""
    return any(getattr(t, THREAD_RUNS_ATTR, None) and t.is_alive() for t in threading.enumerate())


PATCHES = Owner(busy=stray_threads_alive)
# What each patch calls through to ("connect", "getaddrinfo", "thread_start", "execve"...). The values are
# C functions of every signature, called with what the patch received.
ORIGINALS: dict[str, Callable[..., Any]] = {}


# -- threads: a thread started under a run stays guarded by it ---------------------------------------


def _patched_thread_start(self: threading.Thread) -> None:
    runs = guarding_runs()
    if runs:
        # The thread may outlive the run: it stays guarded by it, and a refusal then names the test.
        setattr(self, THREAD_RUNS_ATTR, tuple(runs))
    ORIGINALS["thread_start"](self)


def patch_thread_start(patches: Patches, _module: object) -> None:
    ORIGINALS["thread_start"] = original = genuine_function(threading.Thread.start)
    patches.set(threading.Thread, "start", _patched_thread_start, original=original)
