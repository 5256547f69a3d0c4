"""Mistral adapter: La Plateforme's Chat Completions on ``*.mistral.ai`` (elsewhere a Mistral model is an
OpenAI call), its responses read by the OpenAI adapter."""

from __future__ import annotations

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields, openai

NAME = "mistral"
CHAT = openai.CHAT

# OpenAI's request keys (a key Mistral does not know fails the request) and Mistral's own.
_DECODING = (*openai.CHAT_DECODING, "random_seed", "safe_prompt", "prediction", "prompt_mode")


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST" or not (request.host == "mistral.ai" or request.host.endswith(".mistral.ai")):
        return None
    return CHAT if request.path.rstrip("/").endswith("/v1/chat/completions") else None


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    return fields.request_fields(body, _DECODING, digests=digests)


response_fields = openai.response_fields
