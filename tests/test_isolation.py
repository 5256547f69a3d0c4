"""``--agentreplay-isolate``: the replay session in its own network namespace (guard/session_namespace.py).

Each inner session is a fresh process (``runpytest_subprocess``): only a new, single-threaded process can
enter a namespace, and one entered cannot be left. The cases are those the Python guard cannot stop
(issue 26): a connection made through ctypes' libc ``connect``, and a ``python -S`` child, which skips the
guard's start-up hook. A server on this machine's address outside loopback counts what reaches it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from fnmatch import fnmatch

import pytest
from isolation_servers import CountingServer, non_loopback_ipv4

from pytest_agentreplay.core.config import Settings
from pytest_agentreplay.core.constants import NETNS_ENV_VAR
from pytest_agentreplay.guard import session_namespace
from pytest_agentreplay.guard.session_namespace import (
    explain,
    kernel_refusal,
    outside_loopback,
    recording_reason,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="network namespaces are Linux only"
)

# What the tests below run: the cases only a namespace stops, and one the Python guard stops itself.
CASES = """
import ctypes, errno, os, socket, struct, subprocess, sys
import pytest

HOST = os.environ["ISO_HOST"]
PORT = int(os.environ["ISO_PORT"])


def libc_connect(host, port):
    # Below Python: the guard's socket patches never see this call.
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    address = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)
    result = libc.connect(fd, address, len(address))
    code = ctypes.get_errno()
    libc.close(fd)
    return 0 if result == 0 else code


@pytest.mark.agentreplay
def test_native_connect(agent_replay):
    code = libc_connect(HOST, PORT)
    assert code == 0, errno.errorcode.get(code, code)


@pytest.mark.agentreplay
def test_child_without_site(agent_replay):
    # -S: no site, so no .pth start-up hook: the guard never starts in this child.
    code = f"import socket; socket.create_connection(({HOST!r}, {PORT}), timeout=5).close()"
    child = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert child.returncode == 0, child.stderr


@pytest.mark.agentreplay
def test_python_connect(agent_replay):
    socket.create_connection((HOST, PORT), timeout=5).close()
"""


@functools.cache
def _kernel_refusal() -> str | None:
    return kernel_refusal()


def _needs_namespaces() -> None:
    refused = _kernel_refusal()
    if refused is not None:
        pytest.skip(f"this machine refuses network namespaces: {refused}")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingServer]:
    _needs_namespaces()
    host = non_loopback_ipv4()
    if host is None:
        pytest.skip(
            "this process sees no IPv4 address outside loopback (no interface but lo, or the suite itself "
            "runs in a namespace): test_xdist_workers_are_inside proves the closure with ENETUNREACH instead"
        )
    with CountingServer(host) as counting:
        monkeypatch.setenv("ISO_HOST", counting.host)
        monkeypatch.setenv("ISO_PORT", str(counting.port))
        yield counting


@pytest.fixture(autouse=True)
def _fresh_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A suite run inside a namespace already must not make the inner sessions think they inherited one.
    monkeypatch.delenv(NETNS_ENV_VAR, raising=False)


def _junit_properties(path: os.PathLike[str], test: str) -> dict[str, str]:
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("name") == test:
            return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    raise AssertionError(f"{test} is not in {path}")


@pytest.mark.parametrize("isolate", ["auto", "required"])
def test_replay_in_its_namespace_stops_native_code_and_children(
    pytester: pytest.Pytester, server: CountingServer, isolate: str
) -> None:
    pytester.makepyfile(test_cases=CASES)
    common = ("-p", "no:cacheprovider", "-p", "no:randomly")

    # Recording needs the real services: isolation steps aside, and says so.
    recorded = pytester.runpytest_subprocess(
        "--agentreplay-record=all", f"--agentreplay-isolate={isolate}", *common
    )
    recorded.assert_outcomes(passed=3)
    assert server.hits() == 3
    recorded.stdout.fnmatch_lines(
        [
            "agentreplay: network isolation skipped: the session records (--agentreplay-record=all)*",
            "network guard: none (network isolation skipped: the session records*",
        ]
    )

    if isolate == "auto":
        # Replay under the Python guard alone: native code and the -S child get through, and pass.
        server.reset()
        unguarded = pytester.runpytest_subprocess(*common)
        unguarded.assert_outcomes(passed=2, failed=1)
        assert server.hits() == 2
        unguarded.stdout.fnmatch_lines(["network guard: python guard (network isolation off;*"])

    # Replay in its own namespace: nothing reaches the server, every case fails.
    server.reset()
    isolated = pytester.runpytest_subprocess(
        f"--agentreplay-isolate={isolate}",
        "--agentreplay-allow-hosts=localhost,sandbox.example.com",
        "--agentreplay-report=report.json",
        "--junitxml=junit.xml",
        *common,
    )
    isolated.assert_outcomes(failed=3)
    assert server.hits() == 0
    isolated.stdout.fnmatch_lines(
        [
            "agentreplay: network isolation: namespace entered: loopback only",
            "agentreplay: allowed hosts outside loopback are unreachable inside the namespace: "
            "sandbox.example.com*",
        ]
    )
    isolated.stdout.fnmatch_lines(
        [
            "*failed (network-blocked*test_cases.py::test_python_connect*",
            "network guard: namespace (the session runs in its own network namespace: loopback only)",
            "FAILED test_cases.py::test_native_connect - AssertionError: ENETUNREACH",
        ],
        consecutive=False,
    )
    assert "OSError: [Errno 101] Network is unreachable" in isolated.stdout.str()  # the -S child
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert report["network"] == {
        "level": "namespace",
        "isolation": "entered",
        "setting": isolate,
        "reason": None,
        "unreachable_hosts": ["sandbox.example.com"],
    }
    causes = {t["nodeid"].split("::")[-1]: t["cause"] for t in report["tests"]}
    assert causes["test_python_connect"] == "network-blocked"
    properties = _junit_properties(pytester.path / "junit.xml", "test_python_connect")
    assert properties["agentreplay.network"] == "namespace"
    assert properties["agentreplay.cause"] == "network-blocked"


def test_xdist_workers_are_inside(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are the controller's children: they start inside its namespace and say so, never entering
    one of their own. A connect to a documentation address (TEST-NET-1) finds no route there."""
    _needs_namespaces()
    monkeypatch.setenv("OUTER_NETNS", os.readlink("/proc/self/ns/net"))
    pytester.makepyfile(
        test_workers="""
        import ctypes, errno, os, socket, struct
        import pytest

        def libc_connect(host, port):
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
            address = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host)
            address += bytes(8)
            result = libc.connect(fd, address, len(address))
            code = ctypes.get_errno()
            libc.close(fd)
            return 0 if result == 0 else code

        @pytest.mark.parametrize("n", range(4))
        def test_inside(n):
            assert os.environ.get("PYTEST_XDIST_WORKER")
            netns = os.readlink("/proc/self/ns/net")
            assert netns == os.environ["PYTEST_AGENTREPLAY_NETNS"]
            assert netns != os.environ["OUTER_NETNS"]
            assert libc_connect("192.0.2.1", 9) == errno.ENETUNREACH
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "--agentreplay-isolate=required", "-p", "no:cacheprovider", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["agentreplay: network isolation: namespace entered: loopback only"])


REFUSING_KERNEL = """
from pytest_agentreplay.guard import session_namespace

# Loaded with -p, before the plugin's first hook: this machine now refuses like a Debian kernel would.
WHY = "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
session_namespace.refusal = lambda: WHY
"""


def test_required_fails_the_session_where_the_machine_refuses(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(refusing_kernel=REFUSING_KERNEL, test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "refusing_kernel", "--agentreplay-isolate=required")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*network isolation required: this session cannot enter its own network namespace*",
            "*reason: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)*",
            "*sudo sysctl -w kernel.unprivileged_userns_clone=1*",
        ],
        consecutive=False,
    )
    result.stdout.no_fnmatch_line("*test_one*PASSED*")


def test_auto_runs_under_the_python_guard_and_says_why(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        refusing_kernel=REFUSING_KERNEL,
        test_one="""
        import os
        import pytest

        @pytest.mark.agentreplay
        def test_one(agent_replay):
            assert "PYTEST_AGENTREPLAY_NETNS" not in os.environ
        """,
    )
    pytester.runpytest_subprocess("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(
        passed=1
    )
    result = pytester.runpytest_subprocess(
        "-p", "refusing_kernel", "--agentreplay-isolate=auto", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    why = "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
    result.stdout.fnmatch_lines(
        [
            f"agentreplay: network isolation unavailable: {why}",
            f"network guard: python guard (network isolation unavailable: {why})",
        ],
        consecutive=False,
    )


def test_a_threaded_process_is_not_moved(pytester: pytest.Pytester) -> None:
    """A thread started before the plugin's first hook (a plugin, sitecustomize): unshare would refuse the
    user namespace, and the reason says which."""
    pytester.makepyfile(
        early_thread="""
        import threading
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        """,
        test_one="def test_one():\n    pass\n",
    )
    result = pytester.runpytest_subprocess("-p", "early_thread", "--agentreplay-isolate=auto")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["agentreplay: network isolation unavailable: the pytest process already runs * threads*"]
    )
    required = pytester.runpytest_subprocess("-p", "early_thread", "--agentreplay-isolate=required")
    assert required.ret == pytest.ExitCode.USAGE_ERROR
    required.stderr.fnmatch_lines(["*reason: the pytest process already runs * threads*"])


def test_an_in_process_session_never_moves_the_outer_one(pytester: pytest.Pytester) -> None:
    before = os.readlink("/proc/self/ns/net")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("--agentreplay-isolate=auto")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["agentreplay: network isolation unavailable: another pytest session already runs in this process*"]
    )
    assert os.readlink("/proc/self/ns/net") == before


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        ({}, ["--agentreplay-isolate=bogus"], "*argument --agentreplay-isolate: invalid choice: 'bogus'*"),
        (
            {"pytest.ini": "[pytest]\nagentreplay_isolate = sometimes\n"},
            [],
            "*invalid agentreplay_isolate 'sometimes'*valid values: off, auto, required*",
        ),
        (
            {"pyproject.toml": "[tool.agentreplay]\nisolate = true\n"},
            [],
            "*invalid isolate True in [[]tool.agentreplay[]]*valid values: off, auto, required*",
        ),
    ],
)
def test_bad_values_are_usage_errors(
    pytester: pytest.Pytester, files: dict[str, str], args: list[str], expected: str
) -> None:
    for name, text in files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # The error spans lines (headline, evidence): matched as one text.
    assert fnmatch(result.stderr.str().replace("\n", " "), expected), result.stderr.str()


def test_the_command_line_wins_over_the_ini_file(pytester: pytest.Pytester) -> None:
    (pytester.path / "pytest.ini").write_text("[pytest]\nagentreplay_isolate = required\n", encoding="utf-8")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("--agentreplay-isolate=off")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*network isolation*")


# -- the decision's pieces, without a process ---------------------------------------------------------


def test_recording_and_live_modes_keep_the_network() -> None:
    assert recording_reason(Settings(record="none")) is None
    assert "--agentreplay-record=missing" in str(recording_reason(Settings(record="missing")))
    assert "--agentreplay-update" in str(recording_reason(Settings(update=True)))
    assert "model calls live" in str(recording_reason(Settings(mode="model-comparison")))
    assert recording_reason(Settings(mode="sandbox")) is None


def test_hosts_outside_loopback_are_named() -> None:
    hosts = ("localhost", "api.localhost", "127.0.0.1", "::1", "[::1]", "api.example.com", "10.0.0.5")
    assert outside_loopback(hosts) == ["api.example.com", "10.0.0.5"]


@pytest.mark.parametrize(
    ("sysctls", "container", "code", "expected"),
    [
        ({"kernel/apparmor_restrict_unprivileged_userns": "1"}, False, 1, "AppArmor restricts*Ubuntu 24.04*"),
        ({"kernel/unprivileged_userns_clone": "0"}, False, 1, "*kernel.unprivileged_userns_clone=0*"),
        ({"user/max_user_namespaces": "0"}, False, 28, "*user.max_user_namespaces=0*"),
        ({}, True, 1, "a container without the capability*seccomp*"),
        ({}, False, 1, "the kernel refused (unshare: EPERM)"),
    ],
)
def test_a_refusal_names_the_setting_that_refuses(
    monkeypatch: pytest.MonkeyPatch, sysctls: dict[str, str], container: bool, code: int, expected: str
) -> None:
    monkeypatch.setattr(session_namespace, "_sysctl", sysctls.get)
    monkeypatch.setattr(session_namespace, "_in_container", lambda: container)
    assert fnmatch(explain("unshare", code), expected), explain("unshare", code)
