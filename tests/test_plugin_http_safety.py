"""Replay through pytest: secrets in live requests never leak into messages; allowed hosts go live."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

SECRET = "supersecretvalue123"


class _Echo(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Echo.hits = 0
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def assert_no_secret_written(pytester: pytest.Pytester) -> None:
    written = [p for p in pytester.path.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert any(p.suffix == ".xml" for p in written) and any("cassettes" in p.parts for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path


def test_secret_query_parameter_replays_and_never_reaches_output(
    pytester: pytest.Pytester, echo_port: int
) -> None:
    pytester.makepyfile(
        test_q=f"""
import httpx

def test_q(agent_replay):
    r = httpx.get("http://127.0.0.1:{echo_port}/q?api_key={SECRET}&page=2")
    assert r.json() == {{"ok": True}}
"""
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    hits = _Echo.hits
    result = pytester.runpytest("--agentreplay-report=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    assert _Echo.hits == hits, "replay must not reach the service"
    assert_no_secret_written(pytester)


def test_unmatched_request_message_is_redacted(pytester: pytest.Pytester, echo_port: int) -> None:
    pytester.makepyfile(
        test_q=f"""
import httpx

def test_q(agent_replay):
    httpx.get("http://127.0.0.1:{echo_port}/q?page=1")
    if not agent_replay.recording:
        httpx.get("http://127.0.0.1:{echo_port}/other?token={SECRET}")
"""
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    result = pytester.runpytest("--agentreplay-report=report.md", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "no recorded HTTP exchange matches GET" in out
    assert SECRET not in out
    assert "--agentreplay-record=all test_q.py::test_q" in out
    assert_no_secret_written(pytester)


def test_allowed_host_goes_live_in_regression(pytester: pytest.Pytester, echo_port: int) -> None:
    pytester.makepyfile(
        test_live=f"""
import httpx
import pytest

@pytest.mark.agentreplay(allow_hosts=["localhost"])
def test_live(agent_replay):
    assert httpx.get("http://localhost:{echo_port}/health").json() == {{"ok": True}}
"""
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    hits = _Echo.hits
    pytester.runpytest().assert_outcomes(passed=1)
    assert _Echo.hits == hits + 1, "an allowed host is reached live during replay"
