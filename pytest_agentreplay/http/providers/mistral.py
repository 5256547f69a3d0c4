"""Mistral adapter: La Plateforme's Chat Completions on ``*.mistral.ai`` (elsewhere a Mistral model is an
OpenAI call), its responses read by the OpenAI adapter."""

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


response_fields = openai.response_fields
