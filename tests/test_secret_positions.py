"""Red team: every place a credential hides, recorded for real; every byte and file name written read back.

One inner pytest session records all positions through the real clients (httpx, httpx2, requests,
aiohttp, the openai and anthropic SDKs, the explicit API) against a scripted server on 127.0.0.1; three
more replay it (one clean, two drifting so the reports carry drift values and run views). Every file
under the inner session's directory is read once (cassettes, blobs, .md/.json/.html reports, names
included) and each position is one outer test over that scan. Secrets are built from seeded parts: no
key-shaped literal is tracked in git, and the inner test files read them from the environment, so a
secret found on disk was written by the plugin.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import hashlib
import importlib
import json
import re
import string
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit

import pytest

_ALNUM = string.ascii_letters + string.digits


def _chars(seed: str, n: int, alphabet: str = _ALNUM) -> str:
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"agentreplay-redteam:{seed}:{counter}".encode()).digest()
        counter += 1
    return "".join(alphabet[b % len(alphabet)] for b in out[:n])


def _plain(seed: str) -> str:
    # Not key-shaped: only a rule that knows where it sits (a name, a part, a userinfo) can hide it.
    return "pw-" + _chars(seed, 18).lower()


_PUBLIC_PREFIX = "sk-" + "proj-"


def _openai(seed: str) -> str:
    return _PUBLIC_PREFIX + _chars(seed, 40)


def _jwt(seed: str) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": seed}).encode()).decode().rstrip("=")
    return ".".join([head, body, _chars(seed, 43, _ALNUM + "_-")])


@dataclass(frozen=True)
class Position:
    name: str
    what: str
    secret: str
    # Split across stream chunks: no 8-character piece of it may survive either.
    split: bool = False


def _positions() -> list[Position]:
    P = Position
    return [
        # request headers (httpx)
        P("hdr_authorization", "Authorization: Bearer <token> request header", _plain("hdr-auth")),
        P("hdr_proxy_authorization", "Proxy-Authorization request header", _plain("hdr-proxy")),
        P("hdr_x_api_key", "X-Api-Key request header", _plain("hdr-x-api-key")),
        P("hdr_api_key", "api-key request header (Azure)", _plain("hdr-api-key")),
        P("hdr_goog_api_key", "x-goog-api-key request header", _plain("hdr-goog")),
        P("hdr_cookie", "Cookie request header", _plain("hdr-cookie")),
        P("hdr_x_auth_token", "X-Auth-Token request header", _plain("hdr-auth-token")),
        P("hdr_x_auth_key", "X-Auth-Key request header", _plain("hdr-auth-key")),
        P("resp_set_cookie", "Set-Cookie response header", _plain("resp-cookie")),
        P("resp_refresh_token", "X-Refresh-Token response header", _plain("resp-refresh")),
        # URLs
        P("query_api_key", "api_key= query parameter", _plain("q-api-key")),
        P("query_key", "key= query parameter", _plain("q-key")),
        P("query_access_token", "access_token= query parameter", _plain("q-access-token")),
        P("query_sig", "sig= query parameter (presigned URL)", _plain("q-sig")),
        P("userinfo_httpx", "user:pass@host in a URL sent by httpx", _plain("ui-httpx")),
        P("userinfo_httpx2", "user:pass@host in a URL sent by httpx2", _plain("ui-httpx2")),
        P("userinfo_requests", "user:pass@host in a URL sent by requests", _plain("ui-requests")),
        P("userinfo_aiohttp", "user:pass@host in a URL sent by aiohttp", _plain("ui-aiohttp")),
        P("fragment_request", "access_token in a request URL's fragment (httpx)", _plain("frag-req")),
        P("fragment_location", "access_token in a redirect Location's fragment", _plain("frag-loc")),
        P("query_percent_key", "percent-encoded sk- key in a query value (httpx)", _openai("q-pct")),
        P("query_spaced_key", "sk- key after %20 in a query value (requests)", _openai("q-sp")),
        # request bodies
        P("body_json_client_secret", "client_secret in an application/json body", _plain("b-json")),
        P("body_vnd_json_password", "password in an application/vnd.api+json body", _plain("b-vnd")),
        P("body_form_client_secret", "client_secret in a form-urlencoded body", _plain("b-form")),
        P("body_gzip_api_key", "api_key in a gzip-encoded JSON request body", _plain("b-gzip")),
        P("body_multipart_password", "password part of a multipart/form-data body", _plain("b-multi")),
        P("body_octet_stream_key", "sk- key in an application/octet-stream body", _openai("b-octet")),
        P("body_text_plain_json", "password in a JSON body sent as text/plain", _plain("b-textjson")),
        P("body_project_key", "project redact_keys entry (customer_pin) in a JSON body", _plain("b-proj")),
        P("body_zstd_api_key", "api_key in a zstd-encoded JSON request body", _plain("b-zstd")),
        # response bodies
        P("resp_oauth_access_token", "access_token in a JSON response", _plain("r-oauth")),
        P("resp_text_github", "GitHub token in a text/plain response", "ghp_" + _chars("r-gh", 36)),
        P(
            "resp_aws_key",
            "AWS key id inside a JSON string",
            "AKIA" + _chars("r-aws", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        ),
        P("resp_jwt", "JWT inside a JSON string", _jwt("r-jwt")),
        P("resp_gzip_password", "password in a gzip-encoded JSON response", _plain("r-gzip")),
        P("resp_zstd_password", "password in a zstd-encoded JSON response (httpx)", _plain("r-zstd")),
        P("resp_chain_password", "password in a 'gzip, br' JSON response (requests)", _plain("r-chain")),
        P("resp_base64_github", "GitHub token in a base64 response field", "ghp_" + _chars("r-b64", 36)),
        P(
            "resp_stripe_receipt",
            "Stripe key in the response of a write effect",
            "sk_" + "live_" + _chars("r-stripe", 24),
        ),
        P("sse_whole_key", "key whole inside one SSE event", _openai("sse-whole")),
        P(
            "sse_split_key",
            "key split across two SSE chunks (openai stream)",
            _openai("sse-split"),
            split=True,
        ),
        P(
            "sse_split_tool_args",
            "password split across streamed tool-call arguments",
            _plain("sse-args"),
            split=True,
        ),
        # model calls (SDKs)
        P("sdk_openai_api_key", "OpenAI client api_key (Authorization header)", _openai("sdk-openai")),
        P("msg_openai_key", "sk- key in a user message", _openai("msg-user")),
        P(
            "msg_anthropic_key",
            "sk-ant- key in a system prompt",
            "sk-" + "ant-" + "api03-" + _chars("msg-ant", 40),
        ),
        P("reply_google_key", "Google API key in the model's reply", "AIza" + _chars("reply-goog", 35)),
        P("tool_call_arguments", "password in an OpenAI tool call's arguments string", _plain("tc-args")),
        P("msg_bearer_text", "Bearer token in free text of a tool message", _plain("msg-bearer")),
        P("doc_anthropic_base64", "sk- key in a base64 text document block (anthropic)", _openai("doc-ant")),
        P("doc_openai_file_data", "client_secret in a base64 file_data data URL (openai)", _plain("doc-oai")),
        P(
            "anthropic_tool_input",
            "api_key in an Anthropic tool_use input (and x-api-key)",
            _plain("ant-input"),
        ),
        # explicit API and test ids
        P("tool_arguments", "password argument of an @tool function", _plain("tool-args")),
        P("tool_result_slack", "Slack token in an @tool result", "xoxb-" + _chars("tool-slack", 30)),
        P("state_snapshot", "api_key in a record_state snapshot", _plain("state")),
        P("retrieval_private_key", "private key block in a retrieval query", _chars("pk-body", 48)),
        P("param_id", "key in a parametrize id (file name, node id, reports)", _openai("param-id")),
    ]


POSITIONS = _positions()
SECRETS = {p.name: p.secret for p in POSITIONS}
IDEMPOTENCY_KEY = "idem-" + _chars("idem", 12).lower()

# -- the scripted server --------------------------------------------------------------------------


def _chat_completion(text: str, args: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "login", "arguments": args}}
                    ],
                },
                "finish_reason": "tool_calls",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


def _chat_stream() -> Iterator[bytes]:
    key = SECRETS["sse_split_key"]
    # Neither half is key-shaped on its own: only the joined stream shows the key.
    cut = 14
    args = json.dumps({"user": "ann", "password": SECRETS["sse_split_tool_args"]})
    cut_args = args.index("password") + 16
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": ""},
        {"content": "your key is " + key[:cut]},
        {"content": key[cut:] + " keep it safe"},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "login", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": args[:cut_args]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": args[cut_args:]}}]},
    ]
    for delta in deltas:
        chunk = {
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}],
        }
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    done = {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls", "logprobs": None}],
    }
    yield b"data: " + json.dumps(done).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _anthropic_message() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "calling the tool"},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "configure",
                "input": {"region": "eu", "api_key": SECRETS["anthropic_tool_input"]},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value: Any, extra: dict[str, str] | None = None, status: int = 200) -> None:
        self._send(status, json.dumps(value).encode(), "application/json", extra)

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path).path.split("/")
        case = parts[2] if len(parts) > 2 and parts[1] == "case" else ""
        if case == "resp_headers":
            cookie = f"session={SECRETS['resp_set_cookie']}; HttpOnly"
            self._json({"ok": True}, {"Set-Cookie": cookie, "X-Refresh-Token": SECRETS["resp_refresh_token"]})
        elif case == "oauth":
            self._json({"access_token": SECRETS["resp_oauth_access_token"], "token_type": "bearer"})
        elif case == "text_github":
            text = f"machine github.com\ntoken {SECRETS['resp_text_github']}\n"
            self._send(200, text.encode(), "text/plain; charset=utf-8")
        elif case == "aws":
            self._json({"config": f"aws_access_key_id = {SECRETS['resp_aws_key']}\nregion = eu"})
        elif case == "jwt":
            self._json({"note": f"signed in, session {SECRETS['resp_jwt']} valid for 1h"})
        elif case == "gzip_password":
            data = gzip.compress(
                json.dumps({"user": "ann", "password": SECRETS["resp_gzip_password"]}).encode()
            )
            self._send(200, data, "application/json", {"Content-Encoding": "gzip"})
        elif case == "zstd_password":
            import zstandard

            data = json.dumps({"user": "ann", "password": SECRETS["resp_zstd_password"]}).encode()
            self._send(
                200,
                zstandard.ZstdCompressor().compress(data),
                "application/json",
                {"Content-Encoding": "zstd"},
            )
        elif case == "chain_password":
            import brotli

            data = json.dumps({"user": "ann", "password": SECRETS["resp_chain_password"]}).encode()
            coded = brotli.compress(gzip.compress(data))
            self._send(200, coded, "application/json", {"Content-Encoding": "gzip, br"})
        elif case == "b64_field":
            text = f"machine github.com\npassword {SECRETS['resp_base64_github']}\n"
            self._json(
                {"name": ".netrc", "encoding": "base64", "content": base64.b64encode(text.encode()).decode()}
            )
        elif case == "redirect":
            target = f"/case/landed#access_token={SECRETS['fragment_location']}&token_type=bearer"
            self._send(302, b"", "text/plain", {"Location": target})
        elif case == "stripe":
            self._json({"id": "ch_1", "note": f"charged with {SECRETS['resp_stripe_receipt']}"}, status=201)
        elif case == "sse_whole":
            whole = SECRETS["sse_whole_key"]
            self._stream(
                f"event: tick\ndata: {json.dumps({'n': i, 'text': whole if i == 1 else 'x'})}\n\n".encode()
                for i in range(3)
            )
        elif case == "chat":
            request = json.loads(body or b"{}")
            if request.get("stream"):
                self._stream(_chat_stream())
            else:
                args = json.dumps({"user": "ann", "password": SECRETS["tool_call_arguments"]})
                self._json(_chat_completion(f"use {SECRETS['reply_google_key']} for maps", args))
        elif case == "messages":
            self._json(_anthropic_message())
        else:
            self._json({"ok": True, "case": case})

    def _stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for data in events:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = do_PUT = _handle


# -- the inner session ----------------------------------------------------------------------------

INNER_CONFTEST = """
import json
import os

import pytest
from pytest_agentreplay import record_policy


@pytest.fixture(autouse=True)
def _redteam_policy(agent_replay):
    # AR_REDTEAM_DRIFT makes every replayed test drift, so reports carry drift values and run views.
    record_policy("redteam", "drift" if os.environ.get("AR_REDTEAM_DRIFT") else "base")
"""

INNER_TESTS = """
import asyncio
import gzip
import json
import os

import aiohttp
import anthropic
import httpx
import httpx2
import openai
import pytest
import requests

from pytest_agentreplay import record_retrieval, record_state, tool

S = json.loads(os.environ["AR_REDTEAM_SECRETS"])
BASE = os.environ["AR_REDTEAM_URL"]
HOSTPORT = BASE.split("://", 1)[1]
IDEM = os.environ["AR_REDTEAM_IDEM"]


def case(name):
    return f"{BASE}/case/{name}"


def test_request_headers(agent_replay):
    headers = {
        "Authorization": "Bearer " + S["hdr_authorization"],
        "Proxy-Authorization": "Basic " + S["hdr_proxy_authorization"],
        "X-Api-Key": S["hdr_x_api_key"],
        "api-key": S["hdr_api_key"],
        "x-goog-api-key": S["hdr_goog_api_key"],
        "Cookie": "sid=" + S["hdr_cookie"],
        "X-Auth-Token": S["hdr_x_auth_token"],
        "X-Auth-Key": S["hdr_x_auth_key"],
        "Idempotency-Key": IDEM,
    }
    assert httpx.post(case("headers"), headers=headers, json={"n": 1}).json()["ok"]


def test_response_headers(agent_replay):
    assert httpx.get(case("resp_headers")).json() == {"ok": True}


def test_query_parameters(agent_replay):
    params = {
        "q": "coffee",
        "api_key": S["query_api_key"],
        "key": S["query_key"],
        "access_token": S["query_access_token"],
        "sig": S["query_sig"],
    }
    assert httpx.get(case("query"), params=params).json()["ok"]


def test_userinfo_httpx(agent_replay):
    assert httpx.get(f"http://ann:{S['userinfo_httpx']}@{HOSTPORT}/case/ui").json()["ok"]


def test_userinfo_httpx2(agent_replay):
    assert httpx2.get(f"http://ann:{S['userinfo_httpx2']}@{HOSTPORT}/case/ui").json()["ok"]


def test_userinfo_requests(agent_replay):
    assert requests.get(f"http://ann:{S['userinfo_requests']}@{HOSTPORT}/case/ui").json()["ok"]


def test_userinfo_aiohttp(agent_replay):
    async def go():
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://ann:{S['userinfo_aiohttp']}@{HOSTPORT}/case/ui") as r:
                return await r.json()

    assert asyncio.run(go())["ok"]


def test_request_bodies(agent_replay):
    secret = S["body_json_client_secret"]
    assert httpx.post(case("b"), json={"grant_type": "x", "client_secret": secret}).json()
    vnd = json.dumps({"data": {"attributes": {"password": S["body_vnd_json_password"], "name": "ann"}}})
    assert httpx.post(case("b"), content=vnd, headers={"content-type": "application/vnd.api+json"}).json()
    form = {"grant_type": "x", "client_secret": S["body_form_client_secret"]}
    assert httpx.post(case("b"), data=form).json()
    packed = gzip.compress(json.dumps({"api_key": S["body_gzip_api_key"], "n": 1}).encode())
    ctype = {"content-type": "application/json", "content-encoding": "gzip"}
    assert httpx.post(case("b"), content=packed, headers=ctype).json()
    assert httpx.post(case("b"), json={"customer_pin": S["body_project_key"], "n": 2}).json()


def test_multipart(agent_replay):
    files = {"avatar": ("a.png", bytes(range(256)) + b"PNG", "image/png")}
    data = {"username": "ann", "password": S["body_multipart_password"]}
    # A fixed boundary: a random one changes the body on every run (drift unrelated to secrets).
    headers = {"content-type": "multipart/form-data; boundary=redteam-boundary-1"}
    assert httpx.post(case("multipart"), data=data, files=files, headers=headers).json()["ok"]


def test_octet_stream(agent_replay):
    blob = bytes(range(200, 256)) + b"\\x00cfg:" + S["body_octet_stream_key"].encode() + b"\\xff\\xfe\\x00"
    headers = {"content-type": "application/octet-stream"}
    assert httpx.put(case("octet"), content=blob, headers=headers).json()["ok"]


def test_text_plain_json(agent_replay):
    text = json.dumps({"user": "ann", "password": S["body_text_plain_json"]})
    assert httpx.post(case("textjson"), content=text, headers={"content-type": "text/plain"}).json()["ok"]


def test_response_bodies(agent_replay):
    assert httpx.get(case("oauth")).json()["token_type"] == "bearer"
    assert "machine" in httpx.get(case("text_github")).text
    assert "region" in httpx.get(case("aws")).json()["config"]
    assert "signed in" in httpx.get(case("jwt")).json()["note"]
    assert httpx.get(case("gzip_password")).json()["user"] == "ann"


def test_coded_bodies(agent_replay):
    import zstandard

    packed = zstandard.ZstdCompressor().compress(json.dumps({"api_key": S["body_zstd_api_key"]}).encode())
    ctype = {"content-type": "application/json", "content-encoding": "zstd"}
    assert httpx.post(case("b"), content=packed, headers=ctype).json()["ok"]
    zstd_headers = {"accept-encoding": "gzip, br, zstd"}
    assert httpx.get(case("zstd_password"), headers=zstd_headers).json()["user"] == "ann"
    assert requests.get(case("chain_password")).json()["user"] == "ann"
    assert b"netrc" in httpx.get(case("b64_field")).content


def test_url_fragments_and_percent_encoding(agent_replay):
    assert httpx.get(case("frag") + "#access_token=" + S["fragment_request"] + "&state=s1").json()["ok"]
    r = requests.get(case("redirect"), allow_redirects=False)
    assert r.status_code == 302 and "#access_token=" in r.headers["Location"]
    assert httpx.get(case("redirect"), follow_redirects=True).json()["ok"]
    encoded = S["query_percent_key"].replace("-", "%2D")
    assert httpx.get(case("pct") + "?q=my%20key%20" + encoded).json()["ok"]
    assert requests.get(case("pct") + "?q=my%20key%20" + S["query_spaced_key"]).json()["ok"]


def test_base64_documents(agent_replay):
    import base64

    note = base64.b64encode(("deploy notes\\nkey: " + S["doc_anthropic_base64"] + "\\n").encode()).decode()
    client = anthropic.Anthropic(api_key="x", base_url=case("messages"), max_retries=0)
    content = [
        {"type": "document", "source": {"type": "base64", "media_type": "text/plain", "data": note}},
        {"type": "text", "text": "summarise"},
    ]
    messages = [{"role": "user", "content": content}]
    reply = client.messages.create(model="claude-test", max_tokens=10, messages=messages)
    assert reply.content[0].text
    config = json.dumps({"client_id": "app", "client_secret": S["doc_openai_file_data"]}).encode()
    file_data = "data:application/json;base64," + base64.b64encode(config).decode()
    oai = openai.OpenAI(api_key="x", base_url=case("chat") + "/v1", max_retries=0)
    part = {"type": "file", "file": {"filename": "config.json", "file_data": file_data}}
    message = {"role": "user", "content": [part, {"type": "text", "text": "check it"}]}
    assert oai.chat.completions.create(model="gpt-test", messages=[message]).choices


def test_write_effect_receipt(agent_replay):
    r = requests.post(case("stripe"), json={"amount": 5}, headers={"Idempotency-Key": IDEM + "-2"})
    assert r.json()["id"] == "ch_1"


def test_sse_whole(agent_replay):
    with httpx.stream("GET", case("sse_whole")) as r:
        assert b"tick" in r.read()


def test_openai_calls(agent_replay):
    client = openai.OpenAI(api_key=S["sdk_openai_api_key"], base_url=case("chat") + "/v1", max_retries=0)
    messages = [
        # Long enough for the blob store: blobs are files written too.
        {"role": "system", "content": "rules: " + S["msg_anthropic_key"] + " is private. " + "policy " * 400},
        {"role": "user", "content": "my key is " + S["msg_openai_key"] + ", log in"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0",
         "content": "curl -H 'Authorization: Bearer " + S["msg_bearer_text"] + "' https://x"},
    ]
    reply = client.chat.completions.create(model="gpt-test", messages=messages)
    assert reply.choices[0].message.tool_calls[0].function.name == "login"
    stream = client.chat.completions.create(model="gpt-test", messages=messages[:2], stream=True)
    assert len(list(stream)) > 3


def test_anthropic_call(agent_replay):
    key = S["hdr_x_api_key"] + "-ant"
    client = anthropic.Anthropic(api_key=key, base_url=case("messages"), max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    reply = client.messages.create(model="claude-test", max_tokens=10, messages=messages)
    assert reply.content[1].name == "configure"


@tool(name="login")
def login(user, password):
    return {"ok": True, "user": user}


@tool(name="read_env")
def read_env():
    return "SLACK_TOKEN=" + S["tool_result_slack"] + "\\nDEBUG=1"


def test_explicit_api(agent_replay):
    assert login("ann", S["tool_arguments"])["ok"]
    assert "DEBUG" in read_env()
    record_state({"user": "ann", "api_key": S["state_snapshot"]}, snapshot=True, label="session")
    kind = "RSA " + "PRIVATE KEY"
    begin, end = f"-----BEGIN {kind}-----", f"-----END {kind}-----"
    block = begin + "\\n" + S["retrieval_private_key"] + "\\n" + end
    record_retrieval("find the deploy key " + block, document_ids=["d1"], corpus_version="1")


@pytest.mark.parametrize("key", [S["param_id"]])
def test_param_id(agent_replay, key):
    assert httpx.get(case("param")).json()["ok"]
"""

INNER_PYPROJECT = """
[tool.agentreplay]
redact_keys = ["customer_pin"]
"""

POSITION_TESTS = 21  # test functions in INNER_TESTS


@dataclass
class Written:
    files: dict[str, bytes]  # relative path -> bytes (every file under the inner session's directory)
    outcomes: list[Any]  # (passed, failed) per session
    reports: list[str]
    verify_problems: list[str]  # what `agentreplay verify`'s secret scan says about the cassettes

    def blob(self) -> bytes:
        names = "\n".join(self.files).encode()
        return names + b"\n" + b"\n".join(self.files.values())


def _forms(secret: str) -> list[bytes]:
    """The secret as it could sit on disk: raw, percent-encoded, JSON-escaped, and base64 at any alignment."""
    raw = secret.encode()
    forms = {raw, quote(secret, safe="").encode(), json.dumps(secret)[1:-1].encode()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw)
        # Skip the characters that mix in the padding bytes or the unknown neighbours.
        start = -(-offset * 4 // 3) + 1
        forms.add(encoded[start:-4])
        encoded = base64.urlsafe_b64encode(b"\0" * offset + raw)
        forms.add(encoded[start:-4])
    return [f for f in forms if len(f) >= 8]


_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_\-]{16,}={0,2}")


@functools.lru_cache(maxsize=256)
def _views(data: bytes, depth: int = 2) -> tuple[bytes, ...]:
    """What a reviewer could decode out of written bytes: percent-encoding (twice), every base64 run (both
    alphabets, and base64 inside that), and the gzip and zstd frames those hold."""
    import zstandard

    views = [data, unquote_to_bytes(data), unquote_to_bytes(unquote_to_bytes(data))]
    for run in set(_BASE64_RUN.findall(data)):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(run + b"=" * (-len(run) % 4))
            except ValueError:
                continue
            views.append(raw)
            for expand in (gzip.decompress, zstandard.ZstdDecompressor().decompress):
                with contextlib.suppress(Exception):
                    views.append(expand(raw))
            if depth > 1 and raw.isascii():
                views.extend(_views(raw, depth - 1))
    return tuple(views)


def _leaks(data: bytes, position: Position) -> list[str]:
    views = _views(data)
    found = [form.decode() for form in _forms(position.secret) if any(form in view for view in views)]
    if position.split:
        secret = position.secret
        # Pieces that reach past the public format prefix ("sk-proj-" is in every such key).
        start = len(_PUBLIC_PREFIX) if secret.startswith(_PUBLIC_PREFIX) else 0
        found += [
            secret[i : i + 8]
            for i in range(max(0, start - 7), len(secret) - 7)
            if secret[i : i + 8].encode() in data
        ]
    return found


_SCAN: dict[str, Written] = {}


def _run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Written:
    # Imported here once: pytester drops modules an inline session imported, so each of the four
    # sessions would import the SDKs again (most of their run time).
    for module in ("aiohttp", "anthropic", "httpx", "httpx2", "openai", "requests"):
        importlib.import_module(module)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("AR_REDTEAM_SECRETS", json.dumps(SECRETS))
        monkeypatch.setenv("AR_REDTEAM_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("AR_REDTEAM_IDEM", IDEMPOTENCY_KEY)
        for var in ("GITHUB_STEP_SUMMARY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
            monkeypatch.delenv(var, raising=False)
        pytester.makeconftest(INNER_CONFTEST)
        pytester.makepyfile(test_positions=INNER_TESTS)
        pytester.makefile(".toml", pyproject=INNER_PYPROJECT)
        # pytest's own cache would store the node ids (the parametrize id) itself: not the plugin's file.
        base = ("-p", "no:cacheprovider", "-q")
        outcomes = []
        record = pytester.runpytest(*base, "--agentreplay-record=all", "--agentreplay-report=report.md")
        outcomes.append(record.parseoutcomes())
        clean = pytester.runpytest(*base)
        outcomes.append(clean.parseoutcomes())
        monkeypatch.setenv("AR_REDTEAM_DRIFT", "1")
        for report in ("report.json", "report.html"):
            drifted = pytester.runpytest(*base, f"--agentreplay-report={report}")
            outcomes.append(drifted.parseoutcomes())
        monkeypatch.delenv("AR_REDTEAM_DRIFT")
    finally:
        server.shutdown()
        server.server_close()
    from pytest_agentreplay.cassette.read import load_cassette

    # The drifting runs left pending files beside the cassettes: scanned for secrets with every file below.
    cassettes = sorted(p for p in (pytester.path / "cassettes").glob("*/*.json") if ".pending." not in p.name)
    problems = [f"{p.name}: {problem}" for p in cassettes for problem in load_cassette(p).verify()]
    files = {
        str(p.relative_to(pytester.path)): p.read_bytes()
        for p in sorted(pytester.path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    # Directories have names too (the cassette folder of a test module, a parametrize id...).
    files.update(
        {str(p.relative_to(pytester.path)) + "/": b"" for p in pytester.path.rglob("*") if p.is_dir()}
    )
    return Written(files, outcomes, [n for n in files if n.startswith("report.")], problems)


@pytest.fixture
def written(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Written:
    # One inner run for the whole module (each position is its own outer test over the same scan).
    if "scan" not in _SCAN:
        _SCAN["scan"] = _run_inner(request.getfixturevalue("pytester"), monkeypatch)
    return _SCAN["scan"]


def test_the_inner_sessions_recorded_replayed_and_reported(written: Written) -> None:
    record, clean, *drifted = written.outcomes
    assert record == {"passed": POSITION_TESTS}, "recording must succeed (no SecretLeakError, no crash)"
    assert clean == {"passed": POSITION_TESTS}, "a clean replay must match every redacted request"
    for outcome in drifted:
        assert outcome.get("failed") == POSITION_TESTS, outcome
    assert sorted(written.reports) == ["report.html", "report.json", "report.md"]
    cassettes = [
        n for n in written.files if n.startswith("cassettes/") and n.endswith(".json") and ".blobs" not in n
    ]
    pending = [n for n in cassettes if n.endswith(".pending.json")]
    assert len(pending) == POSITION_TESTS, "each drifting test keeps its pending drift (scanned below)"
    assert len(cassettes) - len(pending) == POSITION_TESTS, cassettes
    assert any("/.blobs/" in n for n in written.files), f"no blob among {sorted(written.files)}"
    assert b'"drift"' in written.files["report.json"] and b"Drift" in written.files["report.html"]


@pytest.mark.parametrize("position", POSITIONS, ids=[p.name for p in POSITIONS])
def test_secret_never_written(written: Written, position: Position) -> None:
    where = {name: _leaks(name.encode() + b"\n" + data, position) for name, data in written.files.items()}
    leaked = {name: forms for name, forms in where.items() if forms}
    shown = sorted({form for forms in leaked.values() for form in forms})
    assert not leaked, f"{position.what}: leaked into {sorted(leaked)} as {shown}"


def test_verify_finds_nothing_left(written: Written) -> None:
    # The same decoded views as the write-time scan: a clean recording is clean for verify too.
    assert written.verify_problems == []


def test_idempotency_keys_stay_readable(written: Written) -> None:
    # The product matches writes on them: redaction must never hide an Idempotency-Key.
    everything = written.blob()
    assert IDEMPOTENCY_KEY.encode() in everything
    assert (IDEMPOTENCY_KEY + "-2").encode() in everything
