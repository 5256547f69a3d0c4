"""Ollama's native API, Azure OpenAI, Vertex AI Gemini, Mistral and Cohere v2 (issue 30, item 3).

Each provider's official SDK runs in an inner pytest session against the local server of
tests/provider_servers.py, which answers in that provider's wire format: recorded, its calls are
``model.call`` events naming provider and model (Ollama's NDJSON stream stored line by line, readable);
``agentreplay verify`` exits 0; replayed with the server stopped, every test passes and nothing connects;
a changed prompt fails naming the model call; no key is in any file written. The NDJSON codec and the
adapters' recognition are checked directly below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

for _sdk in ("ollama", "openai", "google.genai", "google.oauth2.credentials", "mistralai.client", "cohere"):
    pytest.importorskip(_sdk)

from grpc_servers import ConnectionCounter  # noqa: E402
from provider_servers import ANSWER, ProviderServer  # noqa: E402

from pytest_agentreplay.cassette.read import load_cassette  # noqa: E402
from pytest_agentreplay.cli import main  # noqa: E402
from pytest_agentreplay.core.run_settings import RunSettings  # noqa: E402
from pytest_agentreplay.http import bodies, sse  # noqa: E402
from pytest_agentreplay.http.bodies import NDJSON  # noqa: E402
from pytest_agentreplay.http.classify import classify_exchange  # noqa: E402
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse  # noqa: E402
from pytest_agentreplay.http.providers import azure_openai, gemini, ollama  # noqa: E402
from pytest_agentreplay.http.recording import model_request_fields  # noqa: E402

# Built from parts: no key-shaped literal in the repository.
SECRET = "prov" + "-key-" + "7d1f0c9e4b2a"
PROVIDERS = ("ollama", "azure", "vertex", "mistral", "cohere")

AGENT = '''
"""Each provider's official SDK: a tool call, its result sent back, and a streamed answer."""
import json
import os

import cohere
import httpx
import ollama
import openai
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from mistralai.client import Mistral

KEY = os.environ["PROVIDER_KEY"]
FUNCTION = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOLS = [{"type": "function", "function": FUNCTION}]
RESULT = "21 degrees, sunny"


def prompt():
    return os.environ.get("PROMPT", "What is the weather in Paris?")


def run_ollama(url):
    client = ollama.Client(host=url, headers={"Authorization": "Bearer " + KEY})
    messages = [{"role": "user", "content": prompt()}]
    first = client.chat(
        model="llama3.2", messages=messages, tools=TOOLS, stream=False, options={"temperature": 0}
    )
    calls = [(c.function.name, dict(c.function.arguments)) for c in first.message.tool_calls or []]
    messages += [first.message, {"role": "tool", "content": RESULT, "tool_name": "get_weather"}]
    parts = client.chat(model="llama3.2", messages=messages, stream=True)
    streamed = [p.message.content for p in parts]
    generated = client.generate(model="llama3.2", prompt=prompt(), stream=False).response
    pieces = [p.response for p in client.generate(model="llama3.2", prompt=prompt(), stream=True)]
    usage = [first.prompt_eval_count, first.eval_count, first.done_reason]
    return {"calls": calls, "streamed": streamed, "generated": generated, "pieces": pieces, "usage": usage}


def _openai_turns(client, model):
    messages = [{"role": "user", "content": prompt()}]
    first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    reply = {"role": "tool", "tool_call_id": call.id, "content": RESULT}
    messages += [first.choices[0].message.model_dump(exclude_none=True), reply]
    stream = client.chat.completions.create(model=model, messages=messages, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    call_out = [call.function.name, json.loads(call.function.arguments)]
    return {"call": call_out, "text": text, "model": first.model}


def run_azure(url):
    deployments = openai.AzureOpenAI(azure_endpoint=url, api_key=KEY, api_version="2024-10-21", max_retries=0)
    # The v1 API at an Azure host, reached through the local server acting as an HTTP proxy.
    v1 = openai.OpenAI(
        base_url="http://contoso-eu.openai.azure.com/openai/v1/",
        api_key=KEY,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(proxy=url),
    )
    return {"deployments": _openai_turns(deployments, "contoso-gpt4o"), "v1": _openai_turns(v1, "gpt4o-v1")}


def run_vertex(url):
    client = genai.Client(
        vertexai=True,
        project="demo-project",
        location="europe-west4",
        credentials=Credentials(token=KEY),
        http_options=types.HttpOptions(base_url=url),
    )
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(**FUNCTION)])
    config = types.GenerateContentConfig(tools=[tool], temperature=0)
    contents = [types.Content(role="user", parts=[types.Part(text=prompt())])]
    first = client.models.generate_content(model="gemini-2.0-flash", contents=contents, config=config)
    call = first.function_calls[0]
    answer = types.Part.from_function_response(name=call.name, response={"result": RESULT})
    contents += [first.candidates[0].content, types.Content(role="user", parts=[answer])]
    stream = client.models.generate_content_stream(model="gemini-2.0-flash", contents=contents, config=config)
    return {"call": [call.name, dict(call.args)], "text": "".join(c.text or "" for c in stream)}


def run_mistral(url):
    # api.mistral.ai, reached through the local server acting as an HTTP proxy.
    client = Mistral(api_key=KEY, server_url="http://api.mistral.ai", client=httpx.Client(proxy=url))
    messages = [{"role": "user", "content": prompt()}]
    first = client.chat.complete(
        model="mistral-small-latest", messages=messages, tools=TOOLS, temperature=0, random_seed=7
    )
    call = first.choices[0].message.tool_calls[0]
    reply = {"role": "tool", "tool_call_id": call.id, "name": call.function.name, "content": RESULT}
    messages += [first.choices[0].message, reply]
    events = client.chat.stream(model="mistral-small-latest", messages=messages)
    text = "".join(ev.data.choices[0].delta.content or "" for ev in events)
    args = call.function.arguments
    return {"call": [call.function.name, json.loads(args) if isinstance(args, str) else args], "text": text}


def run_cohere(url):
    client = cohere.ClientV2(api_key=KEY, base_url=url)
    messages = [{"role": "user", "content": prompt()}]
    first = client.chat(model="command-a-03-2025", messages=messages, tools=TOOLS, temperature=0)
    call = first.message.tool_calls[0]
    messages += [
        {"role": "assistant", "tool_plan": first.message.tool_plan, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call.id, "content": RESULT},
    ]
    text = ""
    for ev in client.chat_stream(model="command-a-03-2025", messages=messages, tools=TOOLS):
        if ev.type == "content-delta":
            text += ev.delta.message.content.text
    call_out = [call.function.name, json.loads(call.function.arguments)]
    return {"call": call_out, "text": text, "finish": first.finish_reason}
'''

INNER_TEST = """
import json, os

import agent_providers


def _run(name):
    out = getattr(agent_providers, "run_" + name)(os.environ["PROVIDER_URL"])
    with open(os.path.join(os.environ["OUT_DIR"], name + ".json"), "w") as fh:
        json.dump(out, fh)


def test_ollama(agent_replay):
    _run("ollama")


def test_azure(agent_replay):
    _run("azure")


def test_vertex(agent_replay):
    _run("vertex")


def test_mistral(agent_replay):
    _run("mistral")


def test_cohere(agent_replay):
    _run("cohere")
"""


@dataclass
class Lab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    server: ProviderServer
    out: Path

    def run(self, *args: str, **env: str) -> pytest.RunResult:
        with self.monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-rA", *args)

    def record(self) -> None:
        self.run("--agentreplay-record=all").assert_outcomes(passed=len(PROVIDERS))

    def outputs(self) -> dict[str, Any]:
        return {name: json.loads((self.out / f"{name}.json").read_text()) for name in PROVIDERS}

    def calls(self, provider: str) -> list[dict[str, Any]]:
        path = self.pytester.path / "cassettes" / "test_agent" / f"test_{provider}.json"
        return [e for e in load_cassette(path).event_dicts() if e["type"] == "model.call"]

    def offline(self) -> ConnectionCounter:
        """Stop the server; listen on its port to count what still tries to reach it."""
        self.server.stop()
        return ConnectionCounter(self.server.port)


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lab]:
    pytester.makepyfile(agent_providers=AGENT, test_agent=INNER_TEST)
    pytester.syspathinsert()
    server = ProviderServer().start()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("PROVIDER_URL", server.url)
    monkeypatch.setenv("PROVIDER_KEY", SECRET)
    monkeypatch.setenv("OUT_DIR", str(out))
    try:
        yield Lab(pytester, monkeypatch, server, out)
    finally:
        server.stop()
        import sys

        sys.modules.pop("agent_providers", None)


def _decisions(calls: list[dict[str, Any]]) -> list[tuple[str | None, list[Any], object]]:
    out = []
    for call in calls:
        decision = call["data"]["decision"]
        tools = [(c["name"], c["arguments"]) for c in decision["tool_calls"]]
        out.append((decision["text"], tools, decision["stop_reason"]))
    return out


TOOL = ("get_weather", {"city": "Paris"})


def _check_recorded_events(lab: Lab) -> None:
    ollama_calls = lab.calls("ollama")
    assert [(c["data"]["provider"], c["data"]["endpoint"], c["data"]["model"]) for c in ollama_calls] == [
        ("ollama", "chat", "llama3.2"),
        ("ollama", "chat", "llama3.2"),
        ("ollama", "generate", "llama3.2"),
        ("ollama", "generate", "llama3.2"),
    ]
    assert _decisions(ollama_calls) == [
        (None, [TOOL], "stop"),
        (ANSWER, [], "stop"),
        (ANSWER, [], "stop"),
        (ANSWER, [], "stop"),
    ]
    assert [c["data"]["streamed"] for c in ollama_calls] == [False, True, False, True]
    assert ollama_calls[0]["data"]["usage"] == {"input_tokens": 26, "output_tokens": 9, "total_tokens": 35}
    assert ollama_calls[0]["data"]["decoding"] == {"temperature": 0}
    # The NDJSON stream is stored line by line, its text readable in the cassette.
    stream = ollama_calls[1]["output_ref"]["inline"]["body"]
    assert stream["content_type"] == "application/x-ndjson"
    assert "".join(ev["data"]["message"]["content"] for ev in stream["sse"]) == ANSWER
    assert stream["sse"][-1]["data"]["done_reason"] == "stop"

    azure = lab.calls("azure")
    assert [(c["data"]["provider"], c["data"]["deployment"], c["data"]["api_version"]) for c in azure] == [
        ("azure-openai", "contoso-gpt4o", "2024-10-21"),
        ("azure-openai", "contoso-gpt4o", "2024-10-21"),
        ("azure-openai", "gpt4o-v1", None),
        ("azure-openai", "gpt4o-v1", None),
    ]
    assert {c["data"]["response_model"] for c in azure} == {"gpt-4o-2024-08-06"}
    assert _decisions(azure) == [(None, [TOOL], "tool_calls"), (ANSWER, [], "stop")] * 2
    assert azure[0]["input_ref"]["inline"]["headers"]["api-key"] == "[REDACTED]"

    vertex = lab.calls("vertex")
    assert [(c["data"]["provider"], c["data"]["model"], c["data"]["vertex"]) for c in vertex] == [
        ("gemini", "gemini-2.0-flash", True)
    ] * 2
    assert vertex[0]["data"]["location"] == "europe-west4"
    assert vertex[0]["input_ref"]["inline"]["headers"]["authorization"] == "[REDACTED]"
    assert _decisions(vertex) == [(None, [TOOL], "STOP"), (ANSWER, [], "STOP")]

    mistral = lab.calls("mistral")
    assert [(c["data"]["provider"], c["data"]["model"]) for c in mistral] == [
        ("mistral", "mistral-small-latest")
    ] * 2
    assert mistral[0]["data"]["decoding"] == {"temperature": 0, "random_seed": 7}
    assert _decisions(mistral) == [(None, [TOOL], "tool_calls"), (ANSWER, [], "stop")]

    cohere = lab.calls("cohere")
    assert [(c["data"]["provider"], c["data"]["model"]) for c in cohere] == [
        ("cohere", "command-a-03-2025")
    ] * 2
    assert _decisions(cohere) == [(None, [TOOL], "TOOL_CALL"), (ANSWER, [], "COMPLETE")]
    assert cohere[1]["data"]["streamed"] is True
    assert cohere[0]["data"]["usage"] == {"input_tokens": 700, "output_tokens": 8}


def test_recorded_verified_and_replayed_with_the_server_stopped(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    lab.record()
    recorded = lab.outputs()
    assert recorded["ollama"]["pieces"][:3] == ["Sunny in ", "Paris, 21", " degrees."]
    assert recorded["cohere"]["text"] == ANSWER and recorded["azure"]["v1"]["text"] == ANSWER
    _check_recorded_events(lab)
    written = [p for p in (lab.pytester.path / "cassettes").rglob("*") if p.is_file()]
    assert written
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    # Model calls are not writes: nothing lacks an idempotency key or a receipt.
    capsys.readouterr()
    assert main(["verify", str(lab.pytester.path / "cassettes")]) == 0, capsys.readouterr().out
    seen = len(lab.server.log)
    counter = lab.offline()
    try:
        replay = lab.run()
        audit = lab.run("--agentreplay-mode=audit")
    finally:
        connections = counter.close()
    replay.assert_outcomes(passed=len(PROVIDERS))
    audit.assert_outcomes(passed=len(PROVIDERS))
    assert lab.outputs() == recorded
    assert len(lab.server.log) == seen and connections == 0, "replay reached the server"


def test_a_changed_prompt_fails_naming_the_model_call(lab: Lab) -> None:
    lab.record()
    counter = lab.offline()
    try:
        result = lab.run(PROMPT="What is the weather in Lyon?")
    finally:
        connections = counter.close()
    result.assert_outcomes(failed=len(PROVIDERS))
    text = result.stdout.str()
    # Each model call named (model, provider, endpoint), with the request field that changed.
    named = {
        "llama3.2 (ollama chat)": "messages[0].content",
        "llama3.2 (ollama generate)": "prompt",
        "contoso-gpt4o (azure-openai chat.completions)": "messages[0].content",
        "gemini-2.0-flash (gemini generateContent)": "contents[0].parts[0].text",
        "mistral-small-latest (mistral chat.completions)": "messages[0].content",
        "command-a-03-2025 (cohere chat)": "messages[0].content",
    }
    change = '"What is the weather in Paris?" -> "What is the weather in Lyon?"'
    for call, field in named.items():
        pattern = rf"model\.call {re.escape(call)}\n(.*\n)*?\s+input_ref\.body\.json\.{re.escape(field)}: "
        assert re.search(pattern + re.escape(change), text), f"{call} not named:\n{text}"
    assert connections == 0


# -- NDJSON, stored and served ----------------------------------------------------------------------

ODD_NDJSON = (
    b'{"model":"m","message":{"role":"assistant","content":"Hi \\u003cb\\u003e"},"done":false}\n'
    b"\n"
    b'{"b": 1, "a": 2}\r\n'
    b"not json\n"
    b'{"done":true,"done_reason":"stop"}'
)


@pytest.mark.parametrize("size", [1, 3, 7, len(ODD_NDJSON)])
def test_ndjson_lines_parse_in_any_chunking_and_serve_back_byte_for_byte(size: int) -> None:
    parser = sse.NDJSONParser()
    events = []
    for start in range(0, len(ODD_NDJSON), size):
        events += parser.feed(ODD_NDJSON[start : start + size])
    events += parser.finish()
    assert [ev["data"] for ev in events] == [
        {"model": "m", "message": {"role": "assistant", "content": "Hi <b>"}, "done": False},
        {"b": 1, "a": 2},
        "not json",
        {"done": True, "done_reason": "stop"},
    ]
    assert b"".join(sse.encode_line(ev) for ev in events) == ODD_NDJSON
    # Stored as a cassette stores it (keys sorted), the lines still serve the bytes received.
    stored = json.loads(json.dumps(events, sort_keys=True))
    assert b"".join(sse.encode_line(ev) for ev in stored) == ODD_NDJSON


def test_plain_ndjson_lines_keep_no_raw_copy() -> None:
    events = NDJSON.parse_all(b'{"a":1,"b":"x"}\n{"done":true}\n')
    assert events == [{"data": {"a": 1, "b": "x"}, "t": 0.0}, {"data": {"done": True}, "t": 0.0}]


def test_an_ndjson_response_is_stored_as_events_and_served_one_line_per_chunk() -> None:
    raw = b'{"response":"Hel","done":false}\n{"response":"lo","done":true,"done_reason":"stop"}\n'
    body = bodies.encode_body(raw, "application/x-ndjson", exact=True)
    assert body is not None and [ev["data"]["response"] for ev in body["sse"]] == ["Hel", "lo"]
    response = HttpResponse(200, {"content-type": "application/x-ndjson"}, body)
    assert list(response.iter_chunks()) == raw.splitlines(keepends=True)
    assert response.content() == raw
    assert ollama.response_fields("generate", body)["decision"] == {
        "text": "Hello",
        "tool_calls": [],
        "stop_reason": "stop",
    }
    # A request body of that type (a bulk upload) stays text: only responses are streams.
    assert bodies.encode_body(raw, "application/x-ndjson") == {
        "text": raw.decode(),
        "content_type": "application/x-ndjson",
    }


# -- recognition ------------------------------------------------------------------------------------


def _post(url: str, body: dict[str, Any] | None = None, **headers: str) -> HttpRequest:
    raw = json.dumps(body if body is not None else {"model": "m", "messages": []}).encode()
    return HttpRequest("POST", url, {"content-type": "application/json", **headers}, raw)


@pytest.mark.parametrize(
    ("url", "provider", "endpoint"),
    [
        ("http://localhost:11434/api/chat", "ollama", "chat"),
        ("http://localhost:11434/api/generate", "ollama", "generate"),
        ("http://localhost:11434/v1/chat/completions", "openai", "chat.completions"),
        (
            "https://contoso.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
            "azure-openai",
            "chat.completions",
        ),
        ("https://contoso.openai.azure.com/openai/v1/chat/completions", "azure-openai", "chat.completions"),
        ("https://contoso.openai.azure.com/openai/v1/responses", "azure-openai", "responses"),
        (
            "https://contoso.openai.azure.com/openai/responses?api-version=2025-03-01-preview",
            "azure-openai",
            "responses",
        ),
        # Groq's OpenAI-compatible base URL also ends in /openai/v1: not Azure.
        ("https://api.groq.com/openai/v1/chat/completions", "openai", "chat.completions"),
        ("https://api.mistral.ai/v1/chat/completions", "mistral", "chat.completions"),
        ("https://api.cohere.com/v2/chat", "cohere", "chat"),
        (
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4/endpoints/"
            "123:generateContent",
            "gemini",
            "generateContent",
        ),
    ],
)
def test_each_provider_is_recognised(url: str, provider: str, endpoint: str) -> None:
    cls = classify_exchange(_post(url), None, RunSettings())
    assert (cls.kind, cls.provider, cls.endpoint) == ("model", provider, endpoint)


def test_a_service_of_its_own_at_api_chat_is_not_ollama() -> None:
    cls = classify_exchange(_post("http://127.0.0.1:9/api/chat", {"text": "hello"}), None, RunSettings())
    assert cls.kind == "write"


def test_url_fields_say_azure_deployment_and_vertex_location() -> None:
    url = "https://c.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    request = _post(url, {"messages": []})
    data = model_request_fields(
        request, classify_exchange(request, None, RunSettings()), adapter=azure_openai, request_hash=None
    )
    assert (data["model"], data["deployment"], data["api_version"]) == ("prod-4o", "prod-4o", "2024-10-21")
    studio = _post(
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": []},
    )
    fields = model_request_fields(
        studio, classify_exchange(studio, None, RunSettings()), adapter=gemini, request_hash=None
    )
    assert "vertex" not in fields  # AI Studio's events are as they were
    express = _post(
        "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-flash:generateContent",
        {"contents": []},
    )
    fields = model_request_fields(
        express, classify_exchange(express, None, RunSettings()), adapter=gemini, request_hash=None
    )
    assert (fields["vertex"], fields["location"], fields["model"]) == (True, None, "gemini-2.5-flash")
