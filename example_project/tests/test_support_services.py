"""The local services on their own (no cassette, free ports): the SDKs parse the scripted servers' wire
formats, plain and streamed, and the backoffice honours idempotency keys."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from services import SCENARIOS, BackofficeService, ScriptedModelServer

SCRIPT = SCENARIOS["late_parcel"].script
USER = SCENARIOS["late_parcel"].message
TOOL = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}


@pytest.fixture
def backoffice() -> Iterator[BackofficeService]:
    service = BackofficeService(port=0)
    service.start()
    yield service
    service.stop()


def test_openai_sdk_parses_plain_and_streamed_tool_calls() -> None:
    server = ScriptedModelServer("openai", SCRIPT, port=0).start()
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-x", max_retries=0)
        messages = [{"role": "user", "content": USER}]
        plain = client.chat.completions.create(model="m", messages=messages, tools=[TOOL])  # type: ignore[list-item]
        call = plain.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert (plain.id, plain.created, plain.choices[0].finish_reason) == (
            "chatcmpl-sup0001",
            1714000000,
            "tool_calls",
        )
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == (  # type: ignore[union-attr]
            "call_sup0001_0",
            "lookup_order",
            {"order_id": "A1002"},
        )
        assert plain.usage is not None and plain.usage.total_tokens > 0

        stream = client.chat.completions.create(
            model="m",
            messages=messages,
            tools=[TOOL],
            stream=True,
            stream_options={"include_usage": True},  # type: ignore[list-item]
        )
        chunks = list(stream)
        args = "".join(
            tc.function.arguments or ""
            for ch in chunks
            for choice in ch.choices
            for tc in choice.delta.tool_calls or []
            if tc.function is not None
        )
        assert json.loads(args) == {"order_id": "A1002"}
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    finally:
        server.stop()


def test_anthropic_sdk_parses_plain_and_streamed_tool_use() -> None:
    server = ScriptedModelServer("anthropic", SCRIPT, port=0).start()
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test-x", max_retries=0)
        kwargs = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": USER}],
        }
        plain = client.messages.create(**kwargs)  # type: ignore[call-overload]
        assert (plain.id, plain.stop_reason, plain.usage.output_tokens) == ("msg_sup0001", "tool_use", 12)
        assert plain.content[0].type == "tool_use" and plain.content[0].input == {"order_id": "A1002"}
        with client.messages.stream(**kwargs) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_message()
        assert "content_block_delta" in kinds and kinds[-1] == "message_stop"
        assert (final.id, final.stop_reason) == ("msg_sup0002", "tool_use")
        assert final.content[0].type == "tool_use" and final.content[0].input == {"order_id": "A1002"}
        assert final.usage.input_tokens > 0 and final.usage.output_tokens == 12
    finally:
        server.stop()


def test_backoffice_idempotency(backoffice: BackofficeService) -> None:
    with httpx.Client(base_url=backoffice.url) as client:
        body = {"order_id": "A1002", "summary": "late"}
        first = client.post("/tickets", json=body, headers={"Idempotency-Key": "k1"})
        again = client.post("/tickets", json=body, headers={"Idempotency-Key": "k1"})
        other = client.post("/tickets", json=body, headers={"Idempotency-Key": "k2"})
        missing = client.post("/tickets", json=body)
        assert (first.status_code, again.status_code, missing.status_code) == (201, 200, 400)
        assert first.json()["id"] == again.json()["id"] == "TCK-1001" and other.json()["id"] == "TCK-1002"
        assert again.headers["idempotent-replayed"] == "true"
        assert client.get("/orders/A1001").json()["status"] == "shipped"
        assert client.get("/orders/NOPE").status_code == 404
    assert sorted(backoffice.tickets) == ["TCK-1001", "TCK-1002"]
    assert len(backoffice.requests_to("POST", "/tickets")) == 4
