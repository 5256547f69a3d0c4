"""Issue 11, item 1: every way out of a replaying test's process is refused, and the test fails even when
the agent swallows the refusal.

Each channel is counted at the receiving end: HTTP requests on a 127.0.0.1 (and a ::1) server started by
the test, datagrams on a UDP socket. The plugin's behaviour is checked through real inner pytest sessions
(``pytester``, in-process, so the servers and counters live in this process): one inner test per channel,
recorded once, then replayed in regression, model-comparison and sandbox mode. Audit mode runs no test
body, so there the channels are tried from a fixture's setup. Child processes (subprocess, os.system,
multiprocessing spawn/forkserver/fork, os.fork) swallow their own refusal too: the parent learns of it
through the guard's report files. The guard's pure decision and its process-wide bookkeeping (stray
threads, ``capture_run`` inside a replay, subprocess isolation, the start-up hook) are tested directly.
"""

from __future__ import annotations

import _socket
import contextlib
import http.client
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer, MemoryCassette, run_in

from pytest_agentreplay import capture_run, guard
from pytest_agentreplay.core import socket_gate
from pytest_agentreplay.exceptions import ConfigError, NetworkBlockedError
from pytest_agentreplay.intercept import install as _install_interception

# Inner sessions run in-process, and pytester afterwards drops every module first imported during one:
# load the plugin's modules now, so inner sessions and later tests share one copy (one run registry,
# one set of interceptors). The returned callable removes the patches again.
_install_interception()()

REPLAY_MODES = ("regression", "model-comparison", "sandbox")
# The guard's refusals, and for intercepted HTTP clients the replay's own (served or refused, never sent).
BLOCKED_TEXT = (
    "network access blocked",
    "was refused network access",
    "no recorded HTTP exchange",
    "it was not sent",
)


class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Counters:
    """The receiving end of every channel: HTTP requests (IPv4 and IPv6) and UDP datagrams."""

    def __init__(self) -> None:
        self.http = LLMServer().start()
        self.v6_hits = 0
        counters = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                counters.v6_hits += 1
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.v6 = _V6Server(("::1", 0), Handler)
        self.v6.daemon_threads = True
        threading.Thread(target=self.v6.serve_forever, daemon=True).start()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self._base = (0, 0)

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def v6_port(self) -> int:
        return int(self.v6.server_address[1])

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    def datagrams(self) -> int:
        n = 0
        while True:
            try:
                self.udp.recv(65536)
            except BlockingIOError:
                return n
            n += 1

    def mark(self) -> None:
        self._base = (len(self.http.log), self.v6_hits)
        self.datagrams()

    def reached(self) -> dict[str, int]:
        """What arrived since :meth:`mark` (each test starts from zero)."""
        http_base, v6_base = self._base
        http = len(self.http.log) - http_base
        return {"http": http, "ipv6": self.v6_hits - v6_base, "udp": self.datagrams()}

    def close(self) -> None:
        self.http.stop()
        self.v6.shutdown()
        self.v6.server_close()
        self.udp.close()


@pytest.fixture(scope="module")
def _servers() -> Iterator[Counters]:
    # One set for the module: the inner test files (and so their cassettes) are then the same everywhere.
    c = Counters()
    yield c
    c.close()


@pytest.fixture
def counters(_servers: Counters) -> Counters:
    _servers.mark()
    return _servers


@pytest.fixture(scope="module")
def _recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {"dir": tmp_path_factory.mktemp("channel-cassettes")}


# The channels, as agent code would use them. Every one swallows what it raises, as a careless agent
# (or a retry loop) would; child processes swallow too and exit 0.
CHANNELS_MODULE = r"""
import _socket
import asyncio
import http.client
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import urllib.request

PORT = {port}
V6_PORT = {v6_port}
UDP = ("127.0.0.1", {udp_port})
URL = "http://127.0.0.1:%d/tools/weather?city=Oslo" % PORT
REQUEST = b"GET /tools/weather?city=raw HTTP/1.0\r\nHost: x\r\n\r\n"
CHILD = (
    "import http.client\n"
    "try:\n"
    "    c = http.client.HTTPConnection('127.0.0.1', %d, timeout=5)\n"
    "    c.request('GET', '/tools/weather?city=child')\n"
    "    c.getresponse()\n"
    "except Exception:\n"
    "    pass\n" % PORT
)


def http_get(host="127.0.0.1", port=PORT):
    c = http.client.HTTPConnection(host, port, timeout=5)
    c.request("GET", "/tools/weather?city=x")
    c.getresponse().read()


def swallowed(fn):
    try:
        fn()
    except Exception:
        pass


def mp_target():
    swallowed(http_get)


def raw(sock, connect=True):
    # Not "with sock": a raw _socket.socket is no context manager.
    try:
        sock.settimeout(5)
        if connect:
            sock.connect(("127.0.0.1", PORT))
        sock.sendall(REQUEST)
        sock.recv(100)
    finally:
        sock.close()


def fastopen():
    with socket.socket() as s:
        s.settimeout(5)
        s.sendto(REQUEST, socket.MSG_FASTOPEN, ("127.0.0.1", PORT))
        s.recv(100)


def connect_ex():
    with socket.socket() as s:
        s.settimeout(5)
        if s.connect_ex(("127.0.0.1", PORT)) == 0:
            s.sendall(REQUEST)
            s.recv(100)


def udp(send):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        send(s)


def udp_connected(s):
    s.connect(UDP)
    s.send(b"datagram")


def raw_udp():
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        s.sendto(b"datagram", UDP)
    finally:
        s.close()


def by_name(resolve):
    ip = resolve()
    http_get(ip if isinstance(ip, str) else ip[2][0])


def asyncio_channel():
    async def main():
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", PORT), 5)
        writer.write(REQUEST)
        await reader.read(100)
        writer.close()

    asyncio.run(main())


def in_thread():
    t = threading.Thread(target=http_get)
    t.start()
    t.join()
    # The thread's exception is printed and dropped: nothing reaches this frame.


def multiprocessing_channel(method):
    p = multiprocessing.get_context(method).Process(target=mp_target)
    p.start()
    p.join(60)


def forked():
    pid = os.fork()
    if pid == 0:
        swallowed(http_get)
        os._exit(0)
    os.waitpid(pid, 0)


CHANNELS = {{
    "httpx": lambda: __import__("httpx").get(URL, timeout=5),
    "requests": lambda: __import__("requests").get(URL, timeout=5),
    "urllib": lambda: urllib.request.urlopen(URL, timeout=5).read(),
    "http.client": http_get,
    "socket.connect": lambda: raw(socket.socket()),
    "socket.connect_ex": connect_ex,
    "socket.create_connection": lambda: raw(socket.create_connection(("127.0.0.1", PORT), 5), False),
    "_socket.connect": lambda: raw(_socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)),
    "base-class.connect": lambda: raw(socket.socket.__base__(socket.AF_INET, socket.SOCK_STREAM)),
    "tcp-fastopen": fastopen,
    "udp.sendto": lambda: udp(lambda s: s.sendto(b"datagram", UDP)),
    "udp.sendto-flags": lambda: udp(lambda s: s.sendto(b"datagram", 0, UDP)),
    "udp.sendmsg": lambda: udp(lambda s: s.sendmsg([b"datagram"], [], 0, UDP)),
    "udp.connect-send": lambda: udp(udp_connected),
    "_socket.udp.sendto": raw_udp,
    "ipv6": lambda: http_get("::1", V6_PORT),
    "asyncio": asyncio_channel,
    "thread": in_thread,
    "getaddrinfo": lambda: socket.getaddrinfo("api.example.com", PORT),
    "gethostbyname": lambda: by_name(lambda: socket.gethostbyname("api.example.com")),
    "gethostbyname_ex": lambda: by_name(lambda: socket.gethostbyname_ex("api.example.com")),
    "gethostbyaddr": lambda: socket.gethostbyaddr("203.0.113.5"),
    "_socket.gethostbyname": lambda: by_name(lambda: _socket.gethostbyname("api.example.com")),
    "subprocess-python": lambda: subprocess.run([sys.executable, "-c", CHILD], timeout=60),
    "os.system-python": lambda: os.system('"%s" -c "%s"' % (sys.executable, CHILD)),
    "multiprocessing-spawn": lambda: multiprocessing_channel("spawn"),
    "multiprocessing-forkserver": lambda: multiprocessing_channel("forkserver"),
    "multiprocessing-fork": lambda: multiprocessing_channel("fork"),
    "os.fork": forked,
}}
"""

CHANNEL_TEST = """
import pytest
from channels import CHANNELS, swallowed

@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_channel(agent_replay, channel):
    if agent_replay.recording:
        return
    swallowed(CHANNELS[channel])
"""

AUDIT_TEST = """
import pytest
from channels import CHANNELS, swallowed

@pytest.fixture
def leaky(agent_replay, channel):
    # Audit runs no test body, but fixtures still set up inside the run.
    if not agent_replay.recording:
        swallowed(CHANNELS[channel])

@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_channel(leaky):
    pass
"""

CHANNEL_NAMES = 29


def _lab(pytester: pytest.Pytester, counters: Counters, recordings: dict[str, Path], test: str) -> None:
    """The inner project: the channels and ``test``, with recorded cassettes (recorded once per module:
    the audit file has the same test ids as the channel file, so one recording serves every mode)."""
    pytester.makepyfile(
        channels=CHANNELS_MODULE.format(
            port=counters.port, v6_port=counters.v6_port, udp_port=counters.udp_port
        ),
        test_channels=CHANNEL_TEST,
    )
    saved = recordings["dir"] / "cassettes"
    if saved.is_dir():
        shutil.copytree(saved, pytester.path / "cassettes")
    else:
        recorded = pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider", "-q")
        recorded.assert_outcomes(passed=CHANNEL_NAMES)
        shutil.copytree(pytester.path / "cassettes", saved)
    pytester.makepyfile(test_channels=test)
    assert counters.reached() == {"http": 0, "ipv6": 0, "udp": 0}


def _failures_by_channel(result: pytest.RunResult) -> dict[str, str]:
    """channel -> the failure text pytest printed for it."""
    out = "\n".join(result.outlines)
    sections: dict[str, str] = {}
    for block in out.split("_ test_channel[")[1:]:
        name, _, body = block.partition("]")
        sections[name] = body
    return sections


@pytest.mark.parametrize("mode", REPLAY_MODES)
def test_every_channel_is_refused_and_fails_the_test(
    pytester: pytest.Pytester, counters: Counters, _recordings: dict[str, Path], mode: str
) -> None:
    _lab(pytester, counters, _recordings, CHANNEL_TEST)
    result = pytester.runpytest(f"--agentreplay-mode={mode}", "-p", "no:cacheprovider", "-rf")
    reached = counters.reached()
    assert reached == {"http": 0, "ipv6": 0, "udp": 0}, reached
    # Every channel swallowed its error, yet every test failed, and for the guard's reason.
    result.assert_outcomes(failed=CHANNEL_NAMES)
    failures = _failures_by_channel(result)
    assert len(failures) == CHANNEL_NAMES, sorted(failures)
    for channel, text in failures.items():
        assert any(t in text for t in BLOCKED_TEXT), (channel, text[-2000:])
    for channel in ("subprocess-python", "os.system-python", "os.fork", "multiprocessing-fork"):
        assert "was refused network access" in failures[channel], channel
    for channel in ("multiprocessing-spawn", "multiprocessing-forkserver"):
        assert "was refused network access" in failures[channel], channel
    assert "MSG_FASTOPEN" in failures["tcp-fastopen"]
    assert "socket.sendmsg" in failures["udp.sendmsg"]


def test_audit_mode_refuses_channels_opened_by_fixtures(
    pytester: pytest.Pytester, counters: Counters, _recordings: dict[str, Path]
) -> None:
    _lab(pytester, counters, _recordings, AUDIT_TEST)
    result = pytester.runpytest("--agentreplay-mode=audit", "-p", "no:cacheprovider", "-q")
    reached = counters.reached()
    assert reached == {"http": 0, "ipv6": 0, "udp": 0}, reached
    # Every channel fails its test, for the guard's reason: a refusal the fixture swallowed is raised at
    # the end of the run (TestRun.end runs finish_replay before its audit branch returns).
    result.assert_outcomes(failed=CHANNEL_NAMES)
    failures = _failures_by_channel(result)
    assert len(failures) == CHANNEL_NAMES, sorted(failures)
    for channel, text in failures.items():
        assert any(t in text for t in BLOCKED_TEXT), (channel, text[-2000:])


def test_allowed_hosts_keep_working_by_name(pytester: pytest.Pytester, counters: Counters) -> None:
    pytester.makepyfile(
        test_allowed=f"""
import http.client, socket, subprocess, sys

CHILD = "import http.client; c = http.client.HTTPConnection('localhost', {counters.port}, timeout=5); " \\
    "c.request('GET', '/tools/weather?city=child'); assert c.getresponse().status == 200"

def test_allowed(agent_replay):
    c = http.client.HTTPConnection("localhost", {counters.port}, timeout=5)
    c.request("GET", "/tools/weather?city=parent")
    assert c.getresponse().status == 200
    assert socket.gethostbyname("localhost") == "127.0.0.1"
    subprocess.run([sys.executable, "-c", CHILD], check=True, timeout=60)
"""
    )
    pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    before = len(counters.http.log)
    result = pytester.runpytest("--agentreplay-allow-hosts=localhost", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert len(counters.http.log) - before == 2  # the test's and its child's


# -- the pure decision -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "address", "allow", "allowed"),
    [
        (socket.AF_INET, ("203.0.113.5", 80), [[]], False),
        (socket.AF_INET6, ("::1", 80, 0, 0), [[]], False),
        (socket.AF_INET6, ("::1", 80, 0, 0), [["loopback"]], True),
        (socket.AF_INET, ("127.0.0.1", 80), [["localhost"]], False),  # by name, not by address
        (None, ("localhost", 80), [["localhost"]], True),
        (None, ("api.example.com", 443), [["*.example.com"]], True),
        (None, ("api.example.com", 443), [["example.org"], ["api.example.com"]], True),
        (socket.AF_UNIX, "/tmp/sock", [[]], True),
        (socket.AF_INET, None, [[]], True),  # a send on a socket connected through the guard
        (socket.AF_INET, ("127.0.0.1", 80), [], True),  # no replay run: nothing to guard
        (getattr(socket, "AF_PACKET", 17), ("eth0", 0x0800), [["loopback"]], False),
        (socket.AF_INET, (b"203.0.113.5", 80), [["203.0.113.5"]], True),
    ],
)
def test_decide(family: int | None, address: object, allow: list[list[str]], allowed: bool) -> None:
    assert guard.decide(family, address, allow).allowed is allowed


def test_decide_remembers_resolutions_and_deliberate_live_calls() -> None:
    resolved = {"127.0.0.1": "localhost"}
    assert guard.decide(socket.AF_INET, ("127.0.0.1", 80), [["localhost"]], resolved=resolved).allowed
    verdict = guard.decide(socket.AF_INET, ("127.0.0.1", 80), [[]], resolved=resolved)
    assert not verdict.allowed and verdict.destination == "127.0.0.1:80 (resolved from localhost)"
    assert guard.decide(None, ("api.openai.com", 443), [[]], permitted=["api.openai.com"]).allowed


def test_local_lookups_pass_but_connections_are_still_checked() -> None:
    assert guard.resolution_is_local("localhost", "vm")
    assert guard.resolution_is_local("127.0.0.1", "vm")
    assert guard.resolution_is_local("VM", "vm")
    assert not guard.resolution_is_local("api.example.com", "vm")


# -- in-process: resolvers, threads, capture_run, isolation ----------------------------------------------


def replay(settings: dict[str, object] | None = None) -> run_in:
    return run_in("regression", recorded=MemoryCassette([]), settings=settings, cassette="cassettes/t.json")


@pytest.mark.parametrize("installed_before", [False, True], ids=["guard-new", "guard-installed-already"])
def test_refused_lookups_never_reach_the_resolver(
    monkeypatch: pytest.MonkeyPatch, installed_before: bool
) -> None:
    asked: list[str] = []
    me = threading.get_ident()

    def fake(name: str) -> Callable[..., object]:
        def resolver(host: object, *args: object) -> object:
            if threading.get_ident() == me:  # a thread another test left running may resolve what it may
                asked.append(name)
            raise OSError("the fake resolver was reached")

        return resolver

    with contextlib.ExitStack() as stack:
        if installed_before:  # another run's install (or a thread another test left running) keeps it
            stack.enter_context(replay())
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
            if guard.runs.PATCHES.patched:
                # The fakes go under the patches, where the guard calls through to the resolver. Patched is
                # not installed(): a thread an earlier test left running keeps the patches with no install.
                monkeypatch.setitem(guard.runs.ORIGINALS, name, fake(name))
                continue
            monkeypatch.setattr(_socket, name, fake(name))
            if name != "getaddrinfo":
                monkeypatch.setattr(socket, name, getattr(_socket, name))
        with replay() as ctx:
            for call in (
                lambda: socket.getaddrinfo("api.example.com", 443),
                lambda: _socket.getaddrinfo("api.example.com", 443),
                lambda: socket.gethostbyname("api.example.com"),
                lambda: socket.gethostbyname_ex("api.example.com"),
                lambda: socket.gethostbyaddr("203.0.113.5"),
                lambda: socket.getnameinfo(("203.0.113.5", 80), 0),
                lambda: socket.create_connection(("api.example.com", 443), timeout=1),
            ):
                with pytest.raises(NetworkBlockedError):
                    call()
    assert asked == []
    # Each refusal is kept on the run; a refusal from another thread of this process (a thread an earlier
    # test left running) is kept on it too, so only this thread's are counted.
    here = f"thread: {threading.current_thread().name}"
    mine = [f for f in ctx.failures if here in getattr(f, "evidence", ())]
    assert len(mine) == 7, [str(f) for f in ctx.failures]


def test_a_thread_that_outlives_its_test_stays_guarded_and_is_reported(counters: Counters) -> None:
    guard.stray_refusals()
    go = threading.Event()
    outcome: list[BaseException] = []

    def late() -> None:
        go.wait(10)
        try:
            http.client.HTTPConnection("127.0.0.1", counters.port, timeout=5).request("GET", "/late")
        except BaseException as exc:  # the agent's thread swallows it
            outcome.append(exc)

    with replay({"nodeid": "tests/test_agent.py::test_late"}):
        thread = threading.Thread(target=late, name="late-worker")
        thread.start()
    assert not guard.installed(), "the test's install was released"
    go.set()
    thread.join(10)
    assert counters.reached()["http"] == 0
    assert outcome and isinstance(outcome[0], NetworkBlockedError)
    strays = guard.stray_refusals()
    assert len(strays) == 1 and strays[0].startswith("tests/test_agent.py::test_late: thread 'late-worker'")
    assert "after the test ended" in strays[0]
    assert guard.stray_refusals() == []  # reported once
    # With the thread gone, the patches are removed (unless another test's thread still runs).
    assert not guard.runs.PATCHES.patched or guard.installed() or guard.runs.stray_threads_alive()


def test_capture_run_inside_a_replaying_test_keeps_the_guard(tmp_path: Path, counters: Counters) -> None:
    import httpx  # optional: a dev dependency, as every intercepted client

    url = f"http://127.0.0.1:{counters.port}/tools/weather?city=Oslo"
    with replay() as ctx, capture_run(tmp_path / "prod.json", agent="prod") as captured:
        assert captured is ctx
        for call in (lambda: httpx.get(url, timeout=5), lambda: urllib.request.urlopen(url, timeout=5)):
            with contextlib.suppress(Exception):  # swallowed by the agent
                call()
    assert counters.reached()["http"] == 0
    assert len(ctx.failures) == 2
    assert not (tmp_path / "prod.json").exists(), "a replay must not write a production capture"


def test_capture_run_outside_tests_still_captures(tmp_path: Path) -> None:
    with capture_run(tmp_path / "prod.json", intercept_http=False) as ctx:
        assert ctx.mode == "capture"
    assert (tmp_path / "prod.json").exists()


def test_forkserver_children_follow_the_current_run_not_the_first(counters: Counters) -> None:
    # The forkserver is started once and shared: its children must be guarded exactly while a run is.
    ctx_mp = multiprocessing.get_context("forkserver")
    code = (
        f"import http.client; c = http.client.HTTPConnection('127.0.0.1', {counters.port}, timeout=5); "
        "c.request('GET', '/tools/weather?city=fs'); c.getresponse()"
    )
    with replay() as ctx:
        p = ctx_mp.Process(target=exec, args=(code,))
        p.start()
        p.join(60)
        assert p.exitcode != 0
    assert len(guard.collect_child_refusals(ctx)) == 1
    p = ctx_mp.Process(target=exec, args=(code,))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and counters.reached()["http"] == 1


# -- multiprocessing, imported only when the agent imports it ------------------------------------------
#
# Importing multiprocessing costs milliseconds of CPU that most replaying tests never need: the guard
# patches multiprocessing.spawn only once something imports it. Each test runs in a fresh interpreter, where
# nothing has imported multiprocessing before the guard installs.


def _in_fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter (this directory on its path, no guard inherited); its output."""
    prelude = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "assert 'multiprocessing' not in sys.modules, 'imported before the guard: the test proves nothing'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != guard.ENV_VAR}
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_installing_the_guard_does_not_import_multiprocessing() -> None:
    out = _in_fresh_python(
        """
        from servers import MemoryCassette, run_in
        from pytest_agentreplay import guard

        uninstall = guard.install()
        print("install:", "multiprocessing" in sys.modules)
        uninstall()
        with run_in("regression", recorded=MemoryCassette([]), cassette="cassettes/t.json"):
            print("replay:", "multiprocessing" in sys.modules)
        print("after:", "multiprocessing" in sys.modules)
        """
    )
    assert out.splitlines() == ["install: False", "replay: False", "after: False"]


def test_multiprocessing_imported_during_a_replay_still_hands_the_guard_over(counters: Counters) -> None:
    out = _in_fresh_python(
        f"""
        from servers import MemoryCassette, run_in
        from pytest_agentreplay import guard

        CODE = (
            "import http.client; c = http.client.HTTPConnection('127.0.0.1', {counters.port}, timeout=5); "
            "c.request('GET', '/tools/weather?city=lazy'); c.getresponse()"
        )
        # A spawn child also gets the guard through the environment: withhold that (as from a forkserver),
        # so that only the preparation data of the lazily patched multiprocessing.spawn can carry it.
        guard.children._SERVER_COMMANDS = (*guard.children._SERVER_COMMANDS, "multiprocessing.spawn")
        with run_in("regression", recorded=MemoryCassette([]), cassette="cassettes/t.json") as ctx:
            import multiprocessing
            import multiprocessing.spawn

            print("handover:", "pytest_agentreplay_guard" in multiprocessing.spawn.get_preparation_data("x"))
            for method in ("spawn", "forkserver"):
                p = multiprocessing.get_context(method).Process(target=exec, args=(CODE,))
                p.start()
                p.join(60)
                print(method, "exit code:", p.exitcode)
        print("refused children:", len(guard.collect_child_refusals(ctx)))
        """
    )
    assert counters.reached()["http"] == 0
    assert out.splitlines() == [
        "handover: True",
        "spawn exit code: 1",
        "forkserver exit code: 1",
        "refused children: 2",
    ]


def test_uninstall_leaves_no_hook_and_the_original_spawn_function() -> None:
    out = _in_fresh_python(
        """
        import importlib
        import os

        from pytest_agentreplay.core.patching import AfterImport
        from pytest_agentreplay import guard

        patched = guard.children._patched_get_preparation_data

        def hooks():
            return sum(isinstance(f, AfterImport) for f in sys.meta_path)

        def state(spawn):
            f = spawn.get_preparation_data
            genuine = (
                f.__qualname__ == "get_preparation_data"
                and f.__code__.co_filename.endswith(os.path.join("multiprocessing", "spawn.py"))
            )
            loaders = (spawn.__loader__, spawn.__spec__.loader)
            clean = not any(type(loader).__module__ == AfterImport.__module__ for loader in loaders)
            return f"hooks={hooks()} genuine={genuine} clean_loader={clean}"

        uninstall = guard.install()
        print("installed: hooks", hooks())
        uninstall()
        print("removed: hooks", hooks(), guard.runs.PATCHES.patched, "multiprocessing" in sys.modules)

        uninstall = guard.install()
        import multiprocessing.spawn as spawn
        print("imported:", spawn.get_preparation_data is patched)
        uninstall()
        print("uninstalled:", state(spawn))
        importlib.reload(spawn)  # the module's loader is the genuine one again: a reload patches nothing
        print("reloaded:", state(spawn))

        uninstall = guard.install()  # multiprocessing imported in between: patched at once
        print("again:", spawn.get_preparation_data is patched, "hooks", hooks())
        importlib.reload(spawn)  # run again while installed: patched again, and restored to its new function
        print("reloaded again:", spawn.get_preparation_data is patched)
        latest = guard.runs.ORIGINALS["get_preparation_data"]
        uninstall()
        print("uninstalled again:", state(spawn), spawn.get_preparation_data is latest)
        """
    )
    assert out.splitlines() == [
        "installed: hooks 1",
        "removed: hooks 0 False False",
        "imported: True",
        "uninstalled: hooks=0 genuine=True clean_loader=True",
        "reloaded: hooks=0 genuine=True clean_loader=True",
        "again: True hooks 1",
        "reloaded again: True",
        "uninstalled again: hooks=0 genuine=True clean_loader=True True",
    ]


def test_a_module_imported_again_while_installed_is_patched_again() -> None:
    # pytester drops the modules an inner session imported first: the next session imports them anew,
    # or (the package kept, the submodule dropped) finds the dropped one as the package's attribute.
    out = _in_fresh_python(
        """
        from pytest_agentreplay import guard

        def drop(prefix):
            for name in [n for n in sys.modules if n.startswith(prefix)]:
                del sys.modules[name]

        def ours(module):
            return module.get_preparation_data is guard.children._patched_get_preparation_data

        for imported_before in (False, True):
            if imported_before:
                import multiprocessing.spawn
            uninstall = guard.install()
            import multiprocessing.spawn as first

            drop("multiprocessing")
            import multiprocessing.spawn as second

            print(imported_before, second is not first, ours(first), ours(second))
            uninstall()
            print(imported_before, ours(first), ours(second))
            drop("multiprocessing")

        import multiprocessing.spawn as kept

        drop("multiprocessing.spawn")
        uninstall = guard.install()
        from multiprocessing import spawn  # what popen_forkserver does: the package's attribute

        print("attribute:", spawn is kept, ours(spawn))
        uninstall()
        print("attribute:", ours(spawn))
        """
    )
    assert out.splitlines() == [
        "False True True True",
        "False False False",
        "True True True True",
        "True False False",
        "attribute: True True",
        "attribute: False",
    ]


# -- non-Python children: network namespaces -----------------------------------------------------------


def _can_isolate() -> bool:
    return sys.platform.startswith("linux") and guard.isolation.NAMESPACES.unshare_flags() is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux only")
def test_isolated_children_reach_nothing_even_without_python(counters: Counters) -> None:
    if not _can_isolate():
        pytest.skip("this machine cannot create network namespaces")
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    url = f"http://127.0.0.1:{counters.port}/tools/weather?city=curl"
    with replay({"isolate_subprocesses": True}):
        # Programs that are not Python, started through subprocess and through os.system.
        assert subprocess.run([curl, "-s", "-m", "5", url], capture_output=True).returncode != 0
        assert os.system(f"{curl} -s -m 5 {url} >/dev/null") != 0
    assert counters.reached() == {"http": 0, "ipv6": 0, "udp": 0}
    # Outside a replaying run nothing is isolated.
    assert subprocess.run([curl, "-s", "-m", "5", url], capture_output=True).returncode == 0
    assert counters.reached()["http"] == 1


def test_isolation_fails_clearly_where_namespaces_are_impossible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard.isolation.NAMESPACES, "probed", True)
    monkeypatch.setattr(guard.isolation.NAMESPACES, "flags", None)
    settings = {"isolate_subprocesses": True, "nodeid": "t.py::t"}
    with replay(settings) as ctx, pytest.raises(ConfigError) as info:
        subprocess.run(["true"])
    text = str(info.value)
    assert "cannot start a child in a new network namespace" in text and "How to fix:" in text
    assert ctx.failures


# -- the start-up hook ----------------------------------------------------------------------------------


def test_the_start_up_hook_is_installed_and_never_breaks_python() -> None:
    pth = Path(sysconfig.get_paths()["purelib"]) / "pytest_agentreplay_guard.pth"
    assert pth.is_file(), "reinstall the package (pip install -e .): the .pth start-up hook is missing"
    for value in ("{not json", '{"runs": 5}', ""):
        env = {**os.environ, guard.ENV_VAR: value}
        out = subprocess.run(
            [sys.executable, "-c", "print('alive')"], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0 and out.stdout == "alive\n" and not out.stderr, (value, out)


# The line a .pth written by an install made before the guard moved to its own folder still runs.
LEGACY_HOOK = (
    'import os, sys; exec("try:\\n from pytest_agentreplay.http import childguard\\n childguard.start()\\n'
    'except Exception:\\n pass") if os.environ.get("PYTEST_AGENTREPLAY_GUARD") else None'
)
SHIPPED_HOOK = (Path(__file__).parent.parent / "pytest_agentreplay_guard.pth").read_text("utf-8").strip()


@pytest.mark.parametrize("hook", [SHIPPED_HOOK, LEGACY_HOOK], ids=["shipped", "legacy"])
def test_the_start_up_hook_line_guards_a_python_child(hook: str) -> None:
    # -S: no site-packages .pth runs, so only ``hook`` can install the guard in the child.
    child = (
        hook
        + "\nimport socket\nfrom pytest_agentreplay import guard\nprint('installed:', guard.installed())\n"
        "try:\n    socket.create_connection(('api.example.com', 443), timeout=5)\n"
        "except Exception as e:\n    print('refused:', type(e).__name__)\n"
    )
    root = str(Path(__file__).parent.parent)
    with replay({"nodeid": "t.py::t"}) as ctx:
        env = {**os.environ, guard.ENV_VAR: guard.snapshot() or "", "PYTHONPATH": root}
        out = subprocess.run([sys.executable, "-S", "-c", child], env=env, capture_output=True, text=True)
    assert out.stdout.splitlines() == ["installed: True", "refused: NetworkBlockedError"], out
    refusals = guard.collect_child_refusals(ctx)
    assert len(refusals) == 1 and "api.example.com:443" in str(refusals[0])


LOADED = "import sys; print(any(m.startswith('pytest_agentreplay') for m in sys.modules))"


def test_the_start_up_hook_costs_nothing_when_unset() -> None:
    env = {k: v for k, v in os.environ.items() if k != guard.ENV_VAR}
    out = subprocess.run(
        [sys.executable, "-c", LOADED],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False"


def test_children_of_a_non_replaying_process_are_untouched(counters: Counters) -> None:
    start = time.monotonic()
    code = (
        f"import http.client; c = http.client.HTTPConnection('127.0.0.1', {counters.port}, timeout=5); "
        "c.request('GET', '/tools/weather?city=free'); c.getresponse()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert counters.reached()["http"] == 1
    assert time.monotonic() - start < 30


def test_without_a_patchable_c_type_a_guarded_subclass_is_handed_out() -> None:
    """The fallback takes the process-wide socket gate away and puts it back: run in a fresh interpreter,
    where no earlier test's lingering guard or thread decides what it sees."""
    plugins_off = ["-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", f"{__file__}::test_fallback_in_a_fresh_process", "-q", *plugins_off],
        env={**os.environ, "AGENTREPLAY_FALLBACK_CHILD": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


@pytest.mark.skipif(
    not os.environ.get("AGENTREPLAY_FALLBACK_CHILD"), reason="run by the test above, in a fresh interpreter"
)
def test_fallback_in_a_fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def immutable(*args: object) -> None:
        raise TypeError("cannot set attribute of immutable type")

    original = _socket.socket
    check = socket_gate.GATE.check
    # The plugin put the gate in place when it loaded: take it away, so the guard's install puts it back.
    socket_gate.uninstall()
    try:
        monkeypatch.setattr(socket_gate, "set_type_attribute", immutable)
        with replay():
            raw: Any = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
            for sock in (raw, socket.socket()):
                with pytest.raises(NetworkBlockedError):
                    sock.connect(("203.0.113.5", 80))
                sock.close()
        assert _socket.socket is original and "connect" not in socket.socket.__dict__
    finally:
        monkeypatch.undo()
        socket_gate.GATE.keep()
        socket_gate.GATE.check = check
    assert socket_gate.GATE.kept
    assert _socket.socket.__dict__["connect"] is socket_gate._SOCKET_METHODS["connect"]
