"""The workload of ``bench/bench_pytest.py``: what its tests send, and what the server answers.

Imported by the bench (its recording server answers with :func:`answer`) and copied as ``workload.py``
into every temporary project, where the generated ``test_workload.py`` calls :func:`converse` with
either real ``httpx`` clients (recorded, then replayed by a plugin) or, for the floor, clients whose
requests all go to an ``httpx.MockTransport`` that answers with the same :func:`answer`. Depends on
``httpx`` only, so it runs unchanged in the peers' virtualenvs.

The traffic: ``gets`` plain GETs of small JSON items spread evenly between ``calls`` OpenAI-style
chat-completions POSTs, where the conversation resends its whole growing history every call (a system
prompt, then a ~150-byte user message and a ~150-byte assistant reply per turn). Answers depend only
on the request, so a replay matches whatever recorded them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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


def item(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"item {i}", "tags": ["parcel", "tracked"], "price": round(i * 1.5, 2)}


def user_text(turn: int) -> str:
    text = f"Question {turn}: where is my parcel? It was due yesterday and the tracking page has not moved."
    return text.ljust(150, ".")


def reply_text(turn: int) -> str:
    text = f"Answer {turn}: your parcel left the depot this morning and should reach you tomorrow evening."
    return text.ljust(150, ".")


def answer(method: str, url: str, body: bytes) -> tuple[int, bytes]:
    """Status and JSON body for a request, a function of the request alone."""
    path = urlsplit(url).path
    if method == "GET" and path.startswith("/items/"):
        return 200, json.dumps(item(int(path.rsplit("/", 1)[1]))).encode()
    if method == "POST" and path == "/v1/chat/completions":
        messages = json.loads(body)["messages"]
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


def mock_handler(request: httpx.Request) -> httpx.Response:
    status, content = answer(request.method, str(request.url), request.content)
    return httpx.Response(status, content=content, headers={"content-type": "application/json"})


def floor_client() -> httpx.Client:
    """Built like ``httpx.Client()`` (its default transport loads the CA bundle); every request is mocked."""
    return httpx.Client(mounts={"all://": httpx.MockTransport(mock_handler)})


def converse(base: str, gets: int, calls: int, *, floor: bool, gets_via: str) -> None:
    """The test body: ``gets`` GETs spread between ``calls`` growing-conversation model calls."""
    get: Callable[[str], httpx.Response]
    # Headers of another machine's client (``ELSEWHERE_HEADERS``, JSON): a replay where every request
    # differs from its recording by what the HTTP stack chose, not by what the agent sent.
    headers = json.loads(os.environ.get(ELSEWHERE_HEADERS) or "{}")
    if gets_via == "httpx.get":  # a new client (and SSL context) per GET, as ``httpx.get`` builds one

        def get(url: str) -> httpx.Response:
            if not floor:
                return httpx.get(url, headers=headers)
            with floor_client() as fresh:
                return fresh.get(url)

        get_client = None
    else:
        get_client = floor_client() if floor else httpx.Client(headers=headers)
        get = get_client.get
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    with floor_client() if floor else httpx.Client(headers=headers) as chat:
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
