"""Provider adapters: recognise a model endpoint and extract the decision from its exchange.

An adapter is a module exposing ``NAME``, ``match(request, settings) -> endpoint | None``,
``request_fields(endpoint, body) -> dict`` and ``response_fields(endpoint, body_shape) -> dict``, and
optionally ``model_from_request(request) -> str | None`` for APIs that name the model in the URL
(Gemini), used when the body names none, and ``url_fields(request) -> dict`` for what else the URL says
(Azure OpenAI's deployment and ``api-version``, Vertex AI's location), added to the event's data.
"""

from __future__ import annotations

from typing import Protocol

from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import anthropic, azure_openai, bedrock, cohere, gemini, mistral, ollama, openai


class ProviderAdapter(Protocol):
    NAME: str

    def match(self, request: HttpRequest, settings: RunSettings) -> str | None: ...

    def request_fields(self, endpoint: str, body: object) -> Document: ...

    def response_fields(self, endpoint: str, body: Document | None) -> Document: ...


ADAPTERS: dict[str, ProviderAdapter] = {
    # Asked in order: Azure OpenAI and Mistral speak OpenAI's wire format at addresses of their own, so
    # they come before OpenAI's adapter, which takes any host's ``/chat/completions``.
    azure_openai.NAME: azure_openai,
    mistral.NAME: mistral,
    openai.NAME: openai,
    anthropic.NAME: anthropic,
    gemini.NAME: gemini,
    ollama.NAME: ollama,
    cohere.NAME: cohere,
    bedrock.NAME: bedrock,
}


def request_model(adapter: ProviderAdapter, request: HttpRequest) -> str | None:
    """The model an adapter reads from the request itself (the URL), if it knows how."""
    from_request = getattr(adapter, "model_from_request", None)
    if from_request is None:
        return None
    found = from_request(request)
    return str(found) if found is not None else None


def url_fields(adapter: ProviderAdapter, request: HttpRequest) -> Document:
    """What an adapter reads from the request's URL beside the model, if it reads anything there."""
    from_url = getattr(adapter, "url_fields", None)
    if from_url is None:
        return {}
    found = from_url(request)
    return dict(found) if isinstance(found, dict) else {}
