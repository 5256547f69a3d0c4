"""Providers: recognise a model endpoint and read the decision from its exchange. The interface is
:class:`~.interface.Provider`; the built-in providers are this package's modules. A run asks its session's
providers (``RunSettings.providers``, built in :mod:`.registry`), code outside a session the built-in ones.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from functools import reduce
from types import MappingProxyType
from typing import Final, Protocol, cast

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import anthropic, azure_openai, bedrock, cohere, gemini, mistral, ollama, openai
from .interface import InputFields, Provider, as_input_fields

# Asked in order: Azure OpenAI and Mistral speak OpenAI's wire format at addresses of their own, so they
# come before OpenAI's adapter, which takes any host's ``/chat/completions``.
BUILTIN: Final[tuple[Provider, ...]] = (
    azure_openai,
    mistral,
    openai,
    anthropic,
    gemini,
    ollama,
    cohere,
    bedrock,
)


class ProviderSet:
    """The providers of a session, in the order they are asked, each name once. Immutable."""

    __slots__ = ("_by_name", "_not_post_only", "inputs", "order")

    def __init__(self, providers: Iterable[Provider]) -> None:
        by_name: dict[str, Provider] = {}
        for provider in providers:
            # The first of a name wins: a project's provider named like a built-in one replaces it.
            by_name.setdefault(provider.NAME, provider)
        self._by_name: Mapping[str, Provider] = MappingProxyType(by_name)
        self.order: tuple[Provider, ...] = tuple(by_name.values())
        # Each built-in provider recognises POST requests only (its ``match`` refuses any other method first;
        # ``tests/test_providers_post_only.py`` holds each to it): a GET asks the project's providers alone.
        self._not_post_only = tuple(p for p in self.order if p not in BUILTIN)
        # Every provider's input fields together: a comparison reads events of any of them.
        declared = (as_input_fields(getattr(p, "INPUT_FIELDS", None)) or InputFields() for p in self.order)
        self.inputs: InputFields = reduce(operator.or_, declared, InputFields())

    def __getitem__(self, name: str | None) -> Provider:
        return self._by_name[str(name)]

    def match(self, request: HttpRequest, settings: RunSettings) -> tuple[str, str] | None:
        """(provider name, endpoint) of the first provider that recognises ``request``."""
        for provider in self.order if request.method == "POST" else self._not_post_only:
            endpoint = provider.match(request, settings)
            if endpoint is not None:
                return provider.NAME, str(endpoint)
        return None


class _TakesDigests(Protocol):
    """A built-in provider's ``request_fields``: the :class:`Provider` one, and the body's digest memo."""

    def request_fields(self, endpoint: str, body: object, digests: DigestMemo | None = None) -> Document: ...


def request_fields_of(adapter: Provider, endpoint: str, body: object, digests: DigestMemo | None) -> Document:
    """``adapter.request_fields(endpoint, body)``; a built-in provider also takes ``digests`` (the memo
    the body was hashed with: ``core.canonical.request_digest``), and hashes the tools from it alike."""
    if digests is None or adapter not in BUILTIN:
        return adapter.request_fields(endpoint, body)
    return cast(_TakesDigests, adapter).request_fields(endpoint, body, digests)


def providers_of(settings: RunSettings) -> ProviderSet:
    """The providers a run with ``settings`` asks (its session's, else the built-in ones)."""
    found = settings.providers
    return found if isinstance(found, ProviderSet) else BUILTIN_SET


BUILTIN_SET: Final = ProviderSet(BUILTIN)

__all__ = [
    "BUILTIN",
    "BUILTIN_SET",
    "InputFields",
    "Provider",
    "ProviderSet",
    "providers_of",
    "request_fields_of",
]
