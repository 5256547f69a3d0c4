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
from pytest_agentreplay.guard import no_route, session_namespace
from pytest_agentreplay.guard.no_route import NoRoutes, parse_snmp, parse_snmp6
from pytest_agentreplay.guard.session_namespace import (
    explain,
    kernel_refusal,
    outside_loopback,
    recording_reason,
)
from pytest_agentreplay.report.status import Cause, cause_of

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
        monkeypatch.setenv("ISO_UDP_PORT", str(counting.udp_port))
        yield counting


@pytest.fixture(autouse=True)
def _fresh_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A suite run inside a namespace already must not make the inner sessions think they inherited one,
    # and an outer xdist worker's variables must not make an inner session think it is a worker.
    for name in (NETNS_ENV_VAR, "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)


def _junit_properties(path: os.PathLike[str], test: str) -> dict[str, str]:
    # Every test case of that name: under xdist a failed call and a failed teardown are two of them, the
    # properties on the teardown's.
    cases = [c for c in ET.parse(path).getroot().iter("testcase") if c.get("name") == test]
    assert cases, f"{test} is not in {path}"
    return {p.get("name", ""): p.get("value", "") for case in cases for p in case.iter("property")}


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
            "FAILED test_cases.py::test_native_connect - Failed: network*",
        ],
        consecutive=False,
    )
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert report["network"] == {
        "level": "namespace",
        "isolation": "entered",
        "setting": isolate,
        "reason": None,
        "unreachable_hosts": ["sandbox.example.com"],
    }
    causes = {t["nodeid"].split("::")[-1]: t["cause"] for t in report["tests"]}
    # The two the Python guard cannot see fail for what the kernel counted, not for their own assertion.
    assert causes == dict.fromkeys(
        ["test_native_connect", "test_child_without_site", "test_python_connect"], "network-blocked"
    )
    properties = _junit_properties(pytester.path / "junit.xml", "test_python_connect")
    assert properties["agentreplay.network"] == "namespace"
    assert properties["agentreplay.cause"] == "network-blocked"


# Code that bypasses the Python guard and swallows the error it gets: the test would pass but for the kernel's
# count. One phase each (the call, a fixture's set-up before agent_replay, a fixture's teardown), and one
# test whose traffic stays on loopback (counted by no one).
SWALLOWED = """
import ctypes, os, socket, struct, subprocess, sys
import pytest

HOST = os.environ["ISO_HOST"]
PORT = int(os.environ["ISO_PORT"])
UDP_PORT = int(os.environ["ISO_UDP_PORT"])
libc = ctypes.CDLL(None, use_errno=True)


def address(host, port):
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)


def libc_connect(host, port):
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    libc.connect(fd, address(host, port), 16)  # the error is swallowed
    libc.close(fd)


def libc_sendto(host, port):
    fd = libc.socket(socket.AF_INET, socket.SOCK_DGRAM, 0)
    libc.sendto(fd, b"ping", 4, 0, address(host, port), 16)  # the error is swallowed
    libc.close(fd)


@pytest.fixture
def connects_in_setup():
    libc_connect(HOST, PORT)


@pytest.fixture
def connects_in_teardown():
    yield
    libc_connect(HOST, PORT)


@pytest.mark.agentreplay
def test_native_tcp(agent_replay):
    libc_connect(HOST, PORT)


@pytest.mark.agentreplay
def test_native_udp(agent_replay):
    libc_sendto(HOST, UDP_PORT)


@pytest.mark.agentreplay
def test_child_without_site(agent_replay):
    connect = f"socket.create_connection(({HOST!r}, {PORT}), timeout=5)"
    code = f"import socket\\ntry: {connect}\\nexcept OSError: pass"  # the error is swallowed
    subprocess.run([sys.executable, "-S", "-c", code], check=True)


@pytest.mark.agentreplay
def test_fixture_before_agent_replay(connects_in_setup, agent_replay):
    pass


@pytest.mark.agentreplay
def test_fixture_teardown(connects_in_teardown, agent_replay):
    pass


@pytest.mark.agentreplay(allow_hosts=["127.0.0.1"])
def test_loopback_only(agent_replay):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        socket.create_connection(server.getsockname(), timeout=5).close()
    libc_sendto("127.0.0.1", 9)  # native, and on loopback: no route needed
"""
NAMESPACE_STOPPED = [
    "test_native_tcp",
    "test_native_udp",
    "test_child_without_site",
    "test_fixture_before_agent_replay",
]


def test_what_the_namespace_stopped_fails_the_test(pytester: pytest.Pytester, server: CountingServer) -> None:
    pytester.makepyfile(test_swallowed=SWALLOWED)
    common = ("-p", "no:cacheprovider", "-p", "no:randomly")
    pytester.runpytest_subprocess("--agentreplay-record=all", *common).assert_outcomes(passed=6)
    assert server.hits() == 5  # every case but the loopback one really reaches the server

    # Under the Python guard alone every case passes: it cannot see them.
    server.reset()
    pytester.runpytest_subprocess(*common).assert_outcomes(passed=6)
    assert server.hits() == 5

    server.reset()
    isolated = pytester.runpytest_subprocess(
        "--agentreplay-isolate=auto", "--agentreplay-report=report.json", "--junitxml=junit.xml", *common
    )
    assert server.hits() == 0
    # The teardown's failure is an error of its own beside the passed call.
    isolated.assert_outcomes(passed=2, failed=4, errors=1)
    isolated.stdout.fnmatch_lines(
        [
            *(f"FAILED test_swallowed.py::{test} - Failed: network*" for test in NAMESPACE_STOPPED),
            "ERROR test_swallowed.py::test_fixture_teardown - Failed: network*",
        ],
        consecutive=False,
    )
    isolated.stdout.fnmatch_lines(
        [
            "network access blocked by the session's network namespace during the test's call: 1 send found "
            "no route",
            "*the kernel counted 1 send with no route during the test's call: Ip OutNoRoutes +1*",
            "*code below Python*bypassed it, and the session's network namespace stopped it*",
            "How to fix:",
            "*serve the call from a cassette*--agentreplay-record=all test_swallowed.py::test_native_tcp",
            "*run that code outside replay*",
            "*allowing the host does not help: the namespace has loopback only*",
        ],
        consecutive=False,
    )
    out = isolated.stdout.str()
    assert "during set-up: 1 send found no route" in out  # the fixture listed before agent_replay
    assert "during teardown: 1 send found no route" in out
    assert "other worker" not in out

    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    causes = {t["nodeid"].split("::")[-1]: (t["status"], t["cause"]) for t in report["tests"]}
    assert causes == {
        **dict.fromkeys(NAMESPACE_STOPPED, ("failed", "network-blocked")),
        "test_fixture_teardown": ("error", "network-blocked"),  # pytest's word for a failed teardown
        "test_loopback_only": ("replayed", None),
    }
    for test in [*NAMESPACE_STOPPED, "test_fixture_teardown"]:
        assert _junit_properties(pytester.path / "junit.xml", test)["agentreplay.cause"] == "network-blocked"
    assert "agentreplay.cause" not in _junit_properties(pytester.path / "junit.xml", "test_loopback_only")


def test_xdist_workers_share_the_counters(pytester: pytest.Pytester, server: CountingServer) -> None:
    """Workers stay in the session's namespace (their own would split the loopback that plugins such as
    pytest-rerunfailures use to talk to the controller): a send counts in the window of every test running
    at the time, so the phase that fails and the count are not fixed, and the message says so."""
    pytester.makepyfile(test_swallowed=SWALLOWED)
    common = ("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2")
    pytester.runpytest_subprocess("--agentreplay-record=all", *common).assert_outcomes(passed=6)
    server.reset()

    isolated = pytester.runpytest_subprocess(
        "--agentreplay-isolate=auto",
        "--agentreplay-report=report.json",
        "--junitxml=junit.xml",
        "-k",
        "not loopback",
        *common,
    )
    assert server.hits() == 0
    # Each send fails its own test's phase, and may fail a phase of the test running beside it on the other
    # worker (test_fixture_teardown's call, any teardown): which ones is up to the timing.
    assert isolated.parseoutcomes().get("passed", 0) <= 1
    isolated.stdout.fnmatch_lines(
        [
            "network access blocked by the session's network namespace during * found no route",
            "*shared with 1 other worker(s): the send may come from a test running at the same time*",
        ],
        consecutive=False,
    )
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    causes = {t["nodeid"].split("::")[-1]: t["cause"] for t in report["tests"]}
    assert causes == dict.fromkeys([*NAMESPACE_STOPPED, "test_fixture_teardown"], "network-blocked")
    assert {t["status"] for t in report["tests"]} <= {"failed", "error"}
    for test in [*NAMESPACE_STOPPED, "test_fixture_teardown"]:
        assert _junit_properties(pytester.path / "junit.xml", test)["agentreplay.cause"] == "network-blocked"

    # Traffic on loopback is counted by no one: alone on the workers, the loopback test replays.
    pytester.runpytest_subprocess("--agentreplay-isolate=auto", "-k", "loopback", *common).assert_outcomes(
        passed=1
    )


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
from pytest_agentreplay.guard import no_route, session_namespace
from pytest_agentreplay.guard.no_route import NoRoutes, parse_snmp, parse_snmp6
from pytest_agentreplay.report.status import Cause, cause_of

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


SNMP_TEXT = """Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos \
InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout
Ip: 1 64 1200 0 0 0 0 0 1180 1100 0 7 0
Icmp: InMsgs InErrors OutNoRoutes
Icmp: 1 0 99
"""


def test_the_kernel_counters_are_read_by_name() -> None:
    assert parse_snmp(SNMP_TEXT) == 7  # the Ip line's OutNoRoutes, not another protocol's column
    assert parse_snmp("Tcp: RtoAlgorithm\nTcp: 1\n") is None
    assert parse_snmp6("Ip6InReceives                   \t12\nIp6OutNoRoutes                  \t3\n") == 3
    assert parse_snmp6("Ip6InReceives 12\n") is None
    assert NoRoutes(9, 4).since(NoRoutes(7, 4)) == NoRoutes(2, 0)
    assert NoRoutes(2, 1).total == 3


def test_outside_a_namespace_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that did not isolate (or a marker left by another namespace) reads no counters: a send
    without a route there is the machine's business, not the guard's."""
    monkeypatch.setenv(NETNS_ENV_VAR, "net:[1]")
    assert no_route.watch() is None
    monkeypatch.setenv(NETNS_ENV_VAR, os.readlink("/proc/self/ns/net"))
    assert isinstance(no_route.watch(), no_route.NoRouteWatch)


def test_a_watch_reports_what_was_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([NoRoutes(5, 1), NoRoutes(5, 1), NoRoutes(6, 3), NoRoutes(6, 3)])
    monkeypatch.setattr(no_route, "read_no_routes", lambda: next(readings))
    watch = no_route.NoRouteWatch()
    assert watch.take() is None
    assert watch.take() == NoRoutes(1, 2)
    assert watch.take() is None


def test_the_failure_names_the_count_the_phase_and_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    error = no_route.no_route_error(
        NoRoutes(1, 2),
        test="t.py::test_x",
        phase="teardown",
        cassette="c.json",
        mode="regression",
        block_only=False,
    )
    text = str(error)
    assert text.startswith(
        "network access blocked by the session's network namespace during teardown: 3 sends"
    )
    assert "Ip OutNoRoutes +1 (/proc/net/snmp), Ip6OutNoRoutes +2 (/proc/net/snmp6)" in text
    assert "shared with 2 other worker(s)" in text
    assert "pytest --agentreplay-record=all t.py::test_x" in text
    assert cause_of(error) is Cause.NETWORK_BLOCKED
    blocked = no_route.no_route_error(
        NoRoutes(1, 0),
        test="t.py::test_y",
        phase="the test's call",
        cassette=None,
        mode=None,
        block_only=True,
    )
    assert "make the test a replaying test" in str(blocked)
