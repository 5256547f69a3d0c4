"""gRPC (issue 25): grpcio channels, sync and ``grpc.aio``, recorded and served through the replay policy.

Inner pytest sessions (pytester) run an agent calling the local server of tests/grpc_servers.py in the four
call shapes, through a sync channel made in a fixture before the run starts and an aio channel made inside
it. Recorded, then replayed with the server stopped (a bare listener on its port counts connections): the
same results, no call and no connection; a changed request field fails naming the method; a recorded error
status is raised again; the metadata's secret is in no byte written. The replayed clock stays out of grpc's
deadlines: a replay a day after its recording, with the call sent live, passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("google.protobuf")

from grpc_servers import ConnectionCounter, GrpcServer  # noqa: E402

from pytest_agentreplay.cassette.chain import seal_document  # noqa: E402
from pytest_agentreplay.http.grpc_calls import flavour  # noqa: E402

SECRET = "sekrit-grpc-token-4711"

AGENT = """
import os

import grpc
import grpc.aio
from google.protobuf.struct_pb2 import Struct

SER, DE = Struct.SerializeToString, Struct.FromString
METADATA = (("authorization", "Bearer " + os.environ["GRPC_SECRET"]), ("api-key", os.environ["GRPC_SECRET"]))


def struct(**fields):
    message = Struct()
    message.update(fields)
    return message


def stubs(channel):
    codec = {"request_serializer": SER, "response_deserializer": DE}
    return {
        "search": channel.unary_unary("/qdrant.Points/Search", **codec),
        "upsert": channel.unary_unary("/qdrant.Points/Upsert", **codec),
        "items": channel.unary_stream("/demo.Items/ListItems", **codec),
        "upload": channel.stream_unary("/demo.Items/Upload", **codec),
        "chat": channel.stream_stream("/demo.Items/Chat", **codec),
    }


def plain(message):
    return {k: (list(v) if not isinstance(v, (str, float, bool)) else v) for k, v in message.items()}


def run_sync(s):
    query = os.environ.get("QUERY", "cats")
    out = {}
    hits, call = s["search"].with_call(struct(query=query), timeout=30, metadata=METADATA)
    out["search"] = [dict(h) for h in hits["hits"]]
    out["search_status"] = [call.code().name, list(call.trailing_metadata())]
    out["future"] = [dict(h) for h in s["search"].future(struct(query="dogs"), timeout=30).result()["hits"]]
    out["upsert"] = plain(s["upsert"](struct(points=["p1", "p2"]), metadata=METADATA))
    stream = s["items"](struct(count=3))
    out["items"] = [plain(m) for m in stream] + [stream.code().name]
    out["upload"] = plain(s["upload"](iter([struct(name="a"), struct(name="b")])))
    out["chat"] = [plain(m) for m in s["chat"](iter([struct(text="hi"), struct(text="yo")]))]
    try:
        s["search"](struct(query="missing"))
    except grpc.RpcError as exc:
        out["error"] = [exc.code().name, exc.details(), list(exc.trailing_metadata())]
    return out


async def run_aio(target):
    query = os.environ.get("QUERY", "cats")
    out = {}
    async with grpc.aio.insecure_channel(target) as channel:
        s = stubs(channel)
        call = s["search"](struct(query=query), timeout=30, metadata=METADATA)
        out["search"] = [dict(h) for h in (await call)["hits"]]
        out["search_status"] = [(await call.code()).name, list(await call.trailing_metadata())]
        out["items"] = [plain(m) async for m in s["items"](struct(count=2))]

        async def names():
            yield struct(name="x")
            yield struct(name="y")

        out["upload"] = plain(await s["upload"](names()))
        chat = s["chat"]()
        for text in ("hi", "yo"):
            await chat.write(struct(text=text))
        await chat.done_writing()
        out["chat"] = []
        while (message := await chat.read()) is not grpc.aio.EOF:
            out["chat"].append(plain(message))
        out["chat_status"] = (await chat.code()).name
        try:
            await s["search"](struct(query="missing"))
        except grpc.aio.AioRpcError as exc:
            out["error"] = [exc.code().name, exc.details()]
    return out
"""

CONFTEST = """
import grpc
import pytest

import agent_grpc


@pytest.fixture
def grpc_stubs():
    # Made before the run starts (requested before agent_replay): its multicallables already exist.
    import os

    channel = grpc.insecure_channel(os.environ["GRPC_TARGET"])
    yield agent_grpc.stubs(channel)
    channel.close()
"""

INNER_TEST = """
import asyncio, json, os

import agent_grpc


def _save(name, out):
    with open(os.path.join(os.environ["OUT_DIR"], name), "w") as fh:
        json.dump(out, fh)


def test_sync(grpc_stubs, agent_replay):
    _save("sync.json", agent_grpc.run_sync(grpc_stubs))


def test_aio(agent_replay):
    _save("aio.json", asyncio.run(agent_grpc.run_aio(os.environ["GRPC_TARGET"])))
"""


@dataclass
class Lab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    server: GrpcServer
    out: Path

    def run(self, *args: str, **env: str) -> pytest.RunResult:
        with self.monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def record(self) -> pytest.RunResult:
        result = self.run("--agentreplay-record=all")
        result.assert_outcomes(passed=2)
        return result

    def outputs(self) -> dict[str, Any]:
        return {name: json.loads((self.out / f"{name}.json").read_text()) for name in ("sync", "aio")}

    def cassette(self, test: str) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / f"{test}.json"

    def events(self, test: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = json.loads(self.cassette(test).read_text())["events"]
        return events


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lab]:
    pytester.makepyfile(agent_grpc=AGENT)
    pytester.makepyfile(test_agent=INNER_TEST)
    pytester.makeconftest(CONFTEST)
    pytester.syspathinsert()
    server = GrpcServer().start()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("GRPC_TARGET", server.target)
    monkeypatch.setenv("GRPC_SECRET", SECRET)
    monkeypatch.setenv("OUT_DIR", str(out))
    try:
        yield Lab(pytester, monkeypatch, server, out)
    finally:
        server.stop()
        import sys

        sys.modules.pop("agent_grpc", None)


def _offline(lab: Lab) -> ConnectionCounter:
    """Stop the server; listen on its port to count what still tries to reach it."""
    lab.server.stop()
    return ConnectionCounter(lab.server.port)


def test_all_four_shapes_replay_with_the_server_stopped(lab: Lab) -> None:
    lab.record()
    recorded = lab.outputs()
    calls = sum(lab.server.calls.values())
    assert calls == 12 and lab.server.calls["Search"] == 5
    assert recorded["sync"]["error"][0] == "NOT_FOUND"
    assert recorded["sync"]["items"][-1] == "OK" and recorded["aio"]["chat_status"] == "OK"
    counter = _offline(lab)
    try:
        result = lab.run()
    finally:
        connections = counter.close()
    result.assert_outcomes(passed=2)
    assert lab.outputs() == recorded
    assert sum(lab.server.calls.values()) == calls, "no call reached the server"
    assert connections == 0, "nothing connected to the server's port"


def test_a_recorded_error_status_is_raised_again(lab: Lab) -> None:
    lab.record()
    _offline(lab).close()
    lab.run().assert_outcomes(passed=2)
    out = lab.outputs()
    assert out["sync"]["error"] == [
        "NOT_FOUND",
        "collection for 'missing' not found",
        [["x-reason", "no-such-collection"]],
    ]
    assert out["aio"]["error"] == ["NOT_FOUND", "collection for 'missing' not found"]
    assert out["sync"]["search_status"] == ["OK", [["x-served-by", "points-1"]]]


def test_a_changed_request_field_fails_naming_the_method(lab: Lab) -> None:
    lab.record()
    counter = _offline(lab)
    try:
        result = lab.run("-rA", QUERY="dogs and cats")
    finally:
        connections = counter.close()
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "no recorded HTTP exchange matches POST grpc://" in text
    assert "/qdrant.Points/Search" in text
    assert connections == 0


def test_the_metadata_secret_is_in_no_byte_written(lab: Lab) -> None:
    lab.record()
    written = [p for p in (lab.pytester.path / "cassettes").rglob("*") if p.is_file()]
    assert written
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    search = next(e for e in lab.events("test_sync") if e["type"] == "http")
    assert search["input_ref"]["inline"]["headers"] == {
        "api-key": "[REDACTED]",
        "authorization": "[REDACTED]",
    }


def test_calls_are_classified_by_the_service_table_and_the_method_name(lab: Lab) -> None:
    lab.record()
    events = [e for e in lab.events("test_sync") if e["type"] in ("http", "effect")]
    seen = [
        (e["type"], e["data"]["classification"], e["input_ref"]["inline"]["url"].split("/", 3)[3])
        for e in events
    ]
    assert seen == [
        ("http", "retrieval", "qdrant.Points/Search"),
        ("http", "retrieval", "qdrant.Points/Search"),
        ("effect", "write", "qdrant.Points/Upsert"),
        ("http", "read", "demo.Items/ListItems"),
        ("effect", "write", "demo.Items/Upload"),
        ("effect", "write", "demo.Items/Chat"),
        ("http", "retrieval", "qdrant.Points/Search"),
    ]
    search = events[0]
    # The request's readable view; the response's bytes (served) beside their view.
    assert search["input_ref"]["inline"]["body"]["json"] == {"messages": [{"json": {"query": "cats"}}]}
    (message,) = search["output_ref"]["inline"]["body"]["json"]["messages"]
    assert (
        message["json"] == {"hits": [{"id": 1.0, "score": 0.9, "text": "about cats"}]} and message["base64"]
    )
    failed = events[-1]["output_ref"]["inline"]
    assert failed["status"] == 404 and failed["body"]["json"]["code"] == "NOT_FOUND"


def test_the_default_table_and_the_name_rule() -> None:
    assert flavour("/qdrant.Points/Query") == "retrieval"
    assert flavour("/qdrant.Points/SetPayload") == "write"
    assert flavour("/weaviate.v1.Weaviate/Search") == "retrieval"
    assert flavour("/weaviate.v1.Weaviate/BatchObjects") == "write"
    assert flavour("/milvus.proto.milvus.MilvusService/Insert") == "write"
    assert flavour("/google.cloud.aiplatform.v1.PredictionService/StreamGenerateContent") == "read"
    assert flavour("/shop.Orders/GetOrder") == "read"
    assert flavour("/shop.Orders/ListOrders") == "read"
    assert flavour("/shop.Orders/Getaway") == "write"
    assert flavour("/shop.Orders/CreateOrder") == "write"


def test_the_classification_hook_wins(lab: Lab) -> None:
    lab.pytester.makeconftest(
        CONFTEST
        + """
def pytest_agentreplay_classify_exchange(request, response):
    return "write" if request["url"].endswith("/qdrant.Points/Search") else None
"""
    )
    lab.record()
    kinds = {
        (e["type"], e["input_ref"]["inline"]["url"].rsplit("/", 1)[1]) for e in lab.events("test_sync")[1:-1]
    }
    assert ("effect", "Search") in kinds and ("http", "ListItems") in kinds


# -- the replayed clock stays out of grpc's deadlines ----------------------------------------------

CLOCK_TEST = """
import json, os, time

import grpc
import pytest

import agent_grpc


@pytest.mark.agentreplay(allow_hosts=["127.0.0.1"])
def test_clock(grpc_stubs, agent_replay):
    # The agent's own read (served in replay), then a call sent live with a deadline.
    seen = time.time()
    hits = grpc_stubs["search"](agent_grpc.struct(query="cats"), timeout=30)
    with open(os.path.join(os.environ["OUT_DIR"], "clock.json"), "w") as fh:
        json.dump({"agent_time": seen, "hits": len(hits["hits"])}, fh)
"""


def _recorded_a_day_earlier(path: Path) -> None:
    """Move the recorded clock back one day, as if the cassette had been recorded yesterday (resealed)."""
    doc = json.loads(path.read_text())
    (event,) = [e for e in doc["events"] if e["type"] == "runtime.values"]
    clock = event["data"]["clock"]
    clock["start_us"] -= 86_400_000_000
    clock["start"] = "2000-01-01T00:00:00.000000Z"  # only displayed; start_us is what is served
    path.write_text(json.dumps(seal_document(doc["run"], doc["events"])))


def test_a_replay_a_day_later_sends_grpc_calls_with_real_deadlines(lab: Lab) -> None:
    import time

    lab.pytester.makepyfile(test_agent=CLOCK_TEST)
    lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    recorded_at = json.loads((lab.out / "clock.json").read_text())["agent_time"]
    _recorded_a_day_earlier(lab.cassette("test_clock"))
    calls = lab.server.calls["Search"]
    result = lab.run()
    result.assert_outcomes(passed=1)
    assert lab.server.calls["Search"] == calls + 1, "the call went out (allow_hosts) and met its deadline"
    served = json.loads((lab.out / "clock.json").read_text())["agent_time"]
    assert abs(served - (recorded_at - 86_400)) < 1, "the agent's own read is still served"
    assert served < time.time() - 3600
