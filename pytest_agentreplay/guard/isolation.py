"""Children of a replaying test without network, which also covers programs that are not Python (curl).

Isolated (``isolate_subprocesses``, Linux): the child unshares its network namespace between fork and exec;
where the machine cannot, starting it fails with a ``ConfigError`` rather than run unisolated.

Contained (programs the guard does not reach, started without isolation: ``node``, ``curl``, an agent
CLI): the child joins an empty network namespace held by a ``cat`` reading a pipe of this process (started
under ``unshare --net``, with ``--user --map-current-user`` without ``CAP_SYS_ADMIN``), so it ends with
this process. The kernel counts each send tried there in ``OutNoRoutes`` (:mod:`.no_route`), which the run
reads when its test's phases end. Not contained: Python, local-only commands, multiprocessing's servers,
children of runs that allow hosts or name sandbox services, sessions already isolated.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Final

from ..core.constants import NETNS_ENV_VAR
from ..exceptions import ConfigError
from .no_route import parse_snmp, read_text
from .runs import GuardRun, nodeid, token

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


class NamespaceProbe:
    """Whether this machine can start a child in a new, empty network namespace: probed once, by forking.

    Process-wide (:data:`NAMESPACES`): the answer depends on the kernel and the process's privileges only.
    """

    def __init__(self) -> None:
        self.probed = False
        # The ``unshare`` flags that work here, or None when none does.
        self.flags: int | None = None
        # The flags with which a forked child entered a whole session namespace (``--agentreplay-isolate``:
        # loopback up too, see :mod:`.session_namespace`), or None until such a probe succeeded.
        self.session_flags: int | None = None
        self._unshare: Callable[[int], object] | None = None

    def unshare_flags(self) -> int | None:
        """The ``unshare`` flags that give a child its own empty network namespace here, or None."""
        if self.probed:
            return self.flags
        if sys.platform.startswith("linux") and hasattr(os, "fork"):
            self.unshare(0)
            for flags in (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET):
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the probe child
                    os._exit(0 if self.unshare(flags) == 0 else 1)
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) == 0:
                    self.flags = flags
                    break
        self.probed = True
        return self.flags

    def unshare(self, flags: int) -> int:
        # Looked up in the parent: a dlopen in a child forked from a threaded process can deadlock.
        call = self._unshare
        if call is None:
            call = self._unshare = ctypes.CDLL(None, use_errno=True).unshare
        result = call(flags)
        return result if isinstance(result, int) else -1


NAMESPACES = NamespaceProbe()


def wants_isolation(runs: list[GuardRun]) -> bool:
    return any(r.settings.isolate_subprocesses for r in runs)


def isolation_preexec(user_preexec: Callable[[], object] | None, runs: list[GuardRun]) -> Callable[[], None]:
    """The ``preexec_fn`` that moves a child into an empty network namespace, then runs the user's own.

    Raises (and fails every run in ``runs``) where this machine has no such namespace to give.
    """
    flags = NAMESPACES.unshare_flags()
    if flags is None:
        run = runs[0]
        error = ConfigError(
            "isolate_subprocesses is set, but this platform cannot start a child in a new network namespace",
            evidence=[
                f"platform: {sys.platform}",
                "unshare(CLONE_NEWNET) and unshare(CLONE_NEWUSER | CLONE_NEWNET) were both refused",
                f"test: {nodeid(run)}",
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
            r.failures.add(error)
        raise error

    def preexec() -> None:
        if NAMESPACES.unshare(flags) != 0:
            raise OSError("unshare of the network namespace failed")
        if user_preexec is not None:
            user_preexec()

    return preexec


# -- contained children -----------------------------------------------------------------------------


_PYTHONS: Final = ("python", "pypy")


class Holder:
    """The namespace contained children join: a process waiting in it, descriptors of its namespaces, and
    per run token the count of sends when the run contained its first child, and the commands it contained.
    Process-wide (:data:`HOLDER`), made on first need, ended at exit."""

    def __init__(self) -> None:
        # Re-entrant: starting the helper spawns a child, which asks :meth:`ready` again (then: not yet).
        self.lock = threading.RLock()
        self.tried = False
        self.process: subprocess.Popen[bytes] | None = None
        # (namespace flag, descriptor) in the order a child joins them: the user namespace first.
        self.joins: list[tuple[int, int]] = []
        self._setns: Callable[[int, int], object] | None = None
        self.baselines: dict[str, tuple[int, list[str]]] = {}

    def ready(self) -> bool:
        with self.lock:
            if not self.tried:
                self.tried = True
                self._start()
            return bool(self.joins)

    def _start(self) -> None:
        unshare = shutil.which("unshare")
        cat = shutil.which("cat")
        if unshare is None or cat is None or not os.path.exists("/proc/self/ns/net"):
            return
        own_user = os.readlink("/proc/self/ns/user")
        for flags in (["--net"], ["--user", "--map-current-user", "--net"]):
            process = subprocess.Popen(
                [unshare, *flags, cat],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._joined(process, own_user):
                self.process = process
                atexit.register(self.stop)
                return
            _end(process)

    def _joined(self, process: subprocess.Popen[bytes], own_user: str) -> bool:
        """Open the helper's namespaces once it is in its own network namespace (it unshares, then execs
        cat: wait for the namespace to change)."""
        own_net = os.readlink("/proc/self/ns/net")
        for _ in range(200):
            if process.poll() is not None:
                return False
            try:
                net = os.readlink(f"/proc/{process.pid}/ns/net")
                user = os.readlink(f"/proc/{process.pid}/ns/user")
                with open(f"/proc/{process.pid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                return False
            if net != own_net and comm == "cat":
                joins = []
                if user != own_user:
                    joins.append((_CLONE_NEWUSER, os.open(f"/proc/{process.pid}/ns/user", os.O_RDONLY)))
                joins.append((_CLONE_NEWNET, os.open(f"/proc/{process.pid}/ns/net", os.O_RDONLY)))
                self.joins = joins
                self._setns = ctypes.CDLL(None, use_errno=True).setns
                return True
            threading.Event().wait(0.005)
        return False

    def preexec(self, user_preexec: Callable[[], object] | None) -> Callable[[], None]:
        setns, joins = self._setns, list(self.joins)
        assert setns is not None

        def join() -> None:
            for flag, fd in joins:
                if setns(fd, flag) != 0:
                    raise OSError("joining the contained children's network namespace failed")
            if user_preexec is not None:
                user_preexec()

        return join

    def sends(self) -> int:
        """The namespace's ``OutNoRoutes`` count now (0 where it cannot be read)."""
        process = self.process
        return 0 if process is None else parse_snmp(read_text(f"/proc/{process.pid}/net/snmp")) or 0

    def note(self, runs: list[GuardRun], command: str) -> None:
        count = self.sends()
        with self.lock:
            for run in runs:
                self.baselines.setdefault(token(run), (count, []))[1].append(command)

    def take(self, run_token: str) -> tuple[int, list[str]] | None:
        """Sends the run's contained children tried since the last look, and its contained commands (None:
        no send, or it contained none); the baseline moves on."""
        with self.lock:
            found = self.baselines.get(run_token)
            if found is None:
                return None
            now = self.sends() or found[0]
            self.baselines[run_token] = (now, found[1])
        return (now - found[0], found[1]) if now > found[0] else None

    def stop(self) -> None:
        process, self.process = self.process, None
        for _, fd in self.joins:
            os.close(fd)
        self.joins = []
        if process is not None:
            _end(process)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    process.kill()
    process.wait()


HOLDER = Holder()


def contains(runs: list[GuardRun], program: str, command: str) -> bool:
    """Whether a child of ``runs`` running ``program`` goes into the contained namespace (noted if so)."""
    if not runs or os.path.basename(program).startswith(_PYTHONS):
        return False
    if NETNS_ENV_VAR in os.environ:
        return False  # the whole session is in its own namespace already
    # A sandbox run that names its services is like one that allows hosts: its children (an agent CLI)
    # must reach them, which an empty namespace would prevent.
    settings = [r.settings for r in runs]
    if any(s.isolate_subprocesses or s.block_network_only or s.allow_hosts or s.sandbox for s in settings):
        return False
    if any(s.sandbox_hosts for s in settings) or not HOLDER.ready():
        return False
    HOLDER.note(runs, command)
    return True
