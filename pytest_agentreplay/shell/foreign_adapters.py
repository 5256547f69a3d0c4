"""The adapters for other tools' recordings this plugin registers: a test with no cassette of this plugin
may be replayed from them (``replay/foreign.py`` says what the session asks of one).

Each adapter is the pytest side of one format: it registers its markers and fixtures at start-up, claims
the tests that carry its marker and finds a claimed test's recordings. vcrpy / pytest-recording cassettes
are the one format today; an MCP, gRPC or WebSocket adapter is one more entry in :data:`ADAPTERS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import pytest

from ..core.config import Settings
from . import vcr_plugin

if TYPE_CHECKING:
    from ..replay.foreign import ForeignSource


class ForeignAdapter(Protocol):
    def register_early(self, config: pytest.Config) -> None:
        """Before the conftest files load and the command line is parsed: the other tool's command-line
        options and hooks (unless that tool is active), so that suites naming them start."""
        ...

    def session_settings(self, config: pytest.Config, settings: Settings) -> Settings:
        """At configure: the session settings with the other tool's options applied (a ``ConfigError`` on
        a bad one)."""
        ...

    def register(self, config: pytest.Config) -> None:
        """At configure: add the format's markers and fixtures (unless another plugin serves them)."""
        ...

    def claims(self, item: pytest.Item) -> bool:
        """Whether ``item`` replays from this format's recordings (when it has no cassette of ours)."""
        ...

    def source(self, request: pytest.FixtureRequest) -> ForeignSource:
        """The recordings of a claimed test (its fixtures resolved as the other tool resolves them)."""
        ...


ADAPTERS: Final[tuple[ForeignAdapter, ...]] = (vcr_plugin,)


def register_early(config: pytest.Config) -> None:
    for adapter in ADAPTERS:
        adapter.register_early(config)


def session_settings(config: pytest.Config, settings: Settings) -> Settings:
    for adapter in ADAPTERS:
        settings = adapter.session_settings(config, settings)
    return settings


def register(config: pytest.Config) -> None:
    for adapter in ADAPTERS:
        adapter.register(config)


def claims(item: pytest.Item) -> bool:
    return any(adapter.claims(item) for adapter in ADAPTERS)


def source_for(request: pytest.FixtureRequest) -> ForeignSource | None:
    """The recordings of the requesting test in the first format that claims it, if any."""
    for adapter in ADAPTERS:
        if adapter.claims(request.node):
            return adapter.source(request)
    return None
