"""The two model back-ends of the agent loop, on the official SDKs: OpenAI Chat Completions with tools
and Anthropic Messages with tool_use, each plain or streamed. Each keeps its own wire-format history."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anthropic
import openai

Provider = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ModelTurn:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    response_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class ModelBackend(Protocol):
    def start(self, system: str, user: str) -> None: ...

    def step(self) -> ModelTurn: ...

    def add_results(self, turn: ModelTurn, results: list[tuple[ToolCall, str]]) -> None: ...


def _arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    value = json.loads(raw)
    return value if isinstance(value, dict) else {"value": value}


class OpenAIChat:
    def __init__(
        self, *, base_url: str, api_key: str, model: str, tools: list[ToolSpec], stream: bool, timeout: float
    ) -> None:
        self.client = openai.OpenAI(
            base_url=base_url.rstrip("/") + "/v1", api_key=api_key, max_retries=0, timeout=timeout
        )
        self.model = model
        self.stream = stream
        self.tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in tools
        ]
        self.messages: list[dict[str, Any]] = []

    def start(self, system: str, user: str) -> None:
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def step(self) -> ModelTurn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "tools": self.tools,
            "temperature": 0,
            "seed": 7,
        }
        if not self.stream:
            response = self.client.chat.completions.create(**kwargs)
            choice = response.choices[0]
            message = choice.message
            calls = [
                ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
                for c in message.tool_calls or []
                if c.type == "function"
            ]
            usage = response.usage
            return ModelTurn(
                text=message.content or "",
                tool_calls=calls,
                stop_reason=choice.finish_reason,
                response_id=response.id,
                input_tokens=usage.prompt_tokens if usage else None,
                output_tokens=usage.completion_tokens if usage else None,
            )
        stream = self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        partial: dict[int, dict[str, str]] = {}
        turn = ModelTurn(text="")
        for chunk in stream:
            turn.response_id = chunk.id
            if chunk.usage is not None:
                turn.input_tokens = chunk.usage.prompt_tokens
                turn.output_tokens = chunk.usage.completion_tokens
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                for tc in delta.tool_calls or []:
                    slot = partial.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
                if choice.finish_reason:
                    turn.stop_reason = choice.finish_reason
        turn.text = "".join(text)
        turn.tool_calls = [
            ToolCall(s["id"], s["name"], _arguments(s["arguments"])) for _, s in sorted(partial.items())
        ]
        return turn

    def add_results(self, turn: ModelTurn, results: list[tuple[ToolCall, str]]) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments, sort_keys=True)},
                }
                for c in turn.tool_calls
            ]
        self.messages.append(message)
        for call, content in results:
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


class AnthropicMessages:
    def __init__(
        self, *, base_url: str, api_key: str, model: str, tools: list[ToolSpec], stream: bool, timeout: float
    ) -> None:
        self.client = anthropic.Anthropic(
            base_url=base_url.rstrip("/"), api_key=api_key, max_retries=0, timeout=timeout
        )
        self.model = model
        self.stream = stream
        self.tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
        ]
        self.system = ""
        self.messages: list[dict[str, Any]] = []

    def start(self, system: str, user: str) -> None:
        self.system = system
        self.messages = [{"role": "user", "content": user}]

    def step(self) -> ModelTurn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": 1024,
            "system": self.system,
            "messages": self.messages,
            "tools": self.tools,
            "tool_choice": {"type": "auto"},
        }
        if self.stream:
            with self.client.messages.stream(**kwargs) as stream:
                for _event in stream:
                    pass  # text_delta / input_json_delta events are accumulated by the SDK
                message = stream.get_final_message()
        else:
            message = self.client.messages.create(**kwargs)
        text = "".join(block.text for block in message.content if block.type == "text")
        calls = [
            ToolCall(block.id, block.name, dict(block.input) if isinstance(block.input, dict) else {})
            for block in message.content
            if block.type == "tool_use"
        ]
        return ModelTurn(
            text=text,
            tool_calls=calls,
            stop_reason=message.stop_reason,
            response_id=message.id,
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
        )

    def add_results(self, turn: ModelTurn, results: list[tuple[ToolCall, str]]) -> None:
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        content.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in turn.tool_calls
        )
        self.messages.append({"role": "assistant", "content": content})
        self.messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": text} for c, text in results
                ],
            }
        )
