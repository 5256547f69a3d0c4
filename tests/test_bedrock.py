"""AWS Bedrock Runtime (issue 30): boto3's ``bedrock-runtime`` client recorded as ``model.call`` events and
served back offline.

Inner pytest sessions (pytester) run an agent calling the local Bedrock of tests/bedrock_servers.py through
``converse`` (a tool round trip), ``converse_stream``, ``invoke_model`` and
``invoke_model_with_response_stream`` (Anthropic bodies). Recorded, then replayed with the server stopped (a
bare listener on its port counts connections): the same results, no connection; provider, model id,
decision and usage on each event; the streams readable in the cassette and rebuilt to the very bytes
received; a changed prompt fails naming the model call; ``agentreplay verify`` and audit mode pass; the
access key id, the session token and the SigV4 signature are in no byte written. The codec and the model
families (Llama, Titan, Nova) are also checked directly.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("boto3")

from bedrock_servers import (
    BedrockServer,
    ConnectionCounter,
    anthropic_stream,
    chunk,
    converse_stream,
    event,
    frame,
)

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cli import main
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.exceptions import EventStreamError
from pytest_agentreplay.http import eventstream
from pytest_agentreplay.http.bodies import EVENTSTREAM, body_bytes, encode_body
from pytest_agentreplay.http.classify import classify_exchange
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse
from pytest_agentreplay.http.providers import bedrock

# Credential-shaped values built from parts (no key-shaped literal in the repository).
KEY_ID = "AKIA" + "Q3EXAMPLE7BDRK4X"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYBEDROCKKEY"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjE" + "BedrockSessionToken0123456789abcdefXYZ"
CONVERSE_MODEL = "amazon.nova-lite-v1:0"
CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"

AGENT = """
import json, os

import boto3

TOOLS = {"tools": [{"toolSpec": {
    "name": "get_weather",
    "description": "Weather for a city",
    "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}},
}}]}


def client():
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=os.environ["BEDROCK_URL"],
        region_name="us-east-1",
        aws_access_key_id=os.environ["BR_KEY_ID"],
        aws_secret_access_key=os.environ["BR_SECRET"],
        aws_session_token=os.environ["BR_TOKEN"],
    )


def run():
    c = client()
    out = {}
    model = "amazon.nova-lite-v1:0"
    claude = "anthropic.claude-3-5-haiku-20241022-v1:0"
    messages = [{"role": "user", "content": [{"text": os.environ.get("PROMPT", "Weather in Paris?")}]}]
    system = [{"text": "You are a terse weather bot."}]
    kw = {"system": system, "toolConfig": TOOLS, "inferenceConfig": {"maxTokens": 200, "temperature": 0.0}}
    first = c.converse(modelId=model, messages=messages, **kw)
    out["first"] = [first["output"]["message"], first["stopReason"], first["usage"]]
    use = next(b["toolUse"] for b in first["output"]["message"]["content"] if "toolUse" in b)
    messages.append(first["output"]["message"])
    result = {"toolUseId": use["toolUseId"], "content": [{"json": {"forecast": "sunny", "celsius": 21}}]}
    messages.append({"role": "user", "content": [{"toolResult": result}]})
    second = c.converse(modelId=model, messages=messages, **kw)
    out["second"] = [second["output"]["message"], second["stopReason"]]
    streamed = c.converse_stream(modelId=model, messages=messages[:1], system=system, toolConfig=TOOLS)
    out["stream"] = [ev for ev in streamed["stream"]]
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Say bonjour."}],
    }
    invoked = c.invoke_model(modelId=claude, body=json.dumps(body), contentType="application/json")
    out["invoke"] = json.loads(invoked["body"].read())
    chunks = c.invoke_model_with_response_stream(modelId=claude, body=json.dumps(body))
    out["invoke_stream"] = [json.loads(ev["chunk"]["bytes"]) for ev in chunks["body"]]
    return out
"""

INNER_TEST = """
import json, os

import agent_bedrock


def test_agent(agent_replay):
    with open(os.path.join(os.environ["OUT_DIR"], "out.json"), "w") as fh:
        json.dump(agent_bedrock.run(), fh)
"""


@dataclass
class Lab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    server: BedrockServer
    out: Path

    def run(self, *args: str, **env: str) -> pytest.RunResult:
        with self.monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def record(self) -> dict[str, Any]:
        self.run("--agentreplay-record=all").assert_outcomes(passed=1)
        return self.output()

    def output(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads((self.out / "out.json").read_text())
        return value

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_agent.json"

    def calls(self) -> list[dict[str, Any]]:
        events = json.loads(self.cassette.read_text())["events"]
        return [e for e in events if e["type"] == "model.call"]

    def offline(self) -> ConnectionCounter:
        """Stop the server; listen on its port to count what still tries to reach it."""
        self.server.stop()
        return ConnectionCounter(self.server.port)


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lab]:
    pytester.makepyfile(agent_bedrock=AGENT, test_agent=INNER_TEST)
    pytester.syspathinsert()
    server = BedrockServer().start()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("BEDROCK_URL", server.url)
    monkeypatch.setenv("BR_KEY_ID", KEY_ID)
    monkeypatch.setenv("BR_SECRET", SECRET_KEY)
    monkeypatch.setenv("BR_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("OUT_DIR", str(out))
    # boto3 reads no profile, config file or instance metadata of the machine running the tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    try:
        yield Lab(pytester, monkeypatch, server, out)
    finally:
        server.stop()
        sys.modules.pop("agent_bedrock", None)


# -- record and replay ---------------------------------------------------------------------------------


def test_all_four_operations_replay_with_the_server_stopped(lab: Lab) -> None:
    recorded = lab.record()
    assert len(lab.server.log) == 5
    assert recorded["first"][1] == "tool_use" and recorded["second"][1] == "end_turn"
    assert recorded["invoke"]["content"][0]["text"] == "Bonjour from Claude on Bedrock."
    assert [c["delta"]["text"] for c in recorded["invoke_stream"] if c["type"] == "content_block_delta"] == [
        "Streamed ",
        "hello ",
        "from Claude.",
    ]
    counter = lab.offline()
    try:
        result = lab.run()
    finally:
        connections = counter.close()
    result.assert_outcomes(passed=1)
    assert lab.output() == recorded
    assert connections == 0, "nothing connected to the server's port"


def test_each_call_is_a_model_call_with_model_decision_and_usage(lab: Lab) -> None:
    lab.record()
    calls = lab.calls()
    assert [(c["data"]["provider"], c["data"]["endpoint"], c["data"]["model"]) for c in calls] == [
        ("bedrock", "converse", CONVERSE_MODEL),
        ("bedrock", "converse", CONVERSE_MODEL),
        ("bedrock", "converse-stream", CONVERSE_MODEL),
        ("bedrock", "invoke:anthropic", CLAUDE),
        ("bedrock", "invoke-with-response-stream:anthropic", CLAUDE),
    ]
    first, second, stream, invoke, invoke_stream = (c["data"] for c in calls)
    assert first["decision"] == {
        "text": "Let me check.",
        "tool_calls": [{"id": "tooluse_Qx1", "name": "get_weather", "arguments": {"city": "Paris"}}],
        "stop_reason": "tool_use",
    }
    assert first["usage"] == {"input_tokens": 31, "output_tokens": 9, "total_tokens": 40}
    assert first["decoding"] == {"maxTokens": 200, "temperature": 0.0} and first["tools_hash"]
    assert second["decision"]["text"] == "Sunny in Paris, 21 degrees." and not second["streamed"]
    assert stream["streamed"] is True
    assert stream["decision"] == {
        "text": "Sunny and warm in Lyon.",
        "tool_calls": [{"id": "tooluse_Lyon2", "name": "get_weather", "arguments": {"city": "Lyon"}}],
        "stop_reason": "tool_use",
    }
    assert invoke["decision"]["text"] == "Bonjour from Claude on Bedrock."
    assert invoke["response_model"] == "claude-3-5-haiku-20241022"
    assert invoke_stream["decision"]["text"] == "Streamed hello from Claude."
    assert invoke_stream["usage"]["output_tokens"] == 9
    assert all(c["class"] == "decision" for c in calls)
    # The conversation is in the request as sent: the tool result the agent handed back is reviewable.
    loaded = load_cassette(lab.cassette)
    second_call = [e for e in loaded.events if e.type == "model.call"][1]
    request = loaded.payload(second_call.input_ref)["body"]["json"]
    assert request["messages"][2]["content"][0]["toolResult"]["content"] == [
        {"json": {"celsius": 21, "forecast": "sunny"}}
    ]


def test_the_streams_are_readable_and_rebuilt_to_the_bytes_received(lab: Lab) -> None:
    lab.record()
    calls = lab.calls()
    stream = calls[2]["output_ref"]["inline"]["body"]
    assert stream["content_type"] == eventstream.MEDIA_TYPE
    deltas = [e for e in stream["sse"] if e["event"] == "contentBlockDelta"]
    assert deltas[0]["data"]["delta"] == {"text": "Sunny "}
    assert deltas[0]["headers"] == [
        [":event-type", "contentBlockDelta"],
        [":content-type", "application/json"],
        [":message-type", "event"],
    ]
    chunks = calls[4]["output_ref"]["inline"]["body"]["sse"]
    # A chunk's base64 bytes are stored as the model's own JSON.
    assert chunks[2]["data"]["bytes"]["delta"] == {"type": "text_delta", "text": "Streamed "}
    text = lab.cassette.read_text()
    assert '"text": "Sunny "' in text and '"text": "Streamed "' in text
    # Served from the cassette (keys sorted as stored), each stream is the very bytes the server sent.
    for call, sent in ((calls[2], converse_stream()), (calls[4], anthropic_stream())):
        served = HttpResponse.from_payload(call["output_ref"]["inline"])
        assert list(served.iter_chunks()) == sent
        assert served.content() == b"".join(sent)


def test_a_changed_prompt_fails_naming_the_model_call(lab: Lab) -> None:
    lab.record()
    counter = lab.offline()
    try:
        result = lab.run("-rA", PROMPT="Weather in Rome?")
    finally:
        connections = counter.close()
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert f"model.call {CONVERSE_MODEL} (bedrock converse)" in text
    assert "user message (messages[0]) changed" in text and '-> "Weather in Rome?"' in text
    assert connections == 0


def test_verify_and_audit_pass(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    lab.record()
    capsys.readouterr()
    code = main(["verify", str(lab.cassette)])
    out = capsys.readouterr().out
    assert code == 0, out
    lab.server.stop()
    result = lab.run("--agentreplay-mode=audit")
    result.assert_outcomes(passed=1)


def test_no_key_token_or_signature_on_disk(lab: Lab) -> None:
    lab.record()
    authorization = lab.server.log[0].headers["authorization"]
    signature = re.search(r"Signature=([0-9a-f]+)", authorization)
    assert signature is not None and KEY_ID in authorization
    assert lab.server.log[0].headers["x-amz-security-token"] == SESSION_TOKEN
    secrets = [KEY_ID, SESSION_TOKEN, SECRET_KEY, signature.group(1)]
    secrets += [m.headers["authorization"].rpartition("Signature=")[2] for m in lab.server.log]
    written = [p for p in lab.pytester.path.rglob("*") if p.is_file() and p.suffix != ".py"]
    assert any(p.suffix == ".json" for p in written)
    for path in written:
        data = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, (path, secret)
    headers = lab.calls()[0]["input_ref"]["inline"]["headers"]
    assert headers["authorization"] == "[REDACTED]" and headers["x-amz-security-token"] == "[REDACTED]"


# -- the event stream codec ----------------------------------------------------------------------------


def test_a_bad_crc_is_an_event_stream_error() -> None:
    good = event("messageStop", {"stopReason": "end_turn"}, 1)
    bad_message = good[:-1] + bytes([good[-1] ^ 0xFF])
    with pytest.raises(EventStreamError, match="message CRC mismatch"):
        EVENTSTREAM.parse_all(good + bad_message)
    bad_prelude = good[:8] + bytes([good[8] ^ 0x01]) + good[9:]
    with pytest.raises(EventStreamError, match="prelude CRC mismatch"):
        EVENTSTREAM.parse_all(bad_prelude)
    parser = eventstream.EventStreamParser()
    assert len(parser.feed(good)) == 1 and parser.feed(bad_message[:5]) == []
    assert parser.feed(bad_message[5:]) == [] and isinstance(parser.error, EventStreamError)
    assert parser.received() == good + bad_message
    # A complete body that is damaged is kept as it came, never as half its events.
    stored = encode_body(good + bad_message, eventstream.MEDIA_TYPE)
    assert stored is not None and base64.b64decode(stored["base64"]) == good + bad_message


def _typed_message() -> bytes:
    """Every header type of the format, in an order no sorting would give, and a binary payload."""
    head = b"\x0b:event-type\x07\x00\x05thing"
    head += b"\x04flag\x00" + b"\x04nope\x01" + b"\x01b\x02\xfe" + b"\x01s\x03" + struct.pack(">h", -300)
    head += b"\x01i\x04" + struct.pack(">i", 70000) + b"\x01l\x05" + struct.pack(">q", 2**40)
    head += b"\x03bin\x06\x00\x03\x00\xff\x10" + b"\x02ts\x08" + struct.pack(">q", 1_700_000_000_000)
    head += b"\x02id\x09" + bytes(range(16))
    payload = b"\xff\x00binary"
    prelude = struct.pack(">II", 16 + len(head) + len(payload), len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def test_header_types_and_binary_payloads_round_trip() -> None:
    message = _typed_message()
    (ev,) = EVENTSTREAM.parse_all(message)
    assert ev["event"] == "thing" and "data" not in ev and base64.b64decode(ev["base64"]) == b"\xff\x00binary"
    assert ev["headers"][1:4] == [["flag", True, "bool"], ["nope", False, "bool"], ["b", -2, "byte"]]
    assert ev["headers"][-1] == ["id", bytes(range(16)).hex(), "uuid"]
    assert eventstream.encode_event(json.loads(json.dumps(ev, sort_keys=True))) == message


def test_stored_streams_are_served_through_bodies_and_a_cut_stream_keeps_its_tail() -> None:
    messages = converse_stream()
    raw = b"".join(messages)
    parser = eventstream.EventStreamParser()
    events = parser.feed(raw[:-7]) + parser.finish()
    assert events[-1] == {"truncated": base64.b64encode(messages[-1][:-7]).decode()}
    body = {"sse": events, "content_type": eventstream.MEDIA_TYPE}
    assert body_bytes(body) == raw[:-7]
    # An edited payload (redaction, a hand edit) is rendered from its data, CRCs computed again.
    edited = dict(events[1])
    edited.pop("raw", None)
    edited["data"] = {"contentBlockIndex": 0, "delta": {"text": "[REDACTED]"}}
    (again,) = EVENTSTREAM.parse_all(eventstream.encode_event(edited))
    assert again["data"] == edited["data"] and "raw" not in again


# -- the adapter ---------------------------------------------------------------------------------------


def _request(path: str, body: dict[str, Any] | None = None, **headers: str) -> HttpRequest:
    raw = json.dumps(body or {"messages": []}).encode()
    return HttpRequest("POST", "https://bedrock-runtime.us-east-1.amazonaws.com" + path, dict(headers), raw)


@pytest.mark.parametrize(
    ("path", "endpoint", "model"),
    [
        ("/model/amazon.nova-pro-v1%3A0/converse", "converse", "amazon.nova-pro-v1:0"),
        ("/model/meta.llama3-70b-instruct-v1%3A0/invoke", "invoke:llama", "meta.llama3-70b-instruct-v1:0"),
        (
            "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/invoke-with-response-stream",
            "invoke-with-response-stream:anthropic",
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        ),
        ("/model/amazon.titan-text-express-v1/invoke", "invoke:titan", "amazon.titan-text-express-v1"),
        (
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aprovisioned-model%2Fabc123/invoke",
            "invoke",
            "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123",
        ),
    ],
)
def test_endpoints_families_and_model_ids(path: str, endpoint: str, model: str) -> None:
    cls = classify_exchange(_request(path), None, RunSettings())
    assert (cls.kind, cls.provider, cls.endpoint) == ("model", "bedrock", endpoint)
    assert bedrock.model_from_request(_request(path)) == model


def test_a_service_of_ones_own_on_a_model_path_stays_a_tool() -> None:
    own = HttpRequest("POST", "http://127.0.0.1:9000/model/resnet/invoke", {}, b"{}")
    assert bedrock.match(own, RunSettings()) is None
    assert classify_exchange(own, None, RunSettings()).kind == "write"
    sdk = HttpRequest(
        "POST", "http://127.0.0.1:9000/model/resnet/invoke", {"amz-sdk-invocation-id": "x"}, b"{}"
    )
    assert bedrock.match(sdk, RunSettings()) == "invoke"
    assert (
        bedrock.match(HttpRequest("GET", "https://bedrock-runtime.x/model/m/converse", {}), RunSettings())
        is None
    )


def test_request_fields_per_family() -> None:
    converse = {
        "messages": [],
        "inferenceConfig": {"maxTokens": 5, "topP": None},
        "toolConfig": {"tools": [{"toolSpec": {"name": "f"}}], "toolChoice": {"auto": {}}},
        "guardrailConfig": {"guardrailIdentifier": "g"},
    }
    fields = bedrock.request_fields("converse-stream", converse)
    assert fields["streamed"] is True and fields["tools_hash"]
    assert fields["decoding"] == {
        "maxTokens": 5,
        "toolChoice": {"auto": {}},
        "guardrailConfig": {"guardrailIdentifier": "g"},
    }
    claude = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "temperature": 1, "messages": []}
    assert bedrock.request_fields("invoke:anthropic", claude)["decoding"] == {
        "max_tokens": 9,
        "temperature": 1,
    }
    llama = {"prompt": "hi", "max_gen_len": 50, "temperature": 0.1}
    assert bedrock.request_fields("invoke", llama)["decoding"] == {"max_gen_len": 50, "temperature": 0.1}
    titan = {"inputText": "hi", "textGenerationConfig": {"maxTokenCount": 20}}
    assert bedrock.request_fields("invoke:titan", titan)["decoding"] == {"maxTokenCount": 20}
    assert bedrock.request_fields("invoke", None)["model"] is None


def _stream(*chunks: dict[str, Any]) -> dict[str, Any]:
    return {"sse": EVENTSTREAM.parse_all(b"".join(chunk(c, n) for n, c in enumerate(chunks)))}


def test_llama_titan_and_nova_bodies_plain_and_streamed() -> None:
    llama = {
        "generation": "Hi there",
        "prompt_token_count": 7,
        "generation_token_count": 3,
        "stop_reason": "stop",
    }
    expected = {"text": "Hi there", "tool_calls": [], "stop_reason": "stop"}
    assert bedrock.response_fields("invoke:llama", {"json": llama})["decision"] == expected
    streamed = bedrock.response_fields(
        "invoke-with-response-stream:llama",
        _stream(
            {"generation": "Hi ", "prompt_token_count": 7, "generation_token_count": 1, "stop_reason": None},
            {
                "generation": "there",
                "prompt_token_count": None,
                "generation_token_count": 3,
                "stop_reason": "stop",
            },
        ),
    )
    assert streamed["decision"] == expected and streamed["usage"] == {"input_tokens": 7, "output_tokens": 3}

    titan = {
        "inputTextTokenCount": 4,
        "results": [{"tokenCount": 2, "outputText": "Hello", "completionReason": "FINISH"}],
    }
    fields = bedrock.response_fields("invoke:titan", {"json": titan})
    assert fields["decision"]["text"] == "Hello" and fields["usage"] == {
        "input_tokens": 4,
        "output_tokens": 2,
    }
    streamed = bedrock.response_fields(
        "invoke-with-response-stream",  # no family in the id: told by the chunks' shape
        _stream(
            {
                "outputText": "Hel",
                "index": 0,
                "totalOutputTextTokenCount": 1,
                "completionReason": None,
                "inputTextTokenCount": 4,
            },
            {"outputText": "lo", "index": 0, "totalOutputTextTokenCount": 2, "completionReason": "FINISH"},
        ),
    )
    assert streamed["decision"]["text"] == "Hello" and streamed["decision"]["stop_reason"] == "FINISH"

    use = {"toolUseId": "t9", "name": "lookup", "input": {"q": "x"}}
    nova = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Sure."}, {"toolUse": use}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
    }
    fields = bedrock.response_fields("invoke:nova", {"json": nova})
    assert fields["decision"]["tool_calls"] == [{"id": "t9", "name": "lookup", "arguments": {"q": "x"}}]
    streamed = bedrock.response_fields(
        "invoke-with-response-stream:nova",
        _stream(
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": "Sure"}, "contentBlockIndex": 0}},
            {"messageStop": {"stopReason": "end_turn"}},
            {"metadata": {"usage": {"inputTokens": 3, "outputTokens": 1}}},
        ),
    )
    assert streamed["decision"] == {"text": "Sure", "tool_calls": [], "stop_reason": "end_turn"}
    assert streamed["usage"] == {"input_tokens": 3, "output_tokens": 1}


def test_an_exception_event_ends_the_decision() -> None:
    headers = [
        (":exception-type", "throttlingException"),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    ]
    raw = event("messageStart", {"role": "assistant"}, 0) + frame(headers, b'{"message":"slow down"}')
    fields = bedrock.response_fields("converse-stream", {"sse": EVENTSTREAM.parse_all(raw)})
    assert fields["decision"]["stop_reason"] == "throttlingException"


def test_a_damaged_live_stream_fails_the_test_and_is_kept_as_it_came() -> None:
    from pytest_agentreplay.core.capture import Recorder, RunContext
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.http.recording import LiveCapture

    ctx = RunContext(
        Recorder(RunMeta(run_id="run-record")), mode="record", cassette="mem://bedrock", settings={}
    )
    request = _request("/model/amazon.nova-lite-v1%3A0/converse-stream")
    capture = LiveCapture(ctx, request, classify_exchange(request, None, RunSettings()))
    capture.start_response(200, {"content-type": eventstream.MEDIA_TYPE})
    good = event("messageStart", {"role": "assistant"}, 0)
    damaged = event("messageStop", {"stopReason": "end_turn"}, 1)[:-1] + b"\x00"
    capture.feed(good)
    capture.feed(damaged)  # the client reading the stream gets no exception of ours
    capture.finish()
    (failure,) = ctx.failures
    assert isinstance(failure, EventStreamError) and "message CRC mismatch" in str(failure)
    assert "converse-stream" in str(failure) and failure.cassette == "mem://bedrock"
    (call,) = [e for e in ctx.recorder.events if e.type == "model.call"]
    assert call.output_ref is not None
    assert base64.b64decode(call.output_ref.inline["body"]["base64"]) == good + damaged


def test_a_secret_in_a_chunk_is_redacted_and_the_message_rebuilt_without_it() -> None:
    from pytest_agentreplay.redaction import find_secrets, redact_body

    leaked = "sk-ant-" + "api03-" + "Zq8vR2mT5xW9yB4nK7pL1cD3fG6hJ0sA"
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": f"key {leaked}"},
    }
    raw = chunk(delta, 3)
    body = {"sse": EVENTSTREAM.parse_all(raw), "content_type": eventstream.MEDIA_TYPE}
    assert "raw" in body["sse"][0]
    redacted = redact_body(body)
    assert find_secrets(redacted) == [] and "raw" not in redacted["sse"][0]
    (again,) = EVENTSTREAM.parse_all(body_bytes(redacted))
    assert again["data"]["bytes"]["delta"]["text"].startswith("key ") and leaked not in json.dumps(again)
