"""Hook specifications of pytest-agentreplay, added to pytest through ``pytest_addhooks``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .core.documents import Document

if TYPE_CHECKING:
    from .http.providers.interface import Provider


@pytest.hookspec(firstresult=True)
def pytest_agentreplay_classify_exchange(request: Document, response: Document) -> str | None:
    """Classify an HTTP exchange of a test before it becomes an event (called for each request).

    ``request`` is the stored payload shape (method, url, headers with secrets redacted, body); ``response``
    is its stored shape when known, else None (replay classifies a request before it picks the response to
    serve); both are copies of their own (changing them changes no event). Return ``"read"`` (served from
    the cassette in replay), ``"write"`` (an effect: stubbed with its recorded receipt), ``"model"`` (a
    model call; a provider of the session must read it, or the call is refused with ``NoProviderError``,
    which fails the test) or None to let the built-in classifier decide. The first non-None result wins;
    any other value is a usage error naming the request.
    """


@pytest.hookspec
def pytest_agentreplay_redact_event(event: Document) -> Document | None:
    """Redact one event (its JSON form, payloads inline) before it is written.

    Return a replacement dict or None to keep it. Runs after the built-in redaction and before the final
    secret scan, which still refuses to write anything shaped like a secret. ``event`` is a copy of the
    event's own (change it in place freely): a conversation's requests share their messages, and a change to
    one event's copy reaches no other event. The copy costs the request's size, on saves only.
    """


@pytest.hookspec
def pytest_agentreplay_diff_rules(item: pytest.Item, mode: str) -> list[Document] | None:
    """Add diff rules for a test (highest precedence). Same shape as ``[tool.agentreplay.rules]`` entries."""


@pytest.hookspec(firstresult=True)
def pytest_agentreplay_cassette_path(item: pytest.Item, default: Path) -> Path | None:
    """Choose the cassette path of a test; return None to keep ``default``."""


@pytest.hookspec
def pytest_agentreplay_providers(config: pytest.Config) -> Sequence[Provider | type[Provider]] | None:
    """Add providers: objects (or classes, instantiated without arguments) with the members of
    :class:`pytest_agentreplay.Provider`, each reading one model API's exchanges as ``model.call`` events.

    Called once per session, when the first test that records or replays needs the providers (every
    implementation's results, in pytest's hook order). They are asked before those of the entry point group
    ``pytest_agentreplay.providers`` and before the built-in ones (OpenAI, Anthropic, Gemini); one named
    like a built-in provider replaces it. A result that is not a provider is a usage error naming it.
    """
