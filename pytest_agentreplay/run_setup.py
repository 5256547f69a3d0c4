"""A test's run set up from its pytest item: the marker and fixture settings resolved, the project's hooks
wrapped for the session, the interception installed; and the guard-only run of a test that replays
nothing under ``--agentreplay-block-network``. Called by ``plugin.py``'s fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from pluggy import HookRelay

from . import foreign_adapters, guard
from .core.capture import Recorder, RunContext, utc_now
from .core.config import Settings, marker_kwargs, resolve_test_settings
from .core.documents import Document
from .core.events import RunMeta
from .core.json_copy import copy_json
from .exceptions import AgentReplayError, ConfigError
from .guard import BLOCK_ONLY
from .handle import AgentReplay
from .http.providers import ProviderSet
from .http.providers.registry import entry_point_providers
from .http.providers.registry import session_providers as providers_from
from .intercept import install
from .item_facts import BLOCK_KEY, CAUSE_KEY, SETTINGS_KEY, TEST_RUN_KEY, fail
from .report.status import Cause
from .session import TestRun

# The session's providers, built once (its hooks, its installed distributions' entry points, the built-ins).
PROVIDERS_KEY = pytest.StashKey[ProviderSet]()


def session_providers(config: pytest.Config) -> ProviderSet:
    """The providers of the session (built on first call). Raises ``ConfigError``."""
    found = config.stash.get(PROVIDERS_KEY, None)
    if found is None:
        hooks = config.hook.pytest_agentreplay_providers(config=config)
        found = providers_from(hooks, entry_point_providers())
        config.stash[PROVIDERS_KEY] = found
    return found


def new_test_run(request: pytest.FixtureRequest, overrides: Document, cassette: Path) -> TestRun:
    """The run of the requesting test; a bad marker or ``agentreplay_config`` fails the test."""
    item = request.node
    settings = request.config.stash[SETTINGS_KEY]
    config_error: str | None = None
    try:
        marks = list(item.iter_markers("agentreplay"))
        if any(m.args for m in marks):
            raise ConfigError(
                f"@pytest.mark.agentreplay on {item.nodeid} takes keyword arguments only",
                evidence=[f"got positional {m.args!r}" for m in marks if m.args],
                fixes=['name them, e.g. @pytest.mark.agentreplay(cassette="name", mode="sandbox")'],
            )
        marker = marker_kwargs([m.kwargs for m in marks], item.nodeid)
        foreign = foreign_adapters.source_for(request)
        if foreign is not None:
            marker = foreign.marker_defaults(marker)
        providers = session_providers(request.config)
        test_settings = resolve_test_settings(
            settings,
            nodeid=item.nodeid,
            marker=marker,
            overrides=overrides,
            default_cassette=cassette,
        )
    except AgentReplayError as exc:
        config_error = str(exc)
    if config_error is not None:
        # Outside the except block: the message says everything, a chained traceback would only repeat it.
        item.stash[CAUSE_KEY] = Cause.CONFIG
        fail(item, config_error)
    hook = request.config.hook
    return TestRun(
        item.nodeid,
        settings,
        test_settings,
        redact_hook=_redact_hook(hook),
        rules_hook=lambda: [
            r for r in hook.pytest_agentreplay_diff_rules(item=item, mode=test_settings.mode) if r
        ],
        classify_hook=_classify_hook(hook),
        providers=providers,
        cassette_named=marker.get("cassette") is not None,
        foreign=foreign,
        rootdir=item.config.rootpath,
    )


def replaying(item: pytest.Item, test_run: TestRun) -> Generator[AgentReplay, None, None]:
    """The ``agent_replay`` fixture's life: interception installed, the run begun, the handle yielded."""
    # No fallback: replay without interception would let calls escape the fail-closed guard.
    uninstall = install()
    try:
        item.stash[TEST_RUN_KEY] = test_run
        try:
            test_run.begin()
        except AgentReplayError as exc:
            # Reported as the test's failure (not a setup error) by pytest_pyfunc_call.
            test_run.setup_error = exc
        yield AgentReplay(test_run)
    finally:
        test_run.deactivate()
        uninstall()


def guard_only(item: pytest.Item, settings: Settings) -> Callable[[], None]:
    """Guard a test that replays nothing with the fail-closed network guard; returns its release."""
    ctx = RunContext(
        Recorder(RunMeta(run_id="block-network", test=item.nodeid, recorded_at=utc_now())),
        mode="regression",
        settings={"allow_hosts": list(settings.allow_hosts), "nodeid": item.nodeid, BLOCK_ONLY: True},
    )
    item.stash[BLOCK_KEY] = ctx
    uninstall = guard.install()
    release = guard.protect(ctx)

    def done() -> None:
        release()
        uninstall()

    return done


def _redact_hook(hook: HookRelay) -> Callable[[Document], Document] | None:
    if not hook.pytest_agentreplay_redact_event.get_hookimpls():
        # No project hook: the save keeps the redacted events as they are, their shared messages shared
        # (a hook gets a copy of each event to change, which costs a conversation's square).
        return None

    def redact(event: Document) -> Document:
        for replacement in hook.pytest_agentreplay_redact_event(event=event):
            if replacement is not None:
                event = replacement
        return event

    return redact


def _classify_hook(hook: HookRelay) -> Callable[[Document, Document | None], str | None] | None:
    if not hook.pytest_agentreplay_classify_exchange.get_hookimpls():
        # No project classifies: keep the per-request hot path free of a hook call.
        return None

    def classify(request: Document, response: Document | None) -> str | None:
        # Copies of their own: a request's body holds the very messages earlier requests' events hold.
        result = hook.pytest_agentreplay_classify_exchange(
            request=copy_json(request), response=None if response is None else copy_json(response)
        )
        return None if result is None else str(result)

    return classify
