"""Local services for the model comparison's tests, on 127.0.0.1: a model speaking OpenAI's Chat Completions
that answers as one of several models, a judge on the same endpoint, and the refund agent's tools.

The model's policy for the refund agent (order id from the user's message):

- ``agree``: lookup_order(order) -> refund(order, 20) -> "Refund of 20 EUR issued for order X.";
- ``seeded``: at the second decision, searches the policy instead of refunding in a share of runs drawn
  from a generator seeded per order (``shares``); after the search it refunds as recorded. Every choice is
  logged per order (``choices``), which the tests hold the reported agreement to;
- ``reworded``: the recorded path, another wording of the answer (``answer``);
- ``other_write``: refunds another amount (a write the recording holds no receipt for).

``token_factor`` multiplies the usage it reports. A request whose system message is the judge's prompt is
the judge's: counted in ``judge_calls``, passed when the graded output names the refund.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class _Server:
    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.lock = threading.Lock()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _reply(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, value = owner.answer(self.command, self.path, body)
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

        return Handler


JUDGE_MARK = "You grade an AI agent's output"


class ComparisonModel(_Server):
    def __init__(self) -> None:
        super().__init__()
        self.mode = "agree"
        self.shares: dict[str, float] = {}
        self.seed = 43
        self._rngs: dict[str, random.Random] = {}
        self.choices: dict[str, list[bool]] = defaultdict(list)
        self.answer_text = "Refund of 20 EUR issued for order {order}."
        self.token_factor = 1
        self.judge_calls = 0
        self.model_calls = 0

    def _rng(self, order: str) -> random.Random:
        if order not in self._rngs:
            self._rngs[order] = random.Random(f"{self.seed}-{order}")
        return self._rngs[order]

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        request = json.loads(body)
        messages = request["messages"]
        if messages[0]["role"] == "system" and JUDGE_MARK in messages[0]["content"]:
            with self.lock:
                self.judge_calls += 1
            graded = messages[-1]["content"].split("Output to grade:", 1)[1]
            passed = "refund" in graded.lower() and "20" in graded
            verdict = {"pass": passed, "reason": "names the refund and its amount" if passed else "no refund"}
            return 200, _completion(request["model"], json.dumps(verdict), [], 1)
        order = re.search(r"order (\w+)", messages[0]["content"]).group(1)  # type: ignore[union-attr]
        done = [m["content"] for m in messages if m["role"] == "tool"]
        with self.lock:
            self.model_calls += 1
            calls, text = self._decide(order, done)
        return 200, _completion(request["model"], text, calls, self.token_factor)

    def _decide(self, order: str, done: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        if not done:
            return [("lookup_order", {"order_id": order})], None
        refunded = any('"refund_id"' in d for d in done)
        if refunded:
            return [], self.answer_text.format(order=order)
        if len(done) == 1 and self.mode == "seeded":
            searches = self._rng(order).random() < self.shares.get(order, 0.0)
            self.choices[order].append(not searches)
            if searches:
                return [("search_policy", {"query": f"refund {order}"})], None
        amount = 35 if self.mode == "other_write" else 20
        return [("refund", {"order_id": order, "amount": amount})], None


def _completion(model: str, text: str | None, calls: list[tuple[str, dict[str, Any]]], factor: int) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 200 * factor, "completion_tokens": 20 * factor},
    }


class RefundTools(_Server):
    """GET /orders/<id>, GET /policy?q=..., POST /refunds (logged: the writes the tests count)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        with self.lock:
            self.log.append((method, path))
        parts = urlsplit(path)
        if method == "GET" and parts.path.startswith("/orders/"):
            return 200, {"id": parts.path.rsplit("/", 1)[1], "paid": 20, "currency": "EUR"}
        if method == "GET" and parts.path == "/policy":
            return 200, {"policy": "refunds within 30 days", "q": parse_qs(parts.query).get("q", [""])[0]}
        if method == "POST" and parts.path == "/refunds":
            order = json.loads(body)["order_id"]
            return 201, {"refund_id": f"R-{order}", "status": "issued"}
        return 404, {"error": "not found"}

    def writes(self) -> list[tuple[str, str]]:
        return [entry for entry in self.log if entry[0] == "POST"]


AGENT = r"""
import json
import os

import httpx
import openai
import pytest

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("lookup_order", "search_policy", "refund")
]


def call_tool(name, args):
    base = os.environ["TOOLS_URL"]
    if name == "lookup_order":
        return httpx.get(f"{base}/orders/{args['order_id']}").json()
    if name == "search_policy":
        return httpx.get(f"{base}/policy", params={"q": args["query"]}).json()
    key = f"rf-{args['order_id']}-{args['amount']}"
    return httpx.post(f"{base}/refunds", json=args, headers={"Idempotency-Key": key}).json()


def run_agent(order):
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-key", max_retries=0)
    messages = [{"role": "user", "content": f"Please refund order {order}."}]
    for _ in range(8):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append({"role": "assistant", "content": message.content,
                         "tool_calls": [c.model_dump() for c in message.tool_calls]})
        for c in message.tool_calls:
            result = call_tool(c.function.name, json.loads(c.function.arguments))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps(result)})
    raise RuntimeError("the agent did not answer")


@pytest.mark.agentreplay
@pytest.mark.parametrize("order", ORDERS)
def test_refund(order):
    assert "Refund" in run_agent(order)
"""


def agent_module(orders: list[str]) -> str:
    return AGENT.replace("ORDERS", repr(orders))
