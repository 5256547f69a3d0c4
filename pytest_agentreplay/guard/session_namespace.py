"""The replay session in its own network namespace (``--agentreplay-isolate``, Linux): loopback only,
whatever code runs in it (native code, ``python -S``, other programs, sockets made before a run) and
whatever it starts; xdist workers inherit it and find themselves inside (``NETNS_ENV_VAR``).

The pytest process enters (with a new user namespace unless it holds ``CAP_SYS_ADMIN``) at the plugin's
earliest hook, before conftest files and test modules are imported, while it is still single-threaded:
``unshare`` refuses a new user namespace to a threaded process. Entering cannot be undone and a half-entered
process (loopback down) would break every test, so a forked child tries the whole sequence first; its
failure, read with the machine's settings, is the reason ``auto`` reports and ``required`` fails with.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterable
from typing import Final, NamedTuple

from ..core.config import Settings
from ..core.constants import NETNS_ENV_VAR
from ..exceptions import ConfigError
from .decision import is_loopback
from .isolation import _CLONE_NEWNET, _CLONE_NEWUSER, NAMESPACES
from .no_route import counting, namespace_id, read_text

# Which level guarded the session (the summary, the reports, JUnit).
NAMESPACE = "namespace"
PYTHON_GUARD = "python guard"
NONE = "none"

# What happened to the isolation of this session.
OFF = "off"
ENTERED = "entered"
INHERITED = "inherited"
SKIPPED = "skipped"
UNAVAILABLE = "unavailable"

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
# struct ifreq: the interface name, then a union whose first short is the flags (40 bytes on 64-bit).
_IFREQ = struct.Struct("16sh")
_IFREQ_SIZE = 40


# A NamedTuple, not a dataclass: built at every start-up.
class Isolation(NamedTuple):
    """What ``--agentreplay-isolate`` did for this session, and why."""

    setting: str
    state: str
    # Why the session is not isolated (skipped, unavailable), or how it came to be (inherited).
    reason: str | None = None
    # Allowed hosts outside loopback, which the namespace cuts off.
    unreachable: tuple[str, ...] = ()

    @property
    def isolated(self) -> bool:
        return self.state in (ENTERED, INHERITED)

    def level(self, guarded: bool) -> str:
        """The level that guarded the session: ``guarded`` says whether the Python guard was up (a test
        replayed, or ``--agentreplay-block-network``)."""
        if self.isolated:
            return NAMESPACE
        return PYTHON_GUARD if guarded else NONE

    def describe(self, guarded: bool) -> str:
        """``namespace (the session entered its own network namespace: loopback only)`` and the like."""
        level = self.level(guarded)
        if self.state == ENTERED:
            why = "the session runs in its own network namespace: loopback only"
        elif self.state == INHERITED:
            why = self.reason or "inside the network namespace of the session that started it"
        elif self.state == OFF:
            why = "network isolation off; --agentreplay-isolate=auto also stops native code and children"
        else:
            why = f"network isolation {self.state}: {self.reason}"
        return f"{level} ({why})"

    def header_lines(self) -> list[str]:
        """What pytest's header says at start-up (nothing when isolation is off and nothing inherited)."""
        if self.state == OFF:
            return []
        if not self.isolated:
            return [f"agentreplay: network isolation {self.state}: {self.reason}"]
        how = "entered" if self.state == ENTERED else f"inherited ({self.reason})"
        lines = [f"agentreplay: network isolation: namespace {how}: loopback only"]
        if self.unreachable:
            lines.append(
                "agentreplay: allowed hosts outside loopback are unreachable inside the namespace: "
                f"{', '.join(self.unreachable)} (use --agentreplay-isolate=off for a session that needs them)"
            )
        return lines


# -- the decision ------------------------------------------------------------------------------------


def isolate_session(settings: Settings, *, first_session: bool = True) -> Isolation:
    """Decide, and enter the namespace where the settings ask for it and the machine allows.

    ``first_session``: False for a pytest session inside another one of the same process (pytester's
    in-process runs), which must not move the outer session into a namespace. Raises ``ConfigError`` when
    ``isolate = required`` and the machine refuses."""
    setting = settings.isolate
    if counting():  # inside the namespace an ancestor session entered (an xdist worker)
        return Isolation(setting, INHERITED, "inside the network namespace the parent session entered")
    if setting == OFF:
        return Isolation(setting, OFF)
    skipped = recording_reason(settings)
    if skipped is not None:
        return Isolation(setting, SKIPPED, skipped)
    refused = (
        refusal()
        if first_session
        else "another pytest session already runs in this process (an in-process pytester run): "
        "only a fresh process can enter a namespace"
    )
    if refused is not None:
        if setting == "required":
            raise required_error(refused, setting)
        return Isolation(setting, UNAVAILABLE, refused)
    try:
        enter(NAMESPACES.session_flags or _CLONE_NEWUSER | _CLONE_NEWNET)
    except _StepError as exc:
        # The child managed, this process did not (a thread started in between): unshare is all or
        # nothing, so only a later step leaves the process half inside.
        reason = explain(exc.step, exc.errno or 0)
        if setting == "required" or exc.step != "unshare":
            raise required_error(reason, setting) from None
        return Isolation(setting, UNAVAILABLE, reason)
    os.environ[NETNS_ENV_VAR] = namespace_id() or "1"
    return Isolation(setting, ENTERED, unreachable=tuple(outside_loopback(settings.allow_hosts)))


def recording_reason(settings: Settings) -> str | None:
    """Why this session must keep the network (isolation is for replay), or None."""
    if settings.record != "none":
        return (
            f"the session records (--agentreplay-record={settings.record}): recording needs the real services"
        )
    if settings.update:
        return "the session updates cassettes (--agentreplay-update)"
    if settings.mode == "model-comparison":
        return "model-comparison sends the model calls live"
    return None


def required_error(reason: str, setting: str) -> ConfigError:
    return ConfigError(
        f"network isolation {setting}: this session cannot enter its own network namespace",
        evidence=[f"reason: {reason}", f"platform: {sys.platform}"],
        fixes=_fixes(reason),
    )


# A word of the refusal's reason -> the fix it calls for (the first word found wins).
_FIXES: Final = {
    "apparmor": (
        "allow unprivileged user namespaces: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
    ),
    "unprivileged_userns_clone": (
        "allow unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1"
    ),
    "max_user_namespaces": "allow user namespaces: sudo sysctl -w user.max_user_namespaces=15000",
    "container": (
        "run the container with --network none (loopback only: the same closure), or allow namespaces "
        "with --security-opt seccomp=unconfined (or --cap-add SYS_ADMIN)"
    ),
    "threads": (
        "find what starts a thread at import (a plugin, sitecustomize, a .pth file) and start it later, "
        "or disable that plugin with -p no:NAME"
    ),
    "pytester": "run the inner session in a fresh process: pytester.runpytest_subprocess(...)",
    "Linux only": "run the replay job on Linux (a CI runner, a container, WSL 2)",
}


def _fixes(reason: str) -> list[str]:
    found = [fix for word, fix in _FIXES.items() if word in reason][:1]
    return [
        *found,
        "or use --agentreplay-isolate=auto: the session then runs under the Python guard and says why",
    ]


def outside_loopback(hosts: Iterable[str]) -> list[str]:
    """The allowed hosts a namespace cuts off: every one that is not a loopback name or address."""
    found = []
    for host in hosts:
        name = host.strip("[]").lower()
        if not (is_loopback(name) or name == "ip6-localhost" or name.endswith(".localhost")):
            found.append(host)
    return found


# -- the machine ---------------------------------------------------------------------------------------


def refusal() -> str | None:
    """Why this process cannot enter a new network namespace here, or None (it can)."""
    threads = _thread_count() if sys.platform.startswith("linux") else 1
    if threads > 1:
        return (
            f"the pytest process already runs {threads} threads (started by a plugin or sitecustomize before "
            "this plugin's first hook): a multi-threaded process cannot enter a new user namespace"
        )
    return kernel_refusal()


def kernel_refusal() -> str | None:
    """Why no process of this machine can enter a new network namespace (the platform, the kernel's
    settings, the container), or None. A forked child tries; safe from a threaded process too."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        system = {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)
        return f"{system} has no network namespaces (Linux only)"
    outcome = _probe()
    return None if outcome is None else explain(*outcome)


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading  # heavy: only where /proc is missing

        return threading.active_count()


def _probe() -> tuple[str, int] | None:
    """Try the whole sequence in a forked child: None when it worked, else (the failing step, errno)."""
    NAMESPACES.unshare(0)  # looked up before the fork: the child only calls into it
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe child
        os.close(read_end)
        message = b"ok"
        try:
            for flags in (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET):
                try:
                    enter(flags)
                    message = b"ok %d" % flags
                    break
                except _StepError as exc:
                    message = b"fail %s %d" % (exc.step.encode(), exc.errno or 0)
                    if exc.step != "unshare":
                        break  # the namespace is half made: the next flags cannot be tried in this child
        finally:
            os.write(write_end, message)
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        answer = fh.read().decode()
    os.waitpid(pid, 0)
    words = answer.split()
    if words[:1] == ["ok"] and len(words) == 2:
        NAMESPACES.session_flags = int(words[1])
        return None
    if len(words) == 3:
        return words[1], int(words[2])
    return "probe", 0


def explain(step: str, code: int) -> str:
    """The reason the kernel refused, in the machine's terms (the sysctl or the sandbox that says no)."""
    name = errno.errorcode.get(code, str(code))
    if _sysctl("kernel/unprivileged_userns_clone") == "0":
        return (
            f"unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0; {step}: {name})"
        )
    if _sysctl("user/max_user_namespaces") == "0":
        return f"user namespaces are disabled (user.max_user_namespaces=0; {step}: {name})"
    if _sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns=1, "
            f"the default of Ubuntu 24.04; {step}: {name})"
        )
    if code == errno.EPERM and _in_container():
        return (
            f"a container without the capability to make namespaces ({step}: EPERM; Docker's default seccomp "
            "profile refuses it without CAP_SYS_ADMIN)"
        )
    if code == errno.ENOSPC:
        return f"the user namespace limit is reached (user.max_user_namespaces; {step}: ENOSPC)"
    if code == errno.EINVAL:
        return f"the kernel refused ({step}: EINVAL): no user namespace support, or the process is threaded"
    return f"the kernel refused ({step}: {name})"


def _sysctl(name: str) -> str:
    return read_text(f"/proc/sys/{name}").strip()


def _in_container() -> bool:
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    return any(word in read_text("/proc/1/cgroup") for word in ("docker", "containerd", "kubepods", "libpod"))


# -- entering ------------------------------------------------------------------------------------------


class _StepError(OSError):
    def __init__(self, step: str, code: int) -> None:
        super().__init__(code, f"{step}: {os.strerror(code)}")
        self.step = step


def enter(flags: int) -> None:
    """Unshare the network namespace (and the user namespace, mapped to the current ids), then bring
    loopback up. Raises ``_StepError`` naming the step that failed."""
    uid, gid = os.geteuid(), os.getegid()
    if NAMESPACES.unshare(flags) != 0:
        raise _StepError("unshare", ctypes.get_errno())
    if flags & _CLONE_NEWUSER:
        # setgroups first: the kernel refuses an unprivileged gid map while setgroups is allowed.
        for path, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            try:
                with open(f"/proc/self/{path}", "w", encoding="ascii") as fh:
                    fh.write(text)
            except OSError as exc:
                raise _StepError(f"writing /proc/self/{path}", exc.errno or errno.EPERM) from None
    _loopback_up()


def _loopback_up() -> None:
    import fcntl  # heavy: only a session that isolates
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = _IFREQ.pack(b"lo", 0).ljust(_IFREQ_SIZE, b"\0")
            current = fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request)
            flags = _IFREQ.unpack(current[: _IFREQ.size])[1]
            fcntl.ioctl(
                sock.fileno(), _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP).ljust(_IFREQ_SIZE, b"\0")
            )
    except OSError as exc:
        raise _StepError("bringing loopback up", exc.errno or errno.EPERM) from None
