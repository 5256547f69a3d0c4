"""The workload of ``bench/bench_pytest.py``: what its tests send, and what the server answers.

Imported by the bench (its recording server answers with :func:`answer`) and copied as ``workload.py``
into every temporary project, where the generated tests call :func:`converse` (rows a-d: one long test)
or :func:`agent` (the suite-shape rows: one call per test). Depends on ``httpx`` (and ``openai`` for the
agent), so it runs unchanged in every tool's virtualenv.

Every tool runs the same body with the clients that users build: a real ``httpx.Client()`` and a real
``openai.OpenAI(...)`` (each builds its TLS context: ``load_verify_locations`` on the CA bundle). The
floor differs only in how requests are answered: inside :func:`answered_from_memory` the
``handle_request`` of ``httpx.HTTPTransport`` (and of ``httpx2.HTTPTransport``, the openai SDK's own
client) answers with :func:`answer` instead of opening a connection; everything above the transport
(client, SDK, response parsing) runs as it does for the tools.

The traffic:
- :func:`converse`: ``gets`` plain GETs of small JSON items spread evenly between ``calls`` OpenAI-style
  chat-completions POSTs, where the conversation resends its whole growing history every call (a system
  prompt, then a ~150-byte user message and a ~150-byte assistant reply per turn);
- :func:`agent`: an agent on the ``openai`` SDK making :data:`AGENT_CALLS` chat completions, each
  answered with a tool call that the agent runs before the next completion; every other tool call is a
  GET of an item (2 GETs per test).
Answers depend only on the request, so a replay matches whatever recorded them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

SYSTEM = (
    "You are a careful support agent for a parcel company. Answer briefly, cite the order id, "
    "never promise a delivery date you cannot see in the tracking data, and hand over to a human "
    "when the customer asks for a refund above the limit. "
) * 3
MODEL = "gpt-4o-mini"
ELSEWHERE_HEADERS = "AGENTREPLAY_BENCH_CLIENT_HEADERS"
AGENT_CALLS = 4
AGENT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "integer"}},
                "required": ["item"],
            },
        },
    }
    for name, description in (
        ("lookup_item", "Fetch an item of the order from the tracking service."),
        ("estimate_delivery", "Estimate the days left before an item is delivered."),
    )
]


def item(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"item {i}", "tags": ["parcel", "tracked"], "price": round(i * 1.5, 2)}


def user_text(turn: int) -> str:
    text = f"Question {turn}: where is my parcel? It was due yesterday and the tracking page has not moved."
    return text.ljust(150, ".")


def reply_text(turn: int) -> str:
    text = f"Answer {turn}: your parcel left the depot this morning and should reach you tomorrow evening."
    return text.ljust(150, ".")


def case_text(case: int) -> str:
    return f"Case {case}: order {1000 + case} has not moved for two days; what happens next?"


def agent_reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool call, by the case named in the user message and the number of turns so far."""
    case = int(messages[1]["content"].split(":", 1)[0].split()[1])
    turn = sum(1 for m in messages if m["role"] == "assistant")
    name = AGENT_TOOLS[turn % 2]["function"]["name"]
    call = {
        "id": f"call_{case}_{turn}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"item": case * AGENT_CALLS + turn})},
    }
    return {
        "id": f"chatcmpl-{case}-{turn}",
        "object": "chat.completion",
        "created": 1700000000 + turn,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 40 * len(messages), "completion_tokens": 20, "total_tokens": 0},
    }


def answer(method: str, url: str, body: bytes) -> tuple[int, bytes]:
    """Status and JSON body for a request, a function of the request alone."""
    path = urlsplit(url).path
    if method == "GET" and path.startswith("/items/"):
        return 200, json.dumps(item(int(path.rsplit("/", 1)[1]))).encode()
    if method == "POST" and path == "/v1/chat/completions":
        request = json.loads(body)
        messages = request["messages"]
        if "tools" in request:
            return 200, json.dumps(agent_reply(messages)).encode()
        turn = sum(1 for m in messages if m["role"] == "user") - 1
        reply = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 1700000000 + turn,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": reply_text(turn)},
                }
            ],
            "usage": {"prompt_tokens": 40 * len(messages), "completion_tokens": 30, "total_tokens": 0},
        }
        return 200, json.dumps(reply).encode()
    return 404, b'{"error": "not found"}'


@contextmanager
def answered_from_memory(floor: bool) -> Iterator[None]:
    """For the floor: every loaded httpx-family transport answers from :func:`answer`, no socket.

    Patched on the class, so the clients stay the ones users build (their TLS context included) and
    only the last step, sending the request, is replaced."""
    if not floor:
        yield
        return
    patched: list[tuple[type, Callable[..., Any]]] = []
    for name in ("httpx", "httpx2"):  # httpx2: the openai SDK's own client, when it is loaded
        module = sys.modules.get(name)
        if module is None:
            continue
        transport: type = module.HTTPTransport
        response_type = module.Response

        def handle_request(self: object, request: Any, response_type: Any = response_type) -> Any:
            status, content = answer(request.method, str(request.url), request.read())
            return response_type(status, headers={"content-type": "application/json"}, content=content)

        patched.append((transport, transport.handle_request))
        transport.handle_request = handle_request
    try:
        yield
    finally:
        for transport, original in patched:
            transport.handle_request = original


def client_headers() -> dict[str, str]:
    """Headers of another machine's client (``ELSEWHERE_HEADERS``, JSON): a replay where every request
    differs from its recording by what the HTTP stack chose, not by what the agent sent."""
    headers: dict[str, str] = json.loads(os.environ.get(ELSEWHERE_HEADERS) or "{}")
    return headers


def converse(base: str, gets: int, calls: int, *, floor: bool, gets_via: str) -> None:
    """Rows a-d, the test body: ``gets`` GETs spread between ``calls`` growing-conversation model calls."""
    headers = client_headers()
    with answered_from_memory(floor):
        get: Callable[[str], httpx.Response]
        if gets_via == "httpx.get":  # a new client (and TLS context) per GET, as ``httpx.get`` builds one

            def get(url: str) -> httpx.Response:
                return httpx.get(url, headers=headers)

            get_client = None
        else:
            get_client = httpx.Client(headers=headers)
            get = get_client.get
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        with httpx.Client(headers=headers) as chat:
            for turn in range(calls):
                for i in range(turn * gets // calls, (turn + 1) * gets // calls):
                    got = get(f"{base}/items/{i}?page={i % 7}")
                    assert got.status_code == 200 and got.json()["id"] == i
                messages.append({"role": "user", "content": user_text(turn)})
                body = {"model": MODEL, "messages": messages, "temperature": 0}
                reply = chat.post(f"{base}/v1/chat/completions", json=body)
                assert reply.status_code == 200
                message = reply.json()["choices"][0]["message"]
                assert message["content"] == reply_text(turn)
                messages.append(message)
        if get_client is not None:
            get_client.close()


def agent(base: str, case: int, *, floor: bool, openai_client: str = "sdk") -> None:
    """The suite-shape rows, one test: an agent on the ``openai`` SDK, its clients built per test as a
    fixture would build them. ``openai_client``: ``sdk`` lets the SDK build its own HTTP client (as most
    users do), ``httpx`` passes ``http_client=httpx.Client()``."""
    import openai  # heavy: only the suite-shape rows pay its import, rows a-d stay as they were

    headers = client_headers()
    with answered_from_memory(floor):
        http_client = httpx.Client(headers=headers) if openai_client == "httpx" else None
        llm = openai.OpenAI(
            base_url=f"{base}/v1",
            api_key="sk-bench",
            default_headers=headers or None,
            http_client=http_client,
        )
        tools = httpx.Client(headers=headers)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": case_text(case)},
        ]
        for turn in range(AGENT_CALLS):
            completion = llm.chat.completions.create(
                model=MODEL, messages=messages, tools=AGENT_TOOLS, temperature=0
            )
            message = completion.choices[0].message
            assert message.tool_calls, f"turn {turn}: no tool call"
            call = message.tool_calls[0]
            arguments = json.loads(call.function.arguments)
            if call.function.name == "lookup_item":
                got = tools.get(f"{base}/items/{arguments['item']}")
                assert got.status_code == 200 and got.json()["id"] == arguments["item"]
                result = got.text
            else:
                result = json.dumps({"days": arguments["item"] % 5 + 1})
            messages.append(message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        tools.close()
        llm.close()
        if http_client is not None:
            http_client.close()
