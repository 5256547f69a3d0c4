"""Children in a new, empty network namespace (``isolate_subprocesses``, Linux): no network at all, which
also covers programs that are not Python (curl), where the guard's start-up hook cannot reach.

The child unshares its network namespace between fork and exec (a ``preexec_fn``); where the machine
cannot (no user namespaces, no ``CAP_SYS_ADMIN``, not Linux), starting a child fails with a
:class:`~pytest_agentreplay.exceptions.ConfigError` rather than run unisolated.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

from ..exceptions import ConfigError
from .runs import GuardRun, nodeid

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
            call = self._unshare = ctypes.CDLL(None, use_errno=True).unshare
        result = call(flags)
        return result if isinstance(result, int) else -1


NAMESPACES = NamespaceProbe()


def unshare_flags() -> int | None:
    """The ``unshare`` flags that give a child its own empty network namespace here, or None."""
    return NAMESPACES.unshare_flags()


def wants_isolation(runs: list[GuardRun]) -> bool:
    return any(r.settings.isolate_subprocesses for r in runs)


def isolation_preexec(user_preexec: Callable[[], object] | None, runs: list[GuardRun]) -> Callable[[], None]:
    """The ``preexec_fn`` that moves a child into an empty network namespace, then runs the user's own.

    Raises (and fails every run in ``runs``) where this machine has no such namespace to give.
    """
    flags = unshare_flags()
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
