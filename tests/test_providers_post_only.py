"""``ProviderSet.match`` skips the built-in providers for a request that is not a POST: each of them
recognises POST requests only. Held here, provider by provider, on a request each recognises as a POST,
and the set's answer held to asking every provider in order (the project's providers still asked)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.http.exchange import HttpRequest
from pytest_agentreplay.http.providers import BUILTIN, BUILTIN_SET, Provider, ProviderSet

# A request each built-in provider recognises when it is a POST: (url, headers, body).
RECOGNISED: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "azure_openai": ("https://x.openai.azure.com/openai/deployments/d/chat/completions", {}, {}),
    "mistral": ("https://api.mistral.ai/v1/chat/completions", {}, {}),
    "openai": ("https://api.openai.com/v1/chat/completions", {}, {}),
    "anthropic": ("https://api.anthropic.com/v1/messages", {}, {}),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/models/g:generateContent", {}, {}),
    "ollama": ("http://localhost:11434/api/chat", {}, {"model": "m"}),
    "cohere": ("https://api.cohere.com/v2/chat", {}, {}),
    "bedrock": ("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", {}, {}),
}
METHODS = ("GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "post", "Post", "")


def _request(method: str, name: str) -> HttpRequest:
    url, headers, body = RECOGNISED[name]
    return HttpRequest(method, url, dict(headers), json.dumps(body).encode())


def _slow_match(providers: ProviderSet, request: HttpRequest) -> tuple[str, str] | None:
    """What ``match`` answers by definition: the first provider, in order, that recognises the request."""
    for provider in providers.order:
        endpoint = provider.match(request, RunSettings())
        if endpoint is not None:
            return provider.NAME, str(endpoint)
    return None


def test_every_builtin_is_exercised() -> None:
    assert sorted(RECOGNISED) == sorted(p.__name__.rsplit(".", 1)[-1] for p in BUILTIN)


@pytest.mark.parametrize("name", sorted(RECOGNISED))
def test_builtin_recognises_post_only(name: str) -> None:
    provider = next(p for p in BUILTIN if p.__name__.endswith("." + name))
    assert provider.match(_request("POST", name), RunSettings()) is not None
    for method in METHODS:
        assert provider.match(_request(method, name), RunSettings()) is None


class _AnyMethod:
    """A project's provider recognising every method of one address."""

    NAME = "any-method"

    def match(self, request: HttpRequest, settings: RunSettings) -> str | None:
        return "chat" if request.path == "/api/chat" else None

    def request_fields(self, endpoint: str, body: object) -> dict[str, Any]:
        return {}

    def response_fields(self, endpoint: str, body: object) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize("method", ("POST", *METHODS))
@pytest.mark.parametrize("name", sorted(RECOGNISED))
def test_match_equals_asking_every_provider(method: str, name: str) -> None:
    request = _request(method, name)
    assert BUILTIN_SET.match(request, RunSettings()) == _slow_match(BUILTIN_SET, request)
    project: Any = _AnyMethod()
    for providers in (ProviderSet([project, *BUILTIN]), ProviderSet([*BUILTIN, project])):
        assert providers.match(request, RunSettings()) == _slow_match(providers, request)
    asked: list[Provider] = [project, *BUILTIN]
    found = ProviderSet(asked).match(request, RunSettings())
    if method != "POST" and name == "ollama":
        assert found == ("any-method", "chat")  # the project's provider is still asked
