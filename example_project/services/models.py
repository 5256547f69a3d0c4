"""Scripted model servers speaking the OpenAI Chat Completions and the Anthropic Messages wire formats.

Plain JSON responses and SSE streams (``"stream": true``): OpenAI ``chat.completion.chunk`` events with
text and tool-call deltas, an optional usage chunk (``stream_options.include_usage``) and ``[DONE]``;
Anthropic ``message_start`` / ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``) / ``content_block_stop`` / ``message_delta`` / ``message_stop``.

Deterministic: ids come from a per-server counter, ``created`` is fixed, token counts are computed
from the request size, and the reply is chosen from the scenario script by the conversation state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .base import Exchange, LocalService
from .scripts import Reply, Turn

Provider = Literal["openai", "anthropic"]
CREATED = 1714000000
FALLBACK = Reply(text="I'm sorry, I can't help with that request.")


@dataclass(frozen=True)
class ConversationView:
    """What the script matches on, extracted from either wire format."""

    user_text: str
    tool_results: tuple[tuple[str, str], ...]  # (tool name, result text), in order

    @property
    def last(self) -> tuple[str, str] | None:
        return self.tool_results[-1] if self.tool_results else None


def choose(script: Sequence[Turn], view: ConversationView) -> Reply:
    last = view.last
    for turn in script:
        if turn.after is None:
            if last is None:
                return turn.reply
            continue
        if (
            last is not None
            and last[0] == turn.after
            and (turn.result_contains is None or turn.result_contains in last[1])
        ):
            return _fill(turn.reply, last[1])
    return FALLBACK


def _fill(reply: Reply, result_text: str) -> Reply:
    if reply.text is None or "{receipt}" not in reply.text:
        return reply
    try:
        result = json.loads(result_text)
    except ValueError:
        result = {}
    receipt = result.get("receipt", "?") if isinstance(result, dict) else "?"
    return Reply(text=reply.text.replace("{receipt}", str(receipt)), tool_calls=reply.tool_calls)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def openai_view(messages: list[dict[str, Any]]) -> ConversationView:
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    user = ""
    for message in messages:
        role = message.get("role")
        if role == "user" and not user:
            user = _text_of(message.get("content"))
        for tc in message.get("tool_calls") or ():
            names[tc.get("id", "")] = tc.get("function", {}).get("name", "")
        if role == "tool":
            results.append(
                (names.get(message.get("tool_call_id", ""), "?"), _text_of(message.get("content")))
            )
    return ConversationView(user, tuple(results))


def anthropic_view(messages: list[dict[str, Any]]) -> ConversationView:
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    user = ""
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and not user:
            user = _text_of(content)
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block.get("id", "")] = block.get("name", "")
            elif block.get("type") == "tool_result":
                results.append((names.get(block.get("tool_use_id", ""), "?"), _text_of(block.get("content"))))
    return ConversationView(user, tuple(results))


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


class ScriptedModelServer(LocalService):
    """One provider's endpoint, answering from ``script``. ``service`` picks the fixed port."""

    name: ClassVar[str] = "model"

    def __init__(
        self,
        provider: Provider,
        script: Sequence[Turn],
        *,
        service: str | None = None,
        id_prefix: str = "sup",
        port: int | None = None,
        models: dict[str, Sequence[Turn]] | None = None,
    ) -> None:
        from .base import PORTS

        self.name = service or provider  # type: ignore[misc]
        super().__init__(PORTS[self.name] if port is None else port)
        self.provider = provider
        self.script = tuple(script)
        # Other models this server hosts (by request ``model``), e.g. a challenger for model-comparison.
        self.models = {name: tuple(turns) for name, turns in (models or {}).items()}
        self.id_prefix = id_prefix
        self.calls = 0

    def handle(self, exchange: Exchange) -> None:
        path = exchange.path.split("?", 1)[0].rstrip("/")
        body = exchange.json_body()
        if exchange.method != "POST" or not isinstance(body, dict):
            exchange.json(404, {"error": {"type": "not_found", "message": f"no route {exchange.path}"}})
            return
        if self.provider == "openai" and path == "/v1/chat/completions":
            if not exchange.headers.get("authorization", "").startswith("Bearer sk-test-"):
                exchange.json(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return
            self._chat(exchange, body)
        elif self.provider == "anthropic" and path == "/v1/messages":
            key = exchange.headers.get("x-api-key") or exchange.headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            if not key.startswith("sk-ant-test-"):
                exchange.json(
                    401,
                    {
                        "type": "error",
                        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                    },
                )
                return
            self._messages(exchange, body)
        else:
            exchange.json(404, {"error": {"type": "not_found", "message": f"no route {path}"}})

    def _script_for(self, req: dict[str, Any]) -> tuple[Turn, ...]:
        return self.models.get(str(req.get("model")), self.script)

    def _next(self) -> int:
        with self.lock:
            self.calls += 1
            return self.calls

    @staticmethod
    def _usage_in(exchange: Exchange) -> int:
        return max(1, len(exchange.body) // 4)

    # -- OpenAI Chat Completions -------------------------------------------------------------------

    def _chat(self, exchange: Exchange, req: dict[str, Any]) -> None:
        reply = choose(self._script_for(req), openai_view(req.get("messages") or []))
        n = self._next()
        cid = f"chatcmpl-{self.id_prefix}{n:04d}"
        model = req.get("model", "gpt-support")
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{self.id_prefix}{n:04d}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, sort_keys=True)},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        out_tokens = max(1, len(reply.text or "") // 4 + 12 * len(calls))
        in_tokens = self._usage_in(exchange)
        usage = {
            "prompt_tokens": in_tokens,
            "completion_tokens": out_tokens,
            "total_tokens": in_tokens + out_tokens,
        }
        if not req.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
            if calls:
                message["tool_calls"] = calls
            exchange.json(
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": CREATED,
                    "model": model,
                    "system_fingerprint": "fp_support_1",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                },
            )
            return

        def chunk(
            delta: dict[str, Any], finish_reason: str | None = None, u: Any = None, choices: bool = True
        ) -> bytes:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "system_fingerprint": "fp_support_1",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
                if choices
                else [],
            }
            if u is not None or not choices:
                obj["usage"] = u
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def events() -> Iterator[bytes]:
            yield chunk({"role": "assistant", "content": "" if reply.text else None, "refusal": None})
            for piece in _pieces(reply.text or ""):
                yield chunk({"content": piece})
            for i, c in enumerate(calls):
                head = {"index": i, "id": c["id"], "type": "function"}
                yield chunk(
                    {"tool_calls": [{**head, "function": {"name": c["function"]["name"], "arguments": ""}}]}
                )
                for piece in _pieces(c["function"]["arguments"], 12):
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            yield chunk({}, finish)
            if (req.get("stream_options") or {}).get("include_usage"):
                yield chunk({}, None, usage, choices=False)
            yield b"data: [DONE]\n\n"

        exchange.stream(events())

    # -- Anthropic Messages ------------------------------------------------------------------------

    def _messages(self, exchange: Exchange, req: dict[str, Any]) -> None:
        reply = choose(self._script_for(req), anthropic_view(req.get("messages") or []))
        n = self._next()
        model = req.get("model", "claude-support")
        content: list[dict[str, Any]] = []
        if reply.text is not None:
            content.append({"type": "text", "text": reply.text})
        for i, (name, args) in enumerate(reply.tool_calls):
            content.append(
                {"type": "tool_use", "id": f"toolu_{self.id_prefix}{n:04d}_{i}", "name": name, "input": args}
            )
        stop = "tool_use" if reply.tool_calls else "end_turn"
        in_tokens = self._usage_in(exchange)
        out_tokens = max(1, len(reply.text or "") // 4 + 12 * len(reply.tool_calls))
        message = {
            "id": f"msg_{self.id_prefix}{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
        }
        if not req.get("stream"):
            exchange.json(200, message)
            return

        def ev(kind: str, **fields: Any) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

        def events() -> Iterator[bytes]:
            start = {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": in_tokens, "output_tokens": 1},
            }
            yield ev("message_start", message=start)
            yield ev("ping")
            for idx, block in enumerate(content):
                if block["type"] == "text":
                    yield ev("content_block_start", index=idx, content_block={"type": "text", "text": ""})
                    for piece in _pieces(block["text"]):
                        yield ev(
                            "content_block_delta", index=idx, delta={"type": "text_delta", "text": piece}
                        )
                else:
                    yield ev("content_block_start", index=idx, content_block={**block, "input": {}})
                    for piece in _pieces(json.dumps(block["input"], sort_keys=True), 12):
                        yield ev(
                            "content_block_delta",
                            index=idx,
                            delta={"type": "input_json_delta", "partial_json": piece},
                        )
                yield ev("content_block_stop", index=idx)
            yield ev(
                "message_delta",
                delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": out_tokens},
            )
            yield ev("message_stop")

        exchange.stream(events())
