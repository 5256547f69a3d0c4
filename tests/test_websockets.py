"""WebSocket clients (websockets sync and asyncio, httpx-ws) recorded against a local WebSocket service in an
inner pytest session, then replayed with the service stopped: no connection, the recorded messages served,
the agent's sent messages compared."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("websockets")
pytest.importorskip("httpx_ws")

from frameworks_lab import preload
from ws_servers import WebSocketServer

preload("websockets.sync.client", "websockets.asyncio.client", "httpx_ws", "httpx")

SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"

KIT = r"""
import asyncio
import json
import os

import httpx
from httpx_ws import aconnect_ws, connect_ws
from websockets.asyncio.client import connect as aconnect
from websockets.sync.client import connect

HEADERS = {"Authorization": "Bearer " + os.environ.get("WS_SECRET", "")}


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def question():
    return {"ask": "status", "order": "A2" if "changed" in variant() else "A1"}


def sync_agent(url):
    out = []
    with connect(url + "/echo", additional_headers=HEADERS) as ws:
        ws.send(json.dumps(question()))
        out.append(json.loads(ws.recv()))
        ws.send(b"\x00\x01\xff")
        out.append(ws.recv())
        if "extra" in variant():
            ws.send("one more")
        if "timeout" in variant():
            try:
                ws.recv(timeout=0.2)
            except TimeoutError:
                out.append("timed out")
    with connect(url + "/stream") as ws:
        ws.send("go")
        try:
            for message in ws:
                out.append(json.loads(message)["delta"])
        except Exception as exc:  # the server closes with 4001
            out.append((type(exc).__name__, ws.close_code, ws.close_reason))
    return out


async def async_agent(url):
    out = []
    async with aconnect(url + "/echo", additional_headers=HEADERS) as ws:
        await ws.send(json.dumps(question()))
        out.append(json.loads(await ws.recv()))
        await ws.send(b"\x00\x01\xff")
        out.append(await ws.recv())
    async with aconnect(url + "/stream") as ws:
        await ws.send("go")
        try:
            async for message in ws:
                out.append(json.loads(message)["delta"])
        except Exception as exc:
            out.append((type(exc).__name__, ws.close_code, ws.close_reason))
    return out


def httpx_agent(url):
    http = url.replace("ws://", "http://")
    out = []
    with httpx.Client() as client:
        with connect_ws(http + "/echo", client, headers=HEADERS) as ws:
            ws.send_json(question())
            out.append(ws.receive_json())
            ws.send_bytes(b"\x00\x01\xff")
            out.append(ws.receive_bytes())
    return out


async def ahttpx_agent(url):
    http = url.replace("ws://", "http://")
    out = []
    async with httpx.AsyncClient() as client:
        async with aconnect_ws(http + "/stream", client) as ws:
            await ws.send_text("go")
            try:
                while True:
                    out.append(json.loads(await ws.receive_text())["delta"])
            except Exception as exc:
                out.append((type(exc).__name__, exc.code, exc.reason))
    return out


def run(kind, url):
    if kind == "sync":
        return sync_agent(url)
    if kind == "async":
        return asyncio.run(async_agent(url))
    if kind == "httpx":
        return httpx_agent(url) + asyncio.run(ahttpx_agent(url))
    raise ValueError(kind)
"""

INNER_TEST = r"""
import json
import os

import wskit


def test_agent(agent_replay):
    out = wskit.run(os.environ["WS_KIND"], os.environ["WS_URL"])
    print("OUT=" + json.dumps(out, default=repr))
"""


class WsLab:
    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.server = WebSocketServer().start()
        self.url = self.server.url
        monkeypatch.setenv("WS_KIND", kind)
        monkeypatch.setenv("WS_URL", self.url)
        monkeypatch.setenv("WS_SECRET", SECRET)

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_agent.json"

    def run(self, *args: str, variant: str = "") -> pytest.RunResult:
        self.monkeypatch.setenv("AGENT_VARIANT", variant)
        return self.pytester.runpytest("-p", "no:cacheprovider", "-s", *args)

    def record(self, variant: str = "") -> list[Any]:
        result = self.run("--agentreplay-record=all", variant=variant)
        result.assert_outcomes(passed=1)
        return _out(result)

    def events(self) -> list[dict[str, Any]]:
        return list(json.loads(self.cassette.read_text())["events"])


def _out(result: pytest.RunResult) -> list[Any]:
    line = next(line for line in result.outlines if "OUT=" in line)
    return list(json.loads(line.split("OUT=", 1)[1]))


@pytest.fixture
def make_lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    pytester.makepyfile(wskit=KIT, test_agent=INNER_TEST)
    pytester.syspathinsert()
    labs: list[WsLab] = []

    def make(kind: str) -> WsLab:
        lab = WsLab(pytester, monkeypatch, kind)
        labs.append(lab)
        return lab

    try:
        yield make
    finally:
        for lab in labs:
            lab.server.stop()
        sys.modules.pop("wskit", None)


def _messages(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for event in events:
        data = event.get("data", {})
        if data.get("transport") != "websocket":
            continue
        ref = event.get("input_ref") or event.get("output_ref") or {}
        out.append(
            (data["connection"], data["method"], data.get("index"), ref.get("inline") or data.get("close"))
        )
    return out


EXPECTED_ECHO = [
    {"echo": {"ask": "status", "order": "A1"}, "n": 1},
    repr(b"\xff\x01\x00"),
]
EXPECTED_STREAM = ["part 0", "part 1", "part 2"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_websockets_record_then_replay_offline(make_lab: Any, kind: str) -> None:
    lab = make_lab(kind)
    recorded = lab.record()
    assert recorded == [*EXPECTED_ECHO, *EXPECTED_STREAM, ["ConnectionClosedError", 4001, "done"]]
    events = lab.events()
    handshakes = [e for e in events if e["type"] == "http" and e["data"].get("status") == 101]
    assert [h["input_ref"]["inline"]["url"] for h in handshakes] == [lab.url + "/echo", lab.url + "/stream"]
    assert _messages(events) == [
        (0, "SEND", 0, {"json": {"ask": "status", "order": "A1"}, "format": "spaced"}),
        (0, "RECEIVE", 0, {"json": {"echo": {"ask": "status", "order": "A1"}, "n": 1}, "format": "spaced"}),
        (0, "SEND", 1, {"base64": "AAH/"}),
        (0, "RECEIVE", 1, {"base64": "/wEA"}),
        (0, "CLOSE", None, {"code": 1000, "reason": ""}),
        (1, "SEND", 0, {"text": "go"}),
        *((1, "RECEIVE", n, {"json": {"delta": f"part {n}", "n": n}, "format": "spaced"}) for n in range(3)),
        (1, "CLOSE", None, {"code": 4001, "reason": "done"}),
    ]
    assert lab.server.connections == 2
    # The credential in the handshake header is in no byte written (cassette and blob store).
    assert lab.server.headers[0]["authorization"] == "Bearer " + SECRET
    for path in lab.cassette.parent.parent.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    lab.server.stop()
    result = lab.run()
    result.assert_outcomes(passed=1)
    assert _out(result) == recorded
    assert lab.server.connections == 2  # nothing reached the (stopped) server, not even a refused attempt


def test_httpx_ws_record_then_replay_offline(make_lab: Any) -> None:
    lab = make_lab("httpx")
    recorded = lab.record()
    assert recorded == [*EXPECTED_ECHO, *EXPECTED_STREAM, ["WebSocketDisconnect", 4001, "done"]]
    events = lab.events()
    # One handshake per connection (recorded by the websocket adapter, not a second time by httpx's).
    handshakes = [e for e in events if e["type"] == "http" and "transport" not in e["data"]]
    assert [h["data"]["status"] for h in handshakes] == [101, 101]
    assert [m[1] for m in _messages(events)] == [
        "SEND", "RECEIVE", "SEND", "RECEIVE", "CLOSE", "SEND", "RECEIVE", "RECEIVE", "RECEIVE", "CLOSE",
    ]  # fmt: skip
    assert lab.server.connections == 2

    lab.server.stop()
    result = lab.run()
    result.assert_outcomes(passed=1)
    assert _out(result) == recorded
    assert lab.server.connections == 2


@pytest.mark.parametrize("kind", ["sync", "async", "httpx"])
def test_changed_sent_message_fails_naming_url_and_index(make_lab: Any, kind: str) -> None:
    lab = make_lab(kind)
    lab.record()
    lab.server.stop()
    result = lab.run(variant="changed")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "WebSocket message 0 sent to" in out and "/echo differs from the recording" in out
    assert '"order": "A2"' in out


def test_extra_sent_message_fails(make_lab: Any) -> None:
    lab = make_lab("sync")
    lab.record()
    lab.server.stop()
    result = lab.run(variant="extra")
    result.assert_outcomes(failed=1)
    assert "WebSocket message 2 sent to" in result.stdout.str()
    assert "is not in the recording" in result.stdout.str()


def test_recorded_timeout_is_served_again(make_lab: Any) -> None:
    lab = make_lab("sync")
    recorded = lab.record(variant="timeout")
    assert "timed out" in recorded
    assert any(e["data"].get("timeout") for e in lab.events())
    lab.server.stop()
    result = lab.run(variant="timeout")
    result.assert_outcomes(passed=1)
    assert _out(result) == recorded


def test_unrecorded_connection_is_refused_like_http(make_lab: Any, pytester: pytest.Pytester) -> None:
    lab = make_lab("sync")
    lab.record()
    lab.server.stop()
    # The same agent against another URL: no recorded handshake matches it.
    lab.monkeypatch.setenv("WS_URL", lab.url.rsplit(":", 1)[0] + ":9")
    result = lab.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "closest recorded:" in out and "unmatched-call" in out  # reported as an unmatched HTTP call
    assert "no recorded HTTP exchange matches GET ws://127.0.0.1:9/echo" in out
    assert lab.server.connections == 2


def test_websockets_keeps_the_real_clock() -> None:
    patches = importlib.import_module("pytest_agentreplay.runtime.patches")
    assert patches._clock_excluded("websockets.asyncio.connection")
    assert patches._clock_excluded("httpx_ws._api")
