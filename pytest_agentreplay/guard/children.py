"""Child processes: every spawn path hands the guarding runs over to the child.

``subprocess``, ``os.posix_spawn*``, ``os.exec*``, ``os.system`` and multiprocessing's spawn and
forkserver pass them in :data:`ENV_VAR` (:func:`snapshot`), which the package's ``.pth`` start-up hook
adopts in a Python child (:func:`adopt_handover`); forked children inherit the guard in memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Final

from ..core.patching import Patches
from .isolation import HOLDER, contains, isolation_preexec, wants_isolation
from .reports import REPORTS
from .runs import (
    BLOCK_ONLY,
    ISOLATE_SETTING,
    ORIGINALS,
    PATCHES,
    RUNS,
    GuardRun,
    ParentRun,
    guarding_runs,
    nodeid,
    token,
)

ENV_VAR = "PYTEST_AGENTREPLAY_GUARD"


# -- the hand-over ---------------------------------------------------------------------------------


def snapshot(runs: list[GuardRun] | None = None) -> str | None:
    """The value of :data:`ENV_VAR` for a child started now, or None when no replay run guards."""
    runs = guarding_runs() if runs is None else runs
    if not runs:
        return None
    return json.dumps(
        {
            "dir": REPORTS.ensure_directory(),
            "runs": [
                {
                    "token": token(r),
                    "test": nodeid(r),
                    "mode": r.mode,
                    "cassette": r.cassette,
                    "allow_hosts": list(r.settings.allow_hosts),
                    ISOLATE_SETTING: r.settings.isolate_subprocesses,
                    BLOCK_ONLY: r.settings.block_network_only,
                }
                for r in runs
            ],
        },
        separators=(",", ":"),
    )


def adopt_handover(value: str) -> bool:
    """In a child process: take over the parent's runs described by ``value`` (a :func:`snapshot`) and
    its report directory; returns whether any run guards (the guard must then be installed)."""
    data = json.loads(value)
    if not isinstance(data, dict):
        return False
    runs = data.get("runs")
    parents = [ParentRun(r) for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []
    RUNS.parents[:] = parents
    directory = data.get("dir")
    REPORTS.directory = directory if isinstance(directory, str) and directory else None
    # Tells the parent this child runs the guard: a child that never says so is named in its summary.
    for parent in parents:
        REPORTS.hello(parent.guard_token)
    return bool(parents)


_SERVER_COMMANDS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def _words(argv: object) -> list[str]:
    parts = argv if isinstance(argv, list | tuple) else [argv]
    return [p.decode("utf-8", "replace") if isinstance(p, bytes) else str(p) for p in parts]


def _command(argv: object) -> str:
    text = " ".join(_words(argv))
    return text if len(text) <= 80 else text[:77] + "..."


def _is_server(argv: object) -> bool:
    # Multiprocessing's long-lived servers, shared by later tests, must not keep this run's guard: their
    # children get the right one through multiprocessing's preparation data instead.
    text = " ".join(_words(argv))
    return any(command in text for command in _SERVER_COMMANDS)


def _env_for_child(env: object, argv: object, *, as_list: bool) -> tuple[object, list[GuardRun]]:
    """The environment to start a child with, and the runs guarding it.

    ``as_list``: ``fork_exec``'s form (a list of ``b"NAME=value"``); else a mapping (``posix_spawn``,
    ``execve``). ``env`` None means "inherit ours"; one of neither form is passed on for the spawn to refuse.
    """
    runs = [] if _is_server(argv) else guarding_runs()
    value = snapshot(runs)
    if value is None and (env is None and ENV_VAR not in os.environ):
        return env, runs
    if as_list:
        prefix = ENV_VAR.encode() + b"="
        if env is None:
            source = [k + b"=" + v for k, v in os.environb.items()]
        elif isinstance(env, Iterable):
            source = [bytes(e) for e in env]
        else:
            return env, runs
        out_list = [e for e in source if not e.startswith(prefix)]
        if value is not None:
            out_list.append(prefix + value.encode())
        return out_list, runs
    source_map = os.environ if env is None else env
    if not isinstance(source_map, Mapping):
        return env, runs
    out_map: dict[object, object] = {
        k: v for k, v in source_map.items() if k not in (ENV_VAR, ENV_VAR.encode())
    }
    if value is not None:
        out_map[ENV_VAR] = value
    return out_map, runs


# -- children the guard could not reach ---------------------------------------------------------------


def unreached_children(runs: list[GuardRun]) -> list[tuple[int, str]]:
    """The children ``runs`` started that never ran the guard (not Python, ``python -S``, another
    interpreter without this package), each once; forgets them. Children in an empty network namespace
    (``isolate_subprocesses``) are contained and not listed."""
    found: dict[int, str] = {}
    for run in runs:
        run_token = run.guard_token
        if run_token is None:
            continue
        greeted = REPORTS.take_hellos(run_token)
        with RUNS.lock:
            spawned = RUNS.spawned.pop(run_token, [])
        for pid, command in spawned:
            if pid not in greeted and not run.settings.isolate_subprocesses:
                found.setdefault(pid, command)
    return sorted(found.items())


# Commands that read the local machine only (``platform.platform()`` runs ``uname -p``): a child running
# one reaches no network whatever it is handed, so the guard not reaching it is not worth a word.
_LOCAL_WORDS: Final = (
    "uname hostname id whoami ls cat echo true false which lsb_release sw_vers getconf nproc locale date "
    "ldconfig file sysctl tty stty tput ps df du wc sort head tail"
)
LOCAL_COMMANDS: Final = frozenset(_LOCAL_WORDS.split())
# git's subcommands that talk to a remote; every other one works on the local repository.
GIT_REMOTE_SUBCOMMANDS: Final = frozenset(
    {"fetch", "pull", "push", "clone", "ls-remote", "remote", "submodule", "archive", "send-email", "svn"}
)
_GIT_OPTIONS_WITH_VALUE: Final = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def reaches_no_network(command: str) -> bool:
    """Whether a child's command line (as :func:`live_children` shows it) cannot reach a network."""
    words = command.split()
    if not words:
        return False
    name = os.path.basename(words[0])
    if name in LOCAL_COMMANDS:
        return True
    if name != "git":
        return False
    rest = iter(words[1:])
    for word in rest:
        if word in _GIT_OPTIONS_WITH_VALUE:
            next(rest, None)
        elif not word.startswith("-"):
            return word not in GIT_REMOTE_SUBCOMMANDS
    return True


def live_children() -> dict[int, str]:
    """This process's child processes now (Linux, from /proc; elsewhere none): pid -> command line.

    Multiprocessing's own servers are left out: the forkserver hands the guard to the children it forks.
    """
    found: dict[int, str] = {}
    if sys.platform != "linux":
        return found
    try:
        # Called at every guarded test's start: one system call (ECHILD: no child at all) spares most
        # tests the scan, which opens a file per thread and per child.
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as f:
                pids = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = [a for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            if argv and not _is_server(argv):
                found[pid] = _command(argv)
    return found


# -- the spawn patches -----------------------------------------------------------------------------


def _patched_fork_exec(original: Callable[..., int]) -> Callable[..., int]:
    # fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, ..., preexec_fn, allow_vfork):
    # env is the 6th argument and preexec_fn the second to last in CPython 3.11 and 3.12.
    def fork_exec(*args: object) -> int:
        if len(args) <= 7 or not (guarding_runs() or ENV_VAR in os.environ):
            return original(*args)
        new = list(args)
        new[5], runs = _env_for_child(new[5], new[0], as_list=True)
        words = _words(new[0])
        command = _command(words)
        user_preexec = new[-2] if callable(new[-2]) else None
        if wants_isolation(runs):
            new[-2:] = [isolation_preexec(user_preexec, runs), False]
        elif not reaches_no_network(command) and contains(runs, words[0] if words else "", command):
            new[-2:] = [HOLDER.preexec(user_preexec), False]
        pid = original(*new)
        if runs:
            RUNS.note_spawned(runs, pid, command)
        return pid

    return fork_exec


def _patched_posix_spawn(name: str) -> Callable[..., int]:
    def posix_spawn(path: object, argv: object, env: object, *args: object, **kwargs: object) -> int:
        env, runs = _env_for_child(env, argv, as_list=False)
        pid: int = ORIGINALS[name](path, argv, env, *args, **kwargs)
        if runs:
            RUNS.note_spawned(runs, pid, _command(argv))
        return pid

    return posix_spawn


def _patched_execv(path: object, argv: object) -> None:
    env, _runs = _env_for_child(None, argv, as_list=False)
    if env is None:
        ORIGINALS["execv"](path, argv)
    else:
        ORIGINALS["execve"](path, argv, env)


def _patched_execve(path: object, argv: object, env: object) -> None:
    env, _runs = _env_for_child(env, argv, as_list=False)
    ORIGINALS["execve"](path, argv, env)


def _patched_system(command: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> int:
    runs = guarding_runs()
    if not runs:
        result: int = ORIGINALS["system"](command)
        return result
    if wants_isolation(runs):
        # system() forks in C where no preexec hook reaches: run the shell through subprocess instead.
        code = subprocess.call(command, shell=True)
        return code << 8 if code >= 0 else -code
    value = snapshot(runs)
    with _SYSTEM_LOCK:
        previous = os.environ.get(ENV_VAR)
        os.environ[ENV_VAR] = value or ""
        try:
            result = ORIGINALS["system"](command)
        finally:
            if previous is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = previous
    return result


_OS_PATCHES: Final[dict[str, Callable[..., object]]] = {
    **{name: _patched_posix_spawn(name) for name in ("posix_spawn", "posix_spawnp")},
    **{"execv": _patched_execv, "execve": _patched_execve, "system": _patched_system},
}


# -- multiprocessing spawn and forkserver ----------------------------------------------------------


class _Handover:
    """Pickled into multiprocessing's preparation data, which is sent per child: unpickling it adopts the
    runs. A forkserver child's environment is its server's, from another test or none."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Callable[[str, dict[str, object]], None], tuple[str, dict[str, object]]]:
        code = (
            "try:\n"
            "    from pytest_agentreplay import guard as _guard\n"
            f"    _guard.adopt({self.value!r})\n"
            "except Exception:\n"
            "    pass\n"
        )
        return (exec, (code, {}))


def _patched_get_preparation_data(name: object) -> object:
    data: object = ORIGINALS["get_preparation_data"](name)
    value = snapshot()
    if value is not None and isinstance(data, dict):
        data["pytest_agentreplay_guard"] = _Handover(value)
    return data


SPAWN_MODULE: Final = "multiprocessing.spawn"
_PREPARATION: Final = "get_preparation_data"
# os.system hands the runs over through os.environ, which every thread shares: one swap at a time.
_SYSTEM_LOCK = threading.Lock()


def _spawn_modules() -> list[ModuleType]:
    """The ``multiprocessing.spawn`` modules in use: the imported one, and the package's attribute, which
    ``from . import spawn`` reads: pytester may drop the submodule but not the package, whose attribute
    then names the dropped module."""
    package = sys.modules.get("multiprocessing")
    found = (sys.modules.get(SPAWN_MODULE), getattr(package, "spawn", None))
    return [m for m in found if isinstance(m, ModuleType) and m.__name__ == SPAWN_MODULE]


def patch_spawn(patches: Patches, module: ModuleType | None) -> None:
    """``multiprocessing.spawn.get_preparation_data`` patched in ``module`` (just run) and in the modules
    in use; a module still running has no function to patch yet (its import patches it once run). Without
    ``module``, only where ``multiprocessing.spawn`` is not imported: the trigger's call did it then."""
    if module is None and SPAWN_MODULE in sys.modules:
        return
    for spawn in dict.fromkeys([*([module] if module is not None else []), *_spawn_modules()]):
        original = getattr(spawn, _PREPARATION, None)
        if original is not None and original is not _patched_get_preparation_data:
            ORIGINALS["get_preparation_data"] = original
            patches.set(spawn, _PREPARATION, _patched_get_preparation_data)


def patch_children(patches: Patches, _module: object) -> None:
    """Patch every spawn path but multiprocessing's to hand the guarding runs over."""
    try:
        import _posixsubprocess  # optional: POSIX only; without it no child is started this way
    except ImportError:
        return
    for module, name in ((subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec")):
        if hasattr(module, name):
            patches.set(module, name, _patched_fork_exec(getattr(module, name)))
    # posix_spawn has no pre-exec hook for isolation: subprocess then always takes the fork_exec path.
    if hasattr(subprocess, "_USE_POSIX_SPAWN"):
        patches.set(subprocess, "_USE_POSIX_SPAWN", False)
    for name, patched in _OS_PATCHES.items():
        if hasattr(os, name):
            ORIGINALS[name] = getattr(os, name)
            patches.set(os, name, patched)


def _before_fork() -> None:
    # A forked child reports under the run's token: give every guarding run one while still in the parent.
    if PATCHES.patched:
        for run in guarding_runs():
            token(run)
        REPORTS.ensure_directory()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)
