"""A test's run set up from its pytest item: the marker and fixture settings resolved, the project's hooks
wrapped for the session, the interception installed (called by ``plugin.py``'s fixtures); and the guard
over a test's whole life, fixtures included (called by ``plugin.py``'s ``pytest_runtest_*`` wrappers).

Which fixtures the guard covers: a replaying test is guarded from the start of its set-up to the end of
its teardown, so every fixture it uses (in any order: also those listed before ``agent_replay``, whose
set-up used to run before the run began) sets up and tears down under the guard. That includes session-
and module-scoped fixtures set up or torn down for it: they are shared state made before the test body,
and a replaying test must not depend on the network through them either. Which test first needs such a
fixture depends on the order the tests run in; a fixture that must reach the network belongs to a test
that does not replay, or its host to ``allow_hosts``. Before ``agent_replay`` begins the run, the guard
knows only the session's and the marker's ``allow_hosts`` (the ``agentreplay_config`` fixture's are
added with the run). A recording test is never guarded. Under ``--agentreplay-block-network`` every
other test is guarded the same way, by its guard-only run.

A refusal in set-up (also one a fixture swallowed) fails the set-up, in teardown the teardown, with cause
``network-blocked``; during the call the test's run fails it as before. What the Python guard could not
reach while the test ran (children that did not run it, children started before the test, native
networking libraries) is put on the test's reports as notes for the session's summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from pluggy import HookRelay

from .. import guard
from ..core.capture import Recorder, RunContext, utc_now
from ..core.config import Settings, marker_kwargs, resolve_test_settings
from ..core.constants import REPLAY_MODES
from ..core.documents import Document
from ..core.events import RunMeta
from ..core.json_copy import copy_json
from ..core.placeholder_credentials import PlaceholderCredentials
from ..exceptions import AgentReplayError, ConfigError
from ..guard import BLOCK_ONLY
from ..guard.children import live_children, reaches_no_network, unreached_children
from ..guard.no_route import no_route_error, watch
from ..guard.session_namespace import Isolation
from ..http.providers import ProviderSet
from ..http.providers.registry import entry_point_providers
from ..http.providers.registry import session_providers as providers_from
from ..intercept import install
from ..report.status import Cause
from . import foreign_adapters
from .handle import AgentReplay
from .item_facts import (
    BLOCK_KEY,
    CAUSE_KEY,
    GUARD_NOTE_PROPERTY,
    SETTINGS_KEY,
    TEST_RUN_KEY,
    collected_test,
    fail,
    uses_agentreplay,
)
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


# -- the guard over a test's life, fixtures included -----------------------------------------------------

# Native libraries that open connections in C, past Python's socket module: named when a test replays
# with them loaded (the Python guard cannot see their connections; isolation can).
NATIVE_NETWORKING = {
    "grpc": "grpcio's C core",
    "uvloop": "uvloop (libuv sockets)",
    "pycurl": "pycurl (libcurl)",
    "zmq": "pyzmq (libzmq)",
    "psycopg": "psycopg (libpq)",
    "psycopg2": "psycopg2 (libpq)",
}
ISOLATE_ADVICE = (
    "the Python guard cannot reach these: run the session isolated (--agentreplay-isolate=auto, Linux: "
    "the session in its own network namespace, loopback only), or for child processes "
    "--agentreplay-isolate-subprocesses"
)
# The key prefix of a note on a child that never ran the guard (counted in one summary line).
UNREACHED_CHILD = "unreached child "


def guard_summary(notes: dict[str, str], isolation: Isolation) -> list[str]:
    """The session summary's lines on what the Python guard did not reach (``notes``: key -> text of the
    tests' teardown notes). A session in its own network namespace holds its children and native code
    there: nothing to say. Advice names only a setting not already in use."""
    isolate_setting = isolation.setting
    if isolation.isolated or not notes:
        return []
    children = [text for key, text in notes.items() if key.startswith(UNREACHED_CHILD)]
    lines = [text for key, text in notes.items() if not key.startswith(UNREACHED_CHILD)]
    if children:
        shown = "; ".join(children[:3]) + ("; ..." if len(children) > 3 else "")
        lines.append(
            f"{len(children)} child process(es) did not run the guard (not Python, python -S, or an "
            f"interpreter without pytest-agentreplay), their network access unchecked: {shown}"
        )
    if isolate_setting == "off":
        lines.append(ISOLATE_ADVICE)
    else:
        lines.append(
            f"--agentreplay-isolate={isolate_setting} is set but the session is not isolated (the summary's "
            "network guard line says why)"
        )
    return lines


class FixtureGuard:
    """The guard over one test from the start of its set-up to the end of its teardown."""

    def __init__(self, item: pytest.Item, ctx: RunContext) -> None:
        self.item = item
        self.ctx = ctx
        # Before anything of the test runs: the children alive now were not started by it.
        self.children_before = live_children()
        self._uninstall = guard.install()
        self._release = guard.protect(ctx)
        self._reported = 0
        # In an isolated session: the kernel's count of sends the namespace stopped, from here on.
        self._no_route = watch()
        # Fixtures build SDK clients too: the placeholders are set before the first one sets up.
        self._credentials = PlaceholderCredentials()
        if not ctx.settings.block_network_only and ctx.mode in PLACEHOLDER_MODES:
            self._credentials.provide()

    def refusals(self, *, phase: str, hand_to_run: bool = False) -> str | None:
        """The message of the refusals made since the last call that the test's run does not report
        (``phase``: the part of the test since then, for the namespace's count).

        ``hand_to_run``: when the test's replay run is active, give them to it instead (the call then
        fails the test for them, as for its own) and return None.
        """
        failures = self.ctx.failures
        failures.extend(guard.collect_child_refusals(self.ctx))
        counted = None if self._no_route is None else self._no_route.take()
        if counted is not None:
            ctx = self.ctx
            failures.append(
                no_route_error(
                    counted,
                    test=self.item.nodeid,
                    phase=phase,
                    cassette=ctx.cassette,
                    mode=None if ctx.settings.block_network_only else ctx.mode,
                    block_only=ctx.settings.block_network_only,
                )
            )
        new, self._reported = failures[self._reported :], len(failures)
        test_run = self.item.stash.get(TEST_RUN_KEY, None)
        run = test_run.ctx if test_run is not None else None
        known = {str(f) for f in (run.failures if run is not None else ())}
        fresh = list({str(f): f for f in new if str(f) not in known}.values())
        if hand_to_run and fresh and run is not None and not run.recording:
            run.failures.extend(fresh)
            return None
        return "\n\n".join(str(f) for f in fresh) or None

    def close(self) -> list[tuple[str, str]]:
        """Stop guarding; the notes (key, text) on what the guard could not reach while the test ran."""
        test = self.item.nodeid
        test_run = self.item.stash.get(TEST_RUN_KEY, None)
        runs: list[guard.GuardRun] = [self.ctx]
        if test_run is not None and test_run.ctx is not None:
            runs.append(test_run.ctx)
        notes = [
            (f"{UNREACHED_CHILD}{pid}", f"{command} (pid {pid}, {test})")
            for pid, command in unreached_children(runs)
            if not reaches_no_network(command)
        ]
        after = live_children()
        notes += [
            (
                f"child {pid}",
                f"process {pid} ({command}) was started before {test} and ran while it replayed: what the "
                "test hands it (a pool's tasks, a helper's pipe) runs outside the test's guard",
            )
            for pid, command in self.children_before.items()
            if after.get(pid) == command and not reaches_no_network(command)
        ]
        notes += [
            (
                f"native {name}",
                f"{label} was loaded while tests replayed: its connections bypass Python's socket",
            )
            for name, label in NATIVE_NETWORKING.items()
            if name in sys.modules
        ]
        self._release()
        self._uninstall()
        self._credentials.remove()
        return notes


FIXTURE_GUARD_KEY = pytest.StashKey[FixtureGuard]()
# The replay modes whose model calls are served: a placeholder credential is enough for the SDKs.
PLACEHOLDER_MODES = frozenset(REPLAY_MODES) - {"model-comparison"}


def _replays_from_the_start(item: pytest.Item, settings: Settings) -> tuple[str, tuple[str, ...]] | None:
    """The mode and allowed hosts of a test that will replay, as known before its fixtures set up (the
    session's settings, the marker, the cassette's presence); None when it will record, or may."""
    try:
        marker = marker_kwargs([m.kwargs for m in item.iter_markers("agentreplay")], item.nodeid)
    except AgentReplayError:
        marker = {}  # the run's own set-up fails the test for it
    record = settings.record
    if not settings.record_explicit and isinstance(marker.get("record"), str):
        record = str(marker["record"])
    mode = str(marker.get("mode") or settings.mode)
    if mode not in REPLAY_MODES:
        mode = settings.mode  # the run's own set-up fails the test for the marker
    if record == "all":
        return None
    if record == "missing":
        cassette = collected_test(item).cassette
        # A cassette an override fixture places is known only once it has run: recording then is possible.
        if cassette is None or not cassette.exists():
            return None
    hosts = marker.get("allow_hosts")
    extra = tuple(str(h) for h in hosts) if isinstance(hosts, list | tuple) else ()
    if isinstance(hosts, str):
        extra = tuple(h for h in hosts.replace(",", " ").split() if h)
    return mode, (*settings.allow_hosts, *extra)


def _guard_run(item: pytest.Item, settings: Settings) -> RunContext | None:
    """The run guarding ``item``'s fixtures: a replaying test's, or under ``--agentreplay-block-network``
    the guard-only run of a test that replays nothing (kept in ``BLOCK_KEY`` for the call's check)."""
    meta = RunMeta(run_id="fixture-guard", test=item.nodeid, recorded_at=utc_now())
    if uses_agentreplay(item):
        replays = _replays_from_the_start(item, settings)
        if replays is None:
            return None
        mode, hosts = replays
        cassette = collected_test(item).cassette
        return RunContext(
            Recorder(meta),
            mode=mode,
            cassette=None if cassette is None else str(cassette),
            settings={"allow_hosts": list(hosts), "nodeid": item.nodeid},
        )
    if not settings.block_network:
        return None
    ctx = RunContext(
        Recorder(meta),
        mode="regression",
        settings={"allow_hosts": list(settings.allow_hosts), "nodeid": item.nodeid, BLOCK_ONLY: True},
    )
    item.stash[BLOCK_KEY] = ctx
    return ctx


def _fail_blocked(item: pytest.Item, message: str) -> None:
    item.stash[CAUSE_KEY] = Cause.NETWORK_BLOCKED
    fail(item, message)


def guard_setup(item: pytest.Item) -> Generator[None, object, object]:
    """``pytest_runtest_setup``'s wrapper: the guard begins, before any fixture of the test sets up."""
    ctx = _guard_run(item, item.config.stash[SETTINGS_KEY])
    if ctx is None:
        return (yield)
    fixture_guard = item.stash[FIXTURE_GUARD_KEY] = FixtureGuard(item, ctx)
    try:
        result = yield
    except BaseException:
        message = fixture_guard.refusals(phase="set-up")
        if message is None:
            raise
    else:
        message = fixture_guard.refusals(phase="set-up", hand_to_run=True)
        if message is None:
            return result
    # Outside the except block: the guard's message says it all, a chained traceback would only repeat it.
    _fail_blocked(item, message)
    return None


def call_refusals(item: pytest.Item) -> str | None:
    """The refusals of a test that does not replay (``--agentreplay-block-network``), after its call."""
    fixture_guard = item.stash.get(FIXTURE_GUARD_KEY, None)
    return None if fixture_guard is None else fixture_guard.refusals(phase="the test's call")


def hand_refusals_to_run(item: pytest.Item) -> None:
    """After a replaying test's call, before its run ends: what the guard saw only from outside the run
    (the namespace's count of sends that found no route) becomes a failure of the run, which fails the
    call for it like for its own refusals."""
    fixture_guard = item.stash.get(FIXTURE_GUARD_KEY, None)
    if fixture_guard is not None:
        fixture_guard.refusals(phase="the test's call", hand_to_run=True)


def guard_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """``pytest_runtest_teardown``'s wrapper: every fixture tears down under the guard, then it ends."""
    fixture_guard = item.stash.get(FIXTURE_GUARD_KEY, None)
    if fixture_guard is None:
        return (yield)
    error: BaseException | None = None
    result: object = None
    try:
        result = yield
    except BaseException as exc:
        error = exc
    finally:
        del item.stash[FIXTURE_GUARD_KEY]
        message = fixture_guard.refusals(phase="teardown")
        for key, text in fixture_guard.close():
            # On the item: pytest copies its user properties into the teardown report (xdist, JUnit).
            item.user_properties.append((GUARD_NOTE_PROPERTY, f"{key}|{text}"))
    if message is not None:
        _fail_blocked(item, message)
    if error is not None:
        raise error
    return result


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


def held_interception(held: Callable[[], None] | None, *, hold: bool) -> Callable[[], None] | None:
    """Interception kept installed from one agentreplay test to the next (``held``: its uninstall), so that
    each test's run only counts itself in rather than patching and restoring every intercepted library;
    released (None) before any other test, which sees the libraries as they are. An install that fails is
    not held: the test's own install (the ``agent_replay`` fixture's) fails that test with the error."""
    if hold:
        if held is not None:
            return held
        try:
            return install()
        except Exception:
            return None
    if held is not None:
        held()
    return None
