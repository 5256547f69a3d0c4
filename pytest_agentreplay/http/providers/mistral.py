"""Mistral adapter: La Plateforme's Chat Completions on ``*.mistral.ai`` (elsewhere a Mistral model is an
OpenAI call), read by the OpenAI adapter once a content list of chunks is its text chunks' text.
"""

from __future__ import annotations

from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields, openai

NAME = "mistral"
CHAT = openai.CHAT

_DECODING = (
    "temperature",
    "top_p",
    "max_tokens",
    "random_seed",
    "stop",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "safe_prompt",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "prediction",
    "prompt_mode",
    "reasoning_effort",
)


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST" or not (request.host == "mistral.ai" or request.host.endswith(".mistral.ai")):
        return None
    return CHAT if request.path.rstrip("/").endswith("/v1/chat/completions") else None


def request_fields(endpoint: str, body: object) -> Document:
    return fields.request_fields(body, _DECODING)


def _text_of(content: object) -> object:
    """A list of content chunks -> the text of its text chunks; any other content as it is."""
    if not isinstance(content, list):
        return content
    return "".join(
        str(part.get("text") or "")
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )


def _flat_choices(chunk: object, key: str) -> object:
    """``chunk`` with each choice's ``message``/``delta`` content as text, copied only where it differs."""
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        return chunk
    choices: list[object] = []
    changed = False
    for choice in chunk["choices"]:
        inner = choice.get(key) if isinstance(choice, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("content"), list):
            choice = {**choice, key: {**inner, "content": _text_of(inner["content"])}}
            changed = True
        choices.append(choice)
    return {**chunk, "choices": choices} if changed else chunk


def response_fields(endpoint: str, body: Document | None) -> Document:
    if body and isinstance(body.get("sse"), list):
        events = [
            {**ev, "data": _flat_choices(ev.get("data"), "delta")} if isinstance(ev, dict) else ev
            for ev in body["sse"]
        ]
        body = {**body, "sse": events}
    elif body and "json" in body:
        body = {**body, "json": _flat_choices(body["json"], "message")}
    return openai.response_fields(CHAT, body)
