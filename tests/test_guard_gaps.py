"""Issue 26, item 2: no way around the Python guard where the session is not isolated.

Each way around it that the Python guard can reach is tried by an inner pytest session (a real process:
the plugin loads as in a user's run, before the inner conftest is imported) against a server of this test
that counts what reaches it: 0 requests, and the test fails with cause ``network-blocked`` in the terminal
and the JSON report. What the Python guard cannot reach (a ``python -S`` child, a process started before
the session, native networking code) is named in the summary with the advice to isolate. The socket gate's
pass-through and the send checks are also tested directly.
"""

from __future__ import annotations

import _socket
import asyncio
import json
import socket
from collections.abc import Iterator

import pytest
from servers import LLMServer, MemoryCassette, run_in

from pytest_agentreplay import guard
from pytest_agentreplay.core import socket_gate
from pytest_agentreplay.exceptions import NetworkBlockedError
from pytest_agentreplay.intercept import install as _install_interception

# As in test_guard_channels: load the plugin's modules before any inner session (pytester drops what one
# imported first).
_install_interception()()


class Target:
    """The counting end: HTTP requests on 127.0.0.1 (by the ``city`` they name) and UDP datagrams."""

    def __init__(self) -> None:
        self.http = LLMServer().start()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)

    def requests(self) -> list[str]:
        return [r.path for r in self.http.log]

    def datagrams(self) -> int:
        n = 0
        while True:
            try:
                self.udp.recv(65536)
            except BlockingIOError:
                return n
            n += 1

    def close(self) -> None:
        self.http.stop()
        self.udp.close()


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    yield t
    t.close()


CONFTEST = r"""
import http.client
import os
import socket
import subprocess
import sys

import pytest

PORT = {port}
UDP = ("127.0.0.1", {udp_port})


def request(city):
    return ("GET /tools/weather?city=%s HTTP/1.0\r\nHost: x\r\n\r\n" % city).encode()


def http_get(city):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
    c.request("GET", "/tools/weather?city=" + city)
    c.getresponse().read()


def swallowed(fn):
    try:
        fn()
    except Exception:
        pass


# Taken and connected at import, before any test: the plugin has loaded already.
EARLY_CONNECT = socket.socket.connect
PRE = {{how: socket.create_connection(("127.0.0.1", PORT), 5) for how in
        ("send", "sendall", "sendmsg", "sendfile", "allowed")}}
PRE_UDP = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
PRE_UDP.connect(UDP)
# A process started before the session (a stdio helper): out of the guard's reach, named in the summary.
HELPER = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)


@pytest.fixture(scope="session")
def warmed():
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
    c.request("GET", "/tools/weather?city=warm")
    c.getresponse().read()
    return c


@pytest.fixture
def cli():
    swallowed(lambda: http_get("fixture-before"))


@pytest.fixture
def closing():
    yield
    swallowed(lambda: http_get("teardown"))


@pytest.fixture(scope="module")
def module_state():
    swallowed(lambda: http_get("module-fixture"))
"""

GAPS_TEST = r"""
import asyncio
import subprocess
import sys

import pytest
from conftest import EARLY_CONNECT, PORT, PRE, PRE_UDP, request, swallowed

URL = "http://127.0.0.1:%d/tools/weather?city=child-S" % PORT
CHILD = "import urllib.request; urllib.request.urlopen(%r)" % URL


def test_0_warm(warmed):
    # Not replaying: warms the session's keep-alive connection before any guard.
    pass


def test_taken_at_import(agent_replay):
    if agent_replay.recording:
        return
    import socket

    s = socket.socket()
    swallowed(lambda: (EARLY_CONNECT(s, ("127.0.0.1", PORT)), s.sendall(request("taken-at-import"))))


@pytest.mark.parametrize("how", ["send", "sendall", "sendmsg", "sendfile"])
def test_connected_at_import(agent_replay, how, tmp_path):
    if agent_replay.recording:
        return
    sock = PRE[how]
    data = request("pre-" + how)
    if how == "sendmsg":
        swallowed(lambda: sock.sendmsg([data]))
    elif how == "sendfile":
        body = tmp_path / "body"
        body.write_bytes(data)
        with body.open("rb") as f:
            swallowed(lambda: sock.sendfile(f))
    else:
        swallowed(lambda: getattr(sock, how)(data))


def test_udp_connected_at_import(agent_replay):
    if not agent_replay.recording:
        swallowed(lambda: PRE_UDP.send(b"datagram"))


def test_warmed_connection(agent_replay, warmed):
    if agent_replay.recording:
        return

    def post():
        warmed.request("POST", "/tools/tickets", body=b'{"title": "warm"}')
        warmed.getresponse().read()

    swallowed(post)


def test_fixture_before_agent_replay(cli, agent_replay):
    pass


def test_fixture_teardown(agent_replay, closing):
    pass


def test_module_fixture(module_state, agent_replay):
    pass


@pytest.mark.agentreplay(allow_hosts=["127.0.0.1"])
def test_allowed_preconnected(agent_replay):
    if agent_replay.recording:
        return
    PRE["allowed"].sendall(request("allowed-pre"))
    assert PRE["allowed"].recv(100).startswith(b"HTTP/1.")


@pytest.mark.agentreplay(allow_hosts=["127.0.0.1"])
def test_allowed_asyncio(agent_replay):
    if agent_replay.recording:
        return

    async def main():
        reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
        writer.write(request("allowed-asyncio"))
        await writer.drain()
        head = await reader.read(100)
        writer.close()
        return head

    assert asyncio.run(main()).startswith(b"HTTP/1.")


def test_python_S_child(agent_replay):
    # No start-up hook in a -S child: the Python guard cannot reach it (named in the summary).
    if not agent_replay.recording:
        subprocess.run([sys.executable, "-S", "-c", CHILD], timeout=60, capture_output=True)


def test_native_code(agent_replay):
    import grpc  # grpcio's C core opens its connections past Python's socket module
"""

BLOCK_TEST = r"""
from conftest import http_get, swallowed


def test_block_fixture_before(cli):
    pass


def test_block_teardown(closing):
    pass
"""

REFUSED = {
    "test_taken_at_import": "taken-at-import",
    "test_connected_at_import[send]": "pre-send",
    "test_connected_at_import[sendall]": "pre-sendall",
    "test_connected_at_import[sendmsg]": "pre-sendmsg",
    "test_connected_at_import[sendfile]": "pre-sendfile",
    "test_udp_connected_at_import": None,
    "test_warmed_connection": "tickets",
    "test_fixture_before_agent_replay": "fixture-before",
    "test_module_fixture": "module-fixture",
}


def _inner(pytester: pytest.Pytester, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    # Wide enough that pytest's short summary lines carry the guard's headline.
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(CONFTEST.format(port=target.http.port, udp_port=target.udp.getsockname()[1]))
    pytester.makepyfile(test_gaps=GAPS_TEST, test_block=BLOCK_TEST)


def test_every_way_around_the_guard_it_can_reach_is_refused(
    pytester: pytest.Pytester, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    _inner(pytester, target, monkeypatch)
    recorded = pytester.runpytest_subprocess("test_gaps.py", "--agentreplay-record=all", "-p", "no:randomly")
    recorded.assert_outcomes(passed=15)
    before = len(target.requests())
    target.datagrams()
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "test_gaps.py",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-rfE",
        f"--agentreplay-report={report}",
    )
    arrived = [p for p in target.requests()[before:] if "city=warm" not in p]
    # What the guard allowed, and the -S child it cannot reach; nothing else.
    assert sorted(arrived) == sorted(
        [
            "/tools/weather?city=allowed-pre",
            "/tools/weather?city=allowed-asyncio",
            "/tools/weather?city=child-S",
        ]
    ), arrived
    assert target.datagrams() == 0
    result.assert_outcomes(passed=6, failed=len(REFUSED), errors=1)
    out = result.stdout.str()
    for test in REFUSED:
        assert f"FAILED test_gaps.py::{test} - Failed: network access blocked during replay" in out, test
    assert "ERROR test_gaps.py::test_fixture_teardown - Failed: network access blocked during replay" in out
    assert "on a connection opened before the guard applied" in out
    statuses = {s["nodeid"].split("::", 1)[1]: s for s in json.loads(report.read_text())["tests"]}
    for test in (*REFUSED, "test_fixture_teardown"):
        assert statuses[test]["cause"] == "network-blocked", (test, statuses[test])
    # What the Python guard cannot reach is named, with the way to close it.
    summary = out.split("agentreplay guard: not reached by the Python guard", 1)[1]
    assert "-S -c import urllib.request" in summary and "did not run the guard" in summary
    assert "sys.stdin.read()" in summary and "was started before" in summary
    assert "grpcio's C core" in summary
    assert "--agentreplay-isolate=auto" in summary


def test_block_network_guards_every_fixture_of_every_test(
    pytester: pytest.Pytester, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    _inner(pytester, target, monkeypatch)
    result = pytester.runpytest_subprocess(
        "test_block.py", "--agentreplay-block-network", "-p", "no:randomly"
    )
    assert target.requests() == []
    # The fixture set up before anything else fails the set-up; the teardown's call fails the teardown.
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "ERROR test_block.py::test_block_fixture_before - Failed: network access blocked by "
            "--agentreplay-block-network*",
            "ERROR test_block.py::test_block_teardown - Failed: network access blocked by "
            "--agentreplay-block-network*",
        ]
    )


# -- in-process: the gate and the send checks -------------------------------------------------------------


def replay(settings: dict[str, object] | None = None) -> run_in:
    return run_in("regression", recorded=MemoryCassette([]), settings=settings, cassette="cassettes/t.json")


def test_the_gate_is_in_place_from_the_plugin_load_and_passes_through_unarmed() -> None:
    assert socket_gate.GATE.kept
    assert _socket.socket.__dict__["connect"] is socket_gate._SOCKET_METHODS["connect"]
    if not guard.runs.PATCHES.patched:  # another test's thread may keep the guard on
        assert socket_gate.GATE.check is None
    # Unarmed, a method taken now is the gated one, and calls pass straight through.
    a, b = socket.socketpair()
    with a, b:
        send = socket.socket.sendall
        send(a, b"x")
        assert b.recv(1) == b"x"


def test_a_socket_connected_before_the_run_cannot_send_to_a_peer_the_run_does_not_allow() -> None:
    server = LLMServer().start()
    try:
        early = socket.create_connection(("127.0.0.1", server.port), 5)
        with early, replay() as ctx:
            for send in (early.send, early.sendall, lambda data: early.sendmsg([data])):
                with pytest.raises(NetworkBlockedError, match="opened before the guard applied"):
                    send(b"GET /tools/weather?city=early HTTP/1.0\r\n\r\n")
        assert server.log == [] and len(ctx.failures) == 3
    finally:
        server.stop()


def test_allowed_peers_and_local_servers_keep_working_under_the_guard() -> None:
    server = LLMServer().start()
    try:
        early = socket.create_connection(("127.0.0.1", server.port), 5)
        with early, replay({"allow_hosts": ["127.0.0.1"]}) as ctx:
            early.sendall(b"GET /tools/weather?city=allowed HTTP/1.0\r\n\r\n")
            assert early.recv(100).startswith(b"HTTP/1.")

            async def exchange() -> bytes:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(b"GET /tools/weather?city=asyncio HTTP/1.0\r\n\r\n")
                await writer.drain()
                head = await reader.read(100)
                writer.close()
                return head

            assert asyncio.run(exchange()).startswith(b"HTTP/1.")
        assert not ctx.failures
        assert [r.path for r in server.log] == ["/tools/weather?city=allowed", "/tools/weather?city=asyncio"]
    finally:
        server.stop()


def test_a_server_of_this_process_answers_a_connection_it_accepted_during_the_run() -> None:
    # The client connected before the run; the server accepts during it (a run that allows nothing): the
    # server's answer goes out, the pre-connected client's own send does not.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    with listener, socket.create_connection(listener.getsockname(), 5) as client, replay() as ctx:
        conn = listener.accept()[0]
        with conn:
            conn.sendall(b"hello")
            assert client.recv(5) == b"hello"
            with pytest.raises(NetworkBlockedError):
                client.sendall(b"back")
    assert len(ctx.failures) == 1
