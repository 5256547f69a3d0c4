"""SSE streams: incremental parsing, recording without buffering (tee), replay as a real stream
consumed incrementally, compressed streams and bodies."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from servers import LLMServer, MemoryCassette, ModelReply, http_events, run_in

from pytest_agentreplay.http import bodies, sse
from pytest_agentreplay.http.bodies import SSE
from pytest_agentreplay.http.exchange import HttpResponse


def test_parser_handles_split_crlf_comments_and_multiline_data() -> None:
    raw = b'event: a\r\ndata: {"x":1}\r\n\r\n: keep-alive\ndata: [DONE]\n\nid: 7\ndata: l1\ndata: l2\n\n'
    for size in (1, 2, 3, 7, len(raw)):
        parser = sse.SSEParser()
        events: list[dict[str, Any]] = []
        for i in range(0, len(raw), size):
            events += parser.feed(raw[i : i + size])
        events += parser.finish()
        # ``raw``: an event's exact wire text where rendering it again would differ (CRLF, a comment).
        assert [{k: v for k, v in e.items() if k != "raw"} for e in events] == [
            {"event": "a", "data": {"x": 1}},
            {"data": "[DONE]"},
            {"data": "l1\nl2", "id": "7"},
        ]
        assert b"".join(sse.encode_event(e) for e in events) == raw


def test_unterminated_last_event_is_kept() -> None:
    assert [e["data"] for e in SSE.parse_all(b"data: 1\n\ndata: 2")] == ["1", "2"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"data": st.dictionaries(st.text(max_size=5), json_values, max_size=3)},
            optional={"event": st.from_regex(r"[a-z_.]{1,12}", fullmatch=True)},
        ),
        max_size=6,
    )
)
def test_encode_then_parse_round_trips(events: list[dict[str, Any]]) -> None:
    raw = b"".join(sse.encode_event(e) for e in events)
    parsed = SSE.parse_all(raw)
    assert [{k: v for k, v in e.items() if k not in ("t", "raw")} for e in parsed] == events
    assert b"".join(sse.encode_event(e) for e in parsed) == raw


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_content_decoding_incremental_and_whole(encoding: str) -> None:
    data = b'{"hello": "world"}' * 200
    encoded = bodies.encode_content(data, encoding)
    assert bodies.decode_content(encoded, encoding) == data
    decoder = bodies.Decoder(encoding)
    out = b"".join(decoder.feed(encoded[i : i + 13]) for i in range(0, len(encoded), 13)) + decoder.flush()
    assert out == data


def test_replayed_stream_yields_first_event_before_producing_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx2

    log: list[str] = []
    original = sse.encode_event

    def spying_encode(ev: dict[str, Any]) -> bytes:
        log.append(f"produced {ev['data']['n']}")
        return original(ev)

    sse_format, *others = bodies.FORMATS
    assert sse_format is bodies.SSE
    monkeypatch.setattr(bodies, "FORMATS", (sse_format._replace(encode=spying_encode), *others))
    events = [{"event": "tick", "data": {"n": i}, "t": i / 10} for i in range(5)]
    recorded = MemoryCassette([])
    with run_in("record") as rec_ctx:
        pass
    # Build a recorded read event by hand, the way the recorder would.
    from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
    from pytest_agentreplay.core.events import PayloadRef

    rec_ctx.recorder.emit(
        "http",
        actor="tool",
        event_class="input",
        data={"method": "GET", "url": "https://s.example/ticks"},
        input=PayloadRef(
            inline={"method": "GET", "url": "https://s.example/ticks", "headers": {}, "body": None},
            media_type=HTTP_REQUEST_MEDIA_TYPE,
        ),
        output=PayloadRef(
            inline=HttpResponse(
                200,
                {"content-type": "text/event-stream"},
                {"sse": events, "content_type": "text/event-stream"},
            ).to_payload(),
            media_type=HTTP_RESPONSE_MEDIA_TYPE,
        ),
    )
    recorded = MemoryCassette(rec_ctx.recorder.events)
    with (
        run_in("regression", recorded=recorded),
        httpx2.Client() as client,
        client.stream("GET", "https://s.example/ticks") as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data:"):
                log.append(f"received {line}")
    assert log.index('received data: {"n":0}') < log.index("produced 4")


def test_recording_tees_the_stream_without_buffering_it() -> None:
    """The server holds the rest of the stream until the client has the first event: a recorder
    that buffered the whole stream before handing it on would deadlock here (the gate times out)."""
    openai = pytest.importorskip("openai")
    gate = threading.Event()
    server = LLMServer().start()
    server.queue("chat", ModelReply(text="one two three four five six", gate=gate))
    first_seen_before_gate = False
    try:
        with run_in("record") as ctx:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0, timeout=20)
            text = ""
            for chunk in client.chat.completions.create(model="m", messages=[], stream=True):
                if not gate.is_set():
                    first_seen_before_gate = True
                    gate.set()
                for choice in chunk.choices:
                    text += choice.delta.content or ""
    finally:
        gate.set()
        server.stop()
    assert first_seen_before_gate and text == "one two three four five six"
    (event,) = http_events(ctx)
    stored = event.output_ref.inline["body"]["sse"]
    assert stored[-1]["data"] == "[DONE]"
    times = [ev["t"] for ev in stored]
    assert times == sorted(times) and times[0] < 0.5
    assert event.data["decision"]["text"] == text


def test_stream_delay_is_recorded_in_relative_times() -> None:
    import httpx

    server = LLMServer().start()
    server.queue("messages", ModelReply(text="abc def ghi", delay=0.05))
    try:
        with (
            run_in("record") as ctx,
            httpx.Client() as client,
            client.stream(
                "POST",
                server.url + "/v1/messages",
                json={"model": "c", "stream": True, "messages": [], "max_tokens": 5},
            ) as r,
        ):
            r.read()
    finally:
        server.stop()
    (event,) = http_events(ctx)
    stored = event.output_ref.inline["body"]["sse"]
    assert stored[0]["event"] == "message_start" and stored[-1]["event"] == "message_stop"
    assert stored[-1]["t"] >= 0.05 * (len(stored) - 2)
    assert event.output_ref.inline["body"]["content_type"].startswith("text/event-stream")


STREAMED_SUITE = """
import os
from pathlib import Path

import httpx
import pytest

def _stream(name):
    with httpx.Client() as client, client.stream(
        "POST",
        os.environ["LLM_URL"] + "/v1/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": name}]},
    ) as response:
        # The chunks as the client got them: joined, they are the bytes replay must give back.
        received = b"".join(response.iter_raw())
    phase = "replay" if os.environ.get("PHASE") == "replay" else "record"
    Path(f"{phase}-{name}.bin").write_bytes(received)

@pytest.mark.agentreplay
def test_one():
    _stream("one")

@pytest.mark.agentreplay
def test_two():
    _stream("two")
"""


def test_small_streams_stay_readable_in_the_cassette_and_replay_byte_for_byte(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two streamed tests write two files: their cassettes, each holding its stream event by event (no
    chain of per-event blobs); replay serves the recorded bytes."""
    answers = {
        "one": "The parcel A1002 shipped on Monday and arrives by Thursday.",
        "two": "Your refund of 40 EUR is on its way to the card ending 1234.",
    }
    server = LLMServer().start()
    server.queue("chat", *(ModelReply(text=text) for text in answers.values()))
    monkeypatch.setenv("LLM_URL", server.url)
    pytester.makepyfile(test_streams=STREAMED_SUITE)
    try:
        pytester.runpytest("--agentreplay-record=all", "-p", "no:randomly").assert_outcomes(passed=2)
        files = sorted(
            p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*") if p.is_file()
        )
        assert [f for f in files if f.startswith("cassettes/")] == [
            "cassettes/test_streams/test_one.json",
            "cassettes/test_streams/test_two.json",
        ]
        for name, answer in answers.items():
            text = (pytester.path / f"cassettes/test_streams/test_{name}.json").read_text(encoding="utf-8")
            (event,) = [e for e in json.loads(text)["events"] if e["type"] == "model.call"]
            stored = event["output_ref"]["inline"]["body"]["sse"]
            # Readable: each delta of the answer is in the cassette, with when it arrived.
            deltas = [
                e["data"]["choices"][0]["delta"].get("content") or ""
                for e in stored
                if isinstance(e["data"], dict) and e["data"].get("choices")
            ]
            assert "".join(deltas) == answer and len([d for d in deltas if d]) > 1
            assert all(isinstance(e["t"], float) for e in stored) and stored[-1]["data"] == "[DONE]"
        requests_sent = len(server.log)
        monkeypatch.setenv("PHASE", "replay")
        pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
        assert len(server.log) == requests_sent
    finally:
        server.stop()
    for name in answers:
        recorded = (pytester.path / f"record-{name}.bin").read_bytes()
        assert recorded and (pytester.path / f"replay-{name}.bin").read_bytes() == recorded
