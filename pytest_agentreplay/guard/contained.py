"""Fail-closed for programs the guard does not know: a non-Python child of a replaying test, started without
isolation, runs in an empty network namespace, and a send it tries fails its test.

The Python guard reaches Python children through their start-up hook; a program that is not Python (an
agent CLI the plugin does not serve, ``node``, ``curl``, ``npx``) it cannot reach. Such a child joins one
network namespace this process keeps for them (a ``cat`` reading a pipe of this process, started under
``unshare --net``, ``--user --map-current-user`` too where the process lacks ``CAP_SYS_ADMIN``; it ends with
this process, however that ends): no interface is up there, so nothing
leaves, and the kernel counts each attempt in that namespace's ``OutNoRoutes`` (:mod:`.no_route`). A run
that started a contained child reads the count when its test's phases end (:func:`contained_sends`): a
difference fails the test with the fix.

Not contained, as before: Python (the guard runs in it), commands that read the local machine only
(``uname``, ``ls``, local ``git``: :func:`~.children.reaches_no_network`), multiprocessing's servers, children
of runs that allow hosts or name sandbox services (a test that talks to its own services on loopback; the
child is named in the summary), sessions or children already isolated, and machines where no namespace can
be made.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from typing import Final

from ..core.constants import NETNS_ENV_VAR
from .isolation import _CLONE_NEWNET, _CLONE_NEWUSER
from .no_route import NoRoutes, parse_snmp
from .runs import GuardRun, allow_hosts, block_only, isolates, token

_PYTHONS: Final = ("python", "pypy")


class Holder:
    """The namespace contained children join: a process waiting in it, and descriptors of its
    namespaces. Process-wide (:data:`HOLDER`), made on first need, ended at exit."""

    def __init__(self) -> None:
        # Re-entrant: starting the helper spawns a child, which asks :meth:`ready` again (then: not yet).
        self.lock = threading.RLock()
        self.tried = False
        self.process: subprocess.Popen[bytes] | None = None
        # (namespace flag, descriptor) in the order a child joins them: the user namespace first.
        self.joins: list[tuple[int, int]] = []
        self._setns: Callable[[int, int], object] | None = None

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

    def sends(self) -> NoRoutes | None:
        process = self.process
        if process is None:
            return None
        try:
            with open(f"/proc/{process.pid}/net/snmp") as f:
                ipv4 = parse_snmp(f.read())
        except OSError:
            return None
        return None if ipv4 is None else NoRoutes(ipv4, 0)

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


class Baselines:
    """Per run token: the namespace's count when the run started its first contained child, and the
    commands it contained."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_token: dict[str, tuple[NoRoutes, list[str]]] = {}

    def note(self, runs: list[GuardRun], command: str) -> None:
        count = HOLDER.sends() or NoRoutes()
        with self.lock:
            for run in runs:
                _base, commands = self.by_token.setdefault(token(run), (count, []))
                commands.append(command)

    def take(self, run_token: str) -> tuple[int, list[str]] | None:
        """Sends counted since the run's baseline, and its contained commands; the baseline moves on."""
        with self.lock:
            found = self.by_token.get(run_token)
            if found is None:
                return None
            now = HOLDER.sends() or found[0]
            self.by_token[run_token] = (now, found[1])
        return now.since(found[0]).total, found[1]


BASELINES = Baselines()


def contains(runs: list[GuardRun], argv: object, command: str, local: Callable[[str], bool]) -> bool:
    """Whether a child of ``runs`` started with ``argv`` goes into the contained namespace (noted if so);
    ``local`` tells a command that reads the local machine only."""
    parts = argv if isinstance(argv, list | tuple) else [argv]
    first = parts[0] if parts else ""
    program = first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first)
    if not runs or os.path.basename(program).startswith(_PYTHONS) or local(command):
        return False
    if NETNS_ENV_VAR in os.environ:
        return False  # the whole session is in its own namespace already
    if any(isolates(r) or block_only(r) or allow_hosts(r) or _names_sandbox_services(r) for r in runs):
        return False
    if not HOLDER.ready():
        return False
    BASELINES.note(runs, command)
    return True


def _names_sandbox_services(run: GuardRun) -> bool:
    """A sandbox run that names its services: its children (an agent CLI) must reach them, which an empty
    namespace would prevent; like a run that allows hosts, they run unconfined and are named."""
    return bool(run.settings.sandbox or run.settings.sandbox_hosts)


def contained_sends(run_token: str | None) -> tuple[int, list[str]] | None:
    """Sends the run's contained children tried since the last look (None: it contained none)."""
    if run_token is None:
        return None
    found = BASELINES.take(run_token)
    if found is None or found[0] <= 0:
        return None
    return found
