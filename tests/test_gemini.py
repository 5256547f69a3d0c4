"""The Gemini provider adapter: ``generateContent`` and ``streamGenerateContent`` (SSE with ``alt=sse``
and the JSON-array stream) become ``model.call`` events with decisions (text, function calls, finish
reason, usage), and the ``x-goog-api-key`` header and ``key=`` query parameter never reach a cassette.

Real recorded traffic: llm-gemini's vcrpy cassettes in ``../shared/suites`` (skipped when absent); live
traffic: a loopback server speaking the Gemini wire format, captured through httpx.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_agentreplay.api import capture_run
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.http.classify import classify_exchange
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse
from pytest_agentreplay.http.providers import BUILTIN_SET, gemini
from pytest_agentreplay.interop.vcr_format import interactions_to_events, load_vcr
from pytest_agentreplay.redaction import find_secrets

SHARED = Path(__file__).resolve().parents[2] / "shared"
SHARED_CASSETTES = SHARED / "suites/llm-gemini/tests/cassettes/test_gemini"
needs_shared = pytest.mark.skipif(not SHARED_CASSETTES.is_dir(), reason="../shared/suites is absent")
BASE = "https://generativelanguage.googleapis.com/v1beta/models"
# A key-shaped value built from parts (no key-shaped literal in the repository).
API_KEY = "AI" + "za" + "Sy" + "Q7rT2mZ9xW4vK1pL8nB3cD6fG0hJ5kE"


def chunk(
    text: str | None = None,
    *,
    call: tuple[str, dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: tuple[int, int] | None = None,
    thought: str | None = None,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if thought is not None:
        parts.append({"text": thought, "thought": True})
    if text is not None:
        parts.append({"text": text})
    if call is not None:
        parts.append({"functionCall": {"name": call[0], "args": call[1]}, "thoughtSignature": "c2ln"})
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r-1"}
    if usage is not None:
        out["usageMetadata"] = {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": usage[0] + usage[1] + 5,
            "thoughtsTokenCount": 5,
        }
    return out


def request(
    url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> HttpRequest:
    raw = json.dumps(body or {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()
    return HttpRequest("POST", url, {"content-type": "application/json", **(headers or {})}, raw)


# -- the adapter ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        (f"{BASE}/gemini-2.5-flash:generateContent", "generateContent"),
        (f"{BASE}/gemini-2.5-flash:streamGenerateContent?alt=sse", "streamGenerateContent"),
        (f"{BASE}/gemini-2.5-flash:streamGenerateContent", "streamGenerateContent"),
        (
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/"
            "google/models/gemini-2.0-flash:generateContent",
            "generateContent",
        ),
        ("http://127.0.0.1:8080/v1beta/tunedModels/mine-1:generateContent?key=x", "generateContent"),
    ],
)
def test_matches_generate_endpoints(url: str, endpoint: str) -> None:
    assert gemini.match(request(url), {}) == endpoint
    cls = classify_exchange(request(url), None, RunSettings())
    assert (cls.kind, cls.provider, cls.endpoint) == ("model", "gemini", endpoint)


@pytest.mark.parametrize(
    "url",
    [
        f"{BASE}/gemini-embedding-001:batchEmbedContents",
        f"{BASE}/gemini-2.5-flash:countTokens",
        "https://api.openai.com/v1/chat/completions",
    ],
)
def test_other_endpoints_are_not_gemini_model_calls(url: str) -> None:
    assert gemini.match(request(url), {}) is None
    assert gemini.match(HttpRequest("GET", f"{BASE}/gemini-2.5-flash:generateContent", {}), {}) is None


def test_registered_beside_openai_and_anthropic() -> None:
    assert BUILTIN_SET["gemini"] is gemini
    order = [p.NAME for p in BUILTIN_SET.order]
    assert order.index("openai") < order.index("anthropic") < order.index("gemini")


def test_request_fields_model_from_url_and_decoding() -> None:
    body = {
        "contents": [],
        "tools": [{"functionDeclarations": [{"name": "f"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 100, "topK": None},
    }
    fields = gemini.request_fields("streamGenerateContent", body)
    assert fields["streamed"] is True and fields["model"] is None and fields["tools_hash"]
    assert fields["decoding"] == {
        "temperature": 0.2,
        "maxOutputTokens": 100,
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }
    assert gemini.model_from_request(request(f"{BASE}/gemini-2.5-pro:generateContent")) == "gemini-2.5-pro"
    assert gemini.request_fields("generateContent", None)["streamed"] is False


def test_plain_response_with_function_calls_and_usage() -> None:
    body = chunk("Let me check.", call=("get_weather", {"city": "Paris"}), finish="STOP", usage=(20, 9))
    body["candidates"][0]["content"]["parts"].append({"functionCall": {"name": "noargs", "id": "c2"}})
    fields = gemini.response_fields("generateContent", {"json": body})
    assert fields["decision"] == {
        "text": "Let me check.",
        "tool_calls": [
            {"id": None, "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "c2", "name": "noargs", "arguments": {}},
        ],
        "stop_reason": "STOP",
    }
    assert fields["usage"] == {
        "input_tokens": 20,
        "output_tokens": 9,
        "total_tokens": 34,
        "reasoning_tokens": 5,
    }
    assert fields["response_id"] == "r-1" and fields["response_model"] == "gemini-2.5-flash"


def test_json_array_stream_and_sse_stream_fold_the_same() -> None:
    chunks = [
        chunk(thought="thinking...", usage=(10, 0)),
        chunk("Hel", usage=(10, 1)),
        chunk("lo", finish="MAX_TOKENS", usage=(10, 2)),
    ]
    array = gemini.response_fields("streamGenerateContent", {"json": chunks})
    sse = gemini.response_fields("streamGenerateContent", {"sse": [{"data": c} for c in chunks]})
    assert array == sse
    assert array["decision"] == {"text": "Hello", "tool_calls": [], "stop_reason": "MAX_TOKENS"}
    assert array["usage"]["output_tokens"] == 2  # the last, cumulative usage


def test_blocked_prompt_and_empty_bodies() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}
    fields = gemini.response_fields("generateContent", {"json": blocked})
    assert fields["decision"]["stop_reason"] == "SAFETY" and fields["decision"]["text"] is None
    assert gemini.response_fields("generateContent", None)["decision"] is None
    assert gemini.response_fields("generateContent", {"text": "oops"})["decision"] is None


# -- real recorded traffic ----------------------------------------------------------------------------


@needs_shared
def test_llm_gemini_cassettes_become_model_calls_with_decisions() -> None:
    calls = 0
    for path in sorted(SHARED_CASSETTES.glob("*.yaml")):
        interactions = load_vcr(path)
        events = interactions_to_events(interactions)
        for event in events:
            if event.type != "model.call":
                continue
            calls += 1
            assert event.data["provider"] == "gemini"
            assert str(event.data["model"]).startswith("gemini-")
            decision = event.data["decision"]
            assert decision is not None and decision["stop_reason"], path.name
            assert decision["text"] or decision["tool_calls"], path.name
            assert event.data["usage"]["input_tokens"] > 0
    assert calls == 15  # the 17 cassettes hold 15 generate calls (the rest list models or embed)


@needs_shared
def test_llm_gemini_tool_call_round_trip() -> None:
    events = interactions_to_events(load_vcr(SHARED_CASSETTES / "test_tools.yaml"))
    decisions = [e.data["decision"] for e in events if e.type == "model.call"]
    assert [[c["name"] for c in d["tool_calls"]] for d in decisions] == [
        ["pelican_name_generator"],
        ["pelican_name_generator"],
        [],
    ]
    assert decisions[-1]["text"] == "How about Charles and Sammy?"
    assert all(d["stop_reason"] == "STOP" for d in decisions)


# -- a loopback Gemini server, captured through httpx ---------------------------------------------------


class _GeminiHandler(BaseHTTPRequestHandler):
    server: _GeminiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        self.server.seen.append((self.path, dict(self.headers)))
        path, _, query = self.path.partition("?")
        reply = self.server.replies.pop(0)
        if path.endswith(":streamGenerateContent") and "alt=sse" in query:
            payload = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in reply)
            ctype = "text/event-stream"
        elif path.endswith(":streamGenerateContent"):
            payload = ("[" + ",\r\n".join(json.dumps(c) for c in reply) + "]").encode()
            ctype = "application/json; charset=UTF-8"
        else:
            payload = json.dumps(reply[-1]).encode()
            ctype = "application/json; charset=UTF-8"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _GeminiServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _GeminiHandler)
        self.replies: list[list[dict[str, Any]]] = []
        self.seen: list[tuple[str, dict[str, str]]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1beta/models"


@pytest.fixture
def gemini_server() -> Iterator[_GeminiServer]:
    server = _GeminiServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_loopback_capture_of_all_three_wire_forms(gemini_server: _GeminiServer, tmp_path: Path) -> None:
    gemini_server.replies = [
        [chunk(call=("lookup_order", {"order_id": "A1"}), finish="STOP", usage=(30, 4))],
        [chunk("Your order ", usage=(40, 2)), chunk("has shipped.", finish="STOP", usage=(40, 5))],
        [chunk("Bye", usage=(50, 1)), chunk(finish="STOP", usage=(50, 1))],
    ]
    body = {"contents": [{"role": "user", "parts": [{"text": "Where is order A1?"}]}]}
    cassette = tmp_path / "gemini.json"
    with capture_run(cassette, agent="gemini-agent"), httpx.Client() as client:
        base = gemini_server.base
        first = client.post(
            f"{base}/gemini-2.5-flash:generateContent", json=body, headers={"x-goog-api-key": API_KEY}
        )
        assert first.json()["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "lookup_order"
        with client.stream(
            "POST", f"{base}/gemini-2.5-flash:streamGenerateContent?alt=sse&key={API_KEY}", json=body
        ) as streamed:
            assert b"has shipped." in b"".join(streamed.iter_bytes())
        array = client.post(f"{base}/gemini-2.5-flash:streamGenerateContent?key={API_KEY}", json=body)
        assert array.json()[0]["candidates"][0]["content"]["parts"][0]["text"] == "Bye"

    loaded = load_cassette(cassette)
    calls = [e for e in loaded.events if e.type == "model.call"]
    assert [(e.data["endpoint"], e.data["streamed"], e.data["model"]) for e in calls] == [
        ("generateContent", False, "gemini-2.5-flash"),
        ("streamGenerateContent", True, "gemini-2.5-flash"),
        ("streamGenerateContent", True, "gemini-2.5-flash"),
    ]
    assert calls[0].data["decision"]["tool_calls"] == [
        {"id": None, "name": "lookup_order", "arguments": {"order_id": "A1"}}
    ]
    assert calls[1].data["decision"]["text"] == "Your order has shipped."
    assert calls[1].data["usage"]["output_tokens"] == 5
    assert calls[2].data["decision"] == {"text": "Bye", "tool_calls": [], "stop_reason": "STOP"}
    assert all(e.event_class == "decision" for e in calls)

    # The key went to the server, but never into the cassette (header or query parameter).
    assert gemini_server.seen[0][1].get("x-goog-api-key") == API_KEY
    raw = cassette.read_text(encoding="utf-8")
    blobs = "".join(p.read_text(encoding="utf-8") for p in tmp_path.rglob("*.json") if p != cassette)
    assert API_KEY not in raw + blobs
    first_request = loaded.payload(calls[0].input_ref)
    assert first_request["headers"]["x-goog-api-key"] != API_KEY
    second_request = loaded.payload(calls[1].input_ref)
    assert "key=" in second_request["url"] and API_KEY not in second_request["url"]
    assert find_secrets([loaded.payload(e.input_ref) for e in calls]) == []


def test_response_headers_and_body_shapes_survive_http_response() -> None:
    response = HttpResponse(200, {"content-type": "text/event-stream"}, {"sse": [{"data": chunk("x")}]})
    assert gemini.response_fields("streamGenerateContent", response.body)["decision"]["text"] == "x"
