"""The official openai and anthropic SDKs (which send through httpx2), recorded against the local
server and replayed with the server stopped: same parsed results, no request reaches the server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer, MemoryCassette, ModelReply, http_events, run_in

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TOOLS_OAI = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOLS_RESP = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
TOOLS_ANT = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def _script(server: LLMServer, endpoint: str) -> None:
    server.queue(
        endpoint,
        ModelReply(text=None, tool_calls=[("get_weather", {"city": "Paris"})]),
        ModelReply(
            text=None, tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
        ),
        ModelReply(text="Sunny in Paris, 21 degrees."),
        ModelReply(text="Streaming: sunny and warm."),
    )


def record_then_replay(endpoint: str, agent: Callable[[str], Any], tmp_path: Path) -> tuple[Any, Any, Any]:
    """Run ``agent`` recording against a live server, then replaying with the server stopped."""
    server = LLMServer().start()
    _script(server, endpoint)
    try:
        with run_in("record") as rec_ctx:
            recorded = agent(server.url)
    finally:
        server.stop()
    seen = len(server.log)
    assert list(rec_ctx.failures) == []
    # Through the real store: save, load, replay from the loaded cassette.
    from pytest_agentreplay.cassette.read import load_cassette
    from pytest_agentreplay.cassette.write import save_cassette

    path = tmp_path / "run.json"
    save_cassette(path, rec_ctx.recorder.run, rec_ctx.recorder.events)
    loaded = load_cassette(path)
    with run_in("regression", recorded=loaded, cassette=str(path)) as rep_ctx:
        replayed = agent(server.url)
    assert list(rep_ctx.failures) == []
    assert len(server.log) == seen, "replay sent a request to the (stopped) server"
    assert replayed == recorded
    rec_events, rep_events = http_events(rec_ctx), http_events(rep_ctx)
    assert [e.data["decision"] for e in rep_events] == [e.data["decision"] for e in rec_events]
    assert [e.data["request_hash"] for e in rep_events] == [e.data["request_hash"] for e in rec_events]
    return recorded, rec_ctx, rep_ctx


def _calls_oai(message: Any) -> list[tuple[str, Any]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]


# -- OpenAI Chat Completions ------------------------------------------------------------------------


def test_openai_chat_sync_plain_and_stream(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        out: list[Any] = []
        for _ in range(3):
            r = client.chat.completions.create(
                model="gpt-4o-mini", messages=USER, tools=TOOLS_OAI, temperature=0.2, seed=7
            )
            out.append(
                (
                    _calls_oai(r.choices[0].message),
                    r.choices[0].message.content,
                    r.choices[0].finish_reason,
                    r.usage.total_tokens if r.usage else None,
                )
            )
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        out.append("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices))
        return out

    recorded, rec_ctx, _ = record_then_replay("chat", agent, tmp_path)
    assert recorded[0][0] == [("get_weather", {"city": "Paris"})]
    assert recorded[2][1] == "Sunny in Paris, 21 degrees."
    assert recorded[3] == "Streaming: sunny and warm."
    first, *_, last = http_events(rec_ctx)
    assert first.type == "model.call" and first.actor == "model" and first.event_class == "decision"
    assert first.data["decoding"] == {"temperature": 0.2, "seed": 7}
    assert first.data["tools_hash"] and last.data["tools_hash"] is None
    assert first.input_ref.data_class == "personal"
    assert last.data["streamed"] is True and last.data["usage"]["total_tokens"] == 18


def test_openai_chat_stream_tool_call_deltas_async(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        async def run() -> Any:
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
            out = []
            for _ in range(4):
                stream = await client.chat.completions.create(
                    model="gpt-4o-mini", messages=USER, tools=TOOLS_OAI, stream=True
                )
                calls: dict[int, dict[str, str]] = {}
                text = ""
                async for chunk in stream:
                    for choice in chunk.choices:
                        text += choice.delta.content or ""
                        for tc in choice.delta.tool_calls or []:
                            slot = calls.setdefault(tc.index, {"name": "", "args": ""})
                            slot["name"] += (tc.function.name or "") if tc.function else ""
                            slot["args"] += (tc.function.arguments or "") if tc.function else ""
                out.append((text, [(c["name"], json.loads(c["args"])) for _, c in sorted(calls.items())]))
            return out

        return asyncio.run(run())

    recorded, rec_ctx, _ = record_then_replay("chat", agent, tmp_path)
    assert recorded[1][1] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    decision = http_events(rec_ctx)[1].data["decision"]
    assert decision["tool_calls"] == [
        {"id": "call_2_0", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "call_2_1", "name": "get_weather", "arguments": {"city": "Lyon"}},
    ]
    assert decision["stop_reason"] == "tool_calls"


# -- OpenAI Responses -------------------------------------------------------------------------------


def test_openai_responses_sync_and_stream(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        out: list[Any] = []
        for _ in range(2):
            r = client.responses.create(model="gpt-5", input=USER, tools=TOOLS_RESP, max_output_tokens=300)
            out.append([(i.name, json.loads(i.arguments)) for i in r.output if i.type == "function_call"])
        r = client.responses.create(model="gpt-5", input="hi")
        out.append(r.output_text)
        deltas = []
        final = None
        with client.responses.stream(model="gpt-5", input="hi") as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
            final = stream.get_final_response()
        out.append(("".join(deltas), final.output_text, final.usage.total_tokens if final.usage else None))
        return out

    recorded, rec_ctx, _ = record_then_replay("responses", agent, tmp_path)
    assert recorded[1] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    assert recorded[3][0] == recorded[3][1] == "Streaming: sunny and warm."
    events = http_events(rec_ctx)
    assert events[0].data["endpoint"] == "responses" and events[0].data["decoding"] == {
        "max_output_tokens": 300
    }
    assert events[3].data["streamed"] is True
    assert events[3].data["decision"]["text"] == "Streaming: sunny and warm."
    assert events[1].data["decision"]["tool_calls"][1]["arguments"] == {"city": "Lyon"}


def test_openai_responses_async_stream(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        async def run() -> Any:
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
            out = []
            for _ in range(4):
                stream = await client.responses.create(
                    model="gpt-5", input=USER, tools=TOOLS_RESP, stream=True
                )
                kinds = []
                async for event in stream:
                    kinds.append(event.type)
                    if event.type == "response.completed":
                        r = event.response
                        out.append(
                            (
                                r.output_text,
                                [(i.name, i.arguments) for i in r.output if i.type == "function_call"],
                            )
                        )
                out[-1] = (*out[-1], kinds)
            return out

        return asyncio.run(run())

    recorded, _, _ = record_then_replay("responses", agent, tmp_path)
    assert recorded[0][1] == [("get_weather", '{"city": "Paris"}')]


# -- Anthropic Messages -----------------------------------------------------------------------------


def _ant_summary(message: Any) -> Any:
    return (
        [(b.name, b.input) for b in message.content if b.type == "tool_use"],
        "".join(b.text for b in message.content if b.type == "text"),
        message.stop_reason,
        message.usage.output_tokens,
        message.model,
    )


def test_anthropic_sync_plain_and_stream_helper(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
        out: list[Any] = []
        for _ in range(2):
            m = client.messages.create(
                model="claude-haiku-4-5", max_tokens=256, messages=USER, tools=TOOLS_ANT
            )
            out.append(_ant_summary(m))
        with client.messages.stream(model="claude-haiku-4-5", max_tokens=256, messages=USER) as stream:
            text = "".join(stream.text_stream)
            out.append((text, _ant_summary(stream.get_final_message())))
        m = client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=USER, stream=True)
        out.append([e.type for e in m])
        return out

    recorded, rec_ctx, _ = record_then_replay("messages", agent, tmp_path)
    assert recorded[1][0] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    assert recorded[2][0] == "Sunny in Paris, 21 degrees."
    events = http_events(rec_ctx)
    assert events[0].data["provider"] == "anthropic" and events[0].data["endpoint"] == "messages"
    assert events[0].data["decoding"] == {"max_tokens": 256}
    assert events[2].data["streamed"] is True
    assert events[2].data["decision"] == {
        "text": "Sunny in Paris, 21 degrees.",
        "tool_calls": [],
        "stop_reason": "end_turn",
    }
    assert events[2].data["usage"] == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}


def test_anthropic_async_stream_tool_use(tmp_path: Path) -> None:
    def agent(url: str) -> Any:
        async def run() -> Any:
            client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
            out = []
            for _ in range(3):
                async with client.messages.stream(
                    model="claude-haiku-4-5", max_tokens=256, messages=USER, tools=TOOLS_ANT
                ) as stream:
                    async for _event in stream:
                        pass
                    out.append(_ant_summary(await stream.get_final_message()))
            m = await client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=USER)
            out.append(_ant_summary(m))
            return out

        return asyncio.run(run())

    recorded, rec_ctx, _ = record_then_replay("messages", agent, tmp_path)
    assert recorded[1][0] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    decision = http_events(rec_ctx)[1].data["decision"]
    assert [c["arguments"] for c in decision["tool_calls"]] == [{"city": "Paris"}, {"city": "Lyon"}]
    assert decision["stop_reason"] == "tool_use"


def test_replay_of_extra_model_call_is_unmatched(tmp_path: Path) -> None:
    server = LLMServer().start()
    try:
        with run_in("record") as rec_ctx:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
            client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    finally:
        server.stop()
    from pytest_agentreplay.exceptions import UnmatchedRequestError

    with run_in("regression", recorded=MemoryCassette(rec_ctx.recorder.events), cassette="c.json") as ctx:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        client.chat.completions.create(model="gpt-4o-mini", messages=USER)
        with pytest.raises(UnmatchedRequestError) as info:
            client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    message = str(info.value)
    assert "POST http://127.0.0.1" in message and "openai:chat.completions" in message
    assert "cassette: c.json" in message and "mode: regression" in message
    # Re-recording is the fix for a call the cassette cannot serve; --agentreplay-update cannot help.
    assert "--agentreplay-record=all" in message and "--agentreplay-update" not in message
    assert ctx.failures and isinstance(ctx.failures[0], UnmatchedRequestError)
