"""pytest wiring of pytest-agentreplay: options, ini keys, marker, fixtures, hooks. Logic lives elsewhere.

Every hook here translates pytest's objects into calls on the session controller (``controller.py``), the
per-test run (``session.py``) or the status decision (``status.py``).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from . import plain_import  # noqa: F401 (first: the modules below load without pytest's rewriting)

# isort: split
from . import hooks
from .core import setting_keys, socket_gate
from .core.config import settings_from_pytest
from .core.constants import NETNS_ENV_VAR
from .core.documents import Document
from .core.placeholder_credentials import PlaceholderCredentials
from .exceptions import ConfigError
from .report.status import TestStatus
from .shell import vcr_plugin
from .shell.controller import HeldInterception, SessionController, parse_project_rules, partial_modules
from .shell.item_facts import (
    CASSETTE_FIXTURE,
    GUARD_NOTE_PROPERTY,
    SETTINGS_KEY,
    collected_test,
    default_cassette,
    fixture_conftests,
    uses_agentreplay,
)

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from .guard.session_namespace import Isolation  # noqa: F401 (string annotation of ISOLATION_KEY)
    from .shell.handle import AgentReplay
    from .shell.life import TestLife  # noqa: F401 (string annotation of LIFE_KEY)

PLUGIN_NAME = "agentreplay-session"
STATUS_ATTRIBUTE = "agentreplay_status"
COMPARISON_PROPERTY = "agentreplay-comparison"
NETWORK_PROPERTY = "agentreplay.network"
# What --agentreplay-isolate did, decided before conftest files load; absent: isolation off.
ISOLATION_KEY = pytest.StashKey["Isolation"]()
# A test's life, from its protocol's start to its status (shell/life.py). A string subscript: the class
# imports the recorder and the guard, which a session that never replays should not pay for.
LIFE_KEY = pytest.StashKey["TestLife"]()
# Whether the test uses agent replay, decided once at its protocol's start (set-up reads it on each attempt).
REPLAYS_KEY = pytest.StashKey[bool]()
TOLERATED_PROPERTY = "agentreplay-tolerated"
NOT_SPENT_PROPERTY = "agentreplay-not-spent"
# Generations 0 and 1: where a finished test's objects are (a full collection would walk every long-lived
# object of the session again, test after test).
_YOUNG = 1


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentreplay", "replay-based regression testing of LLM agents")
    for setting in setting_keys.SETTINGS:
        if setting_keys.CLI in setting.places:
            group.addoption(setting_keys.option_flag(setting.name), **setting.option_arguments())
        if setting_keys.INI in setting.places:
            # No default: None is "not given", which a lower place may then give.
            parser.addini(
                setting_keys.ini_key(setting.name),
                setting.help_text(setting_keys.INI),
                type=setting.ini_type,
                default=None,
            )


class _SESSIONS:
    """Whether a session of this process already decided its isolation: a later one runs inside it
    (pytester's in-process runs). Kept here: pytester drops the modules an inner session imported, never
    this one, which the outer session loaded."""

    decided = False


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """The earliest point (installed plugins registered, no conftest or test module imported, one thread):
    other tools' options and hooks go in, the session may enter its own network namespace (isolate), and
    the socket gate goes in, so that a socket method taken early (``C = socket.socket.connect``) is gated."""
    socket_gate.GATE.keep()  # it passes every call through until a replay guards
    vcr_plugin.register_early(early_config)  # conftests may implement those hooks, addopts name them
    known = early_config.known_args_namespace
    if getattr(known, "help", False) or getattr(known, "version", False):
        return
    first = not _SESSIONS.decided
    _SESSIONS.decided = True
    try:
        settings = settings_from_pytest(early_config, early=True)
        if settings.isolate == "off" and not os.environ.get(NETNS_ENV_VAR):
            return  # the default: nothing to decide, and no guard to import
        from .guard.session_namespace import isolate_session  # heavy: the guard, only when asked for

        early_config.stash[ISOLATION_KEY] = isolate_session(settings, first_session=first)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> list[str]:
    isolation = config.stash.get(ISOLATION_KEY, None)
    return [] if isolation is None else isolation.header_lines()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", setting_keys.marker_help())
    try:
        settings = vcr_plugin.session_settings(config, settings_from_pytest(config))
        for warning in parse_project_rules(settings, config.rootpath):
            config.issue_config_time_warning(pytest.PytestConfigWarning(warning), stacklevel=2)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.stash[SETTINGS_KEY] = settings
    controller = SessionController(
        settings, config.rootpath, is_worker=getattr(config, "workerinput", None) is not None
    )
    controller.isolation = config.stash.get(ISOLATION_KEY, None)
    config.pluginmanager.register(SessionHooks(config, controller), PLUGIN_NAME)
    vcr_plugin.register(config)  # @pytest.mark.vcr's markers and fixtures (replay/foreign.py)


class SessionHooks:
    """pytest's hooks for the session; each delegates to the :class:`SessionController`."""

    def __init__(self, config: pytest.Config, controller: SessionController) -> None:
        self.config = config
        self.controller = controller
        self.deselected: list[pytest.Item] = []
        # What the network guard could not reach, by key (a child's pid, a native library): named once.
        self.guard_notes: dict[str, str] = {}
        # Interception, installed once and held from one agentreplay test to the next.
        self.interception = HeldInterception()
        # The placeholder credentials of replaying tests, held from one to the next the same way.
        self.credentials = PlaceholderCredentials()

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.extend(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = [i for i in (*session.items, *self.deselected) if uses_agentreplay(i)]
        partial = partial_modules(self.config.invocation_params.dir, self.config.args)
        # Which conftests override the cassette fixture: asked once, not once per test.
        conftests = fixture_conftests(self.config, CASSETTE_FIXTURE) if items else []
        self.controller.collected((collected_test(i, conftests) for i in items), partial)
        if items:
            # The session's providers, now that every conftest is loaded: a bad one stops the session.
            from .shell.life import session_providers  # heavy: the recorder, only when a test replays

            try:
                session_providers(self.config)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from exc
            # The session's objects, frozen once and never thawed: no collection (nor the exit one) walks
            # them again. Not when something froze already (the project, or a session around: pytester).
            if gc.isenabled() and not gc.get_freeze_count():
                gc.collect(_YOUNG)
                gc.freeze()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        self.controller.merge_worker(getattr(node, "workeroutput", None))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        replays = item.stash[REPLAYS_KEY] = uses_agentreplay(item)
        if replays:
            self.interception.hold()
        else:
            self.interception.release()
            self.credentials.remove()
        try:
            return (yield)
        finally:
            # After the whole protocol: pytest has dropped the test's fixture values by now. Its SDK
            # clients and responses sit in reference cycles: freed here, a 100-test replay peaks 13 MB
            # lower. Not when the suite disabled the collector (its own choice).
            if replays and gc.isenabled():
                gc.collect(_YOUNG)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            # The last replaying test's placeholders go with the tests, not at the session's end.
            self.credentials.remove()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        # A new life per attempt: pytest-rerunfailures runs set-up to teardown again in one protocol.
        replays = item.stash.get(REPLAYS_KEY, False)
        if not (replays or self.config.stash[SETTINGS_KEY].block_network):
            return (yield)
        from .shell.life import TestLife  # heavy: the recorder and the guard, only when a test uses them

        life = item.stash[LIFE_KEY] = TestLife(item, self.interception, self.credentials, replays=replays)
        return (yield from life.setup())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        life = item.stash.get(LIFE_KEY, None)
        return (yield) if life is None else (yield from life.call())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        life = item.stash.get(LIFE_KEY, None)
        return (yield) if life is None else (yield from life.teardown())

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        life = pyfuncitem.stash.get(LIFE_KEY, None)
        # True: the plugin ran the body itself (audit mode verifies and renders the recording instead).
        return True if life is not None and life.enter_body() else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        life = item.stash.get(LIFE_KEY, None)
        if life is None or not life.replays:
            return report
        run = life.run
        if report.when == "call" and run is not None and run.ctx is not None:
            comparison = run.ctx.comparison
            if comparison is not None:
                # heavy: the comparison imports the diff package, only in model-comparison runs
                from .replay.comparison import SECTION, render_comparison

                report.sections.append((SECTION, render_comparison(comparison)))
                report.user_properties.append((COMPARISON_PROPERTY, json.dumps(comparison)))
            if run.ctx.not_spent is not None:
                report.user_properties.append((NOT_SPENT_PROPERTY, json.dumps(run.ctx.not_spent)))
            if run.ctx.replay.tolerated:
                # A property: it travels from an xdist worker with the report.
                report.user_properties.append((TOLERATED_PROPERTY, json.dumps(run.ctx.replay.tolerated)))
        status = life.status(report)
        if status is not None:
            setattr(report, STATUS_ATTRIBUTE, status)
            # junitxml writes the teardown report's properties: the status lands in the XML from there.
            report.user_properties.extend(status.junit_properties())
            report.user_properties.append((NETWORK_PROPERTY, self.controller.network_level(status.mode)))
            # The test is over and judged: its run (the loaded cassette, the replayed history) need not live
            # as long as the session does, where every full garbage collection would walk it again.
            del item.stash[LIFE_KEY]
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, report: object) -> Generator[None, object, object]:
        # The status travels with the report (from an xdist worker) as a plain dict.
        data = yield
        status = getattr(report, STATUS_ATTRIBUTE, None)
        if isinstance(data, dict) and isinstance(status, TestStatus):
            data[STATUS_ATTRIBUTE] = status.to_wire()
        return data

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(self) -> Generator[None, object, object]:
        report = yield
        status = getattr(report, STATUS_ATTRIBUTE, None)
        if isinstance(status, dict):
            setattr(report, STATUS_ATTRIBUTE, TestStatus.from_wire(status))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for workers' reports too (the status came with the report).
        status = getattr(report, STATUS_ATTRIBUTE, None)
        if isinstance(status, TestStatus):
            self.controller.add_status(status)
        for name, value in report.user_properties:
            if name == COMPARISON_PROPERTY:
                self.controller.comparisons.append(json.loads(str(value)))
            elif name == GUARD_NOTE_PROPERTY and report.when == "teardown":
                key, _, text = str(value).partition("|")
                self.guard_notes.setdefault(key, text)
            elif name == NOT_SPENT_PROPERTY:
                self.controller.not_spent.append(json.loads(str(value)))
            elif name == TOLERATED_PROPERTY:
                calls = json.loads(str(value))
                self.controller.tolerated.extend((report.nodeid, str(call)) for call in calls)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.guard_notes and getattr(self.config, "workerinput", None) is None:
            from .shell.fixture_guard import guard_summary  # heavy: only when a replaying test left notes

            for i, line in enumerate(guard_summary(self.guard_notes, self.controller.network_isolation)):
                if i == 0:  # a section only when there is something to say
                    terminalreporter.section("agentreplay guard: not reached by the Python guard")
                terminalreporter.write_line(f"  {line}")
        if not self.controller.has_summary:
            return
        terminalreporter.section("agentreplay")
        for line in self.controller.summary_lines():
            terminalreporter.write_line(line)
        if self.controller.failed_only_by_unused:
            # The final "N passed" line would otherwise give no reason for the non-zero exit status.
            terminalreporter.stats.setdefault("unused cassettes (failed)", []).extend(
                _UnusedCassette(path) for path in self.controller.unused
            )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.interception.release()
        # Threads (and late children) of replaying tests that called out after their test ended. A session
        # that never installed the guard has none, and must not pay for importing it.
        guard = sys.modules.get("pytest_agentreplay.guard")
        if guard is not None:
            self.controller.facts.strays.extend(guard.stray_refusals())
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            self.controller.worker_output(workeroutput)
            return
        failed = bool(session.testsfailed or session.shouldfail or session.shouldstop)
        if self.controller.finish(session_failed=failed, exit_ok=session.exitstatus == pytest.ExitCode.OK):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class _UnusedCassette:
    """A terminal-stats entry; other plugins read stats entries as reports, so it looks like one."""

    when = "teardown"
    outcome = "failed"
    count_towards_summary = True
    longrepr = None

    def __init__(self, path: str) -> None:
        self.nodeid = path
        self.location = (path, None, path)


@pytest.fixture
@setting_keys.fixture_help  # its docstring, from the settings table
def agentreplay_config() -> Document:
    return {}


@pytest.fixture
def agentreplay_cassette_path(request: pytest.FixtureRequest) -> Path:
    """The cassette path of this test; override this fixture to customise the layout."""
    return default_cassette(request.node)


@pytest.fixture(autouse=True)
def _agentreplay_activation(request: pytest.FixtureRequest) -> None:
    """The marker alone activates replay (``--agentreplay-block-network`` guards every other test from
    ``pytest_runtest_setup`` to ``pytest_runtest_teardown``, fixtures included). Not a generator: it has
    nothing to tear down, and every test of the session pays for this fixture."""
    life = request.node.stash.get(LIFE_KEY, None)
    if life is not None and life.replays and "agent_replay" not in request.fixturenames:
        request.getfixturevalue("agent_replay")


@pytest.fixture
def agent_replay(
    request: pytest.FixtureRequest, agentreplay_config: Document, agentreplay_cassette_path: Path
) -> Generator[AgentReplay, None, None]:
    """Activate capture or replay for this test and hand over the run.

    With ``--agentreplay-record`` the test runs against the real services and its cassette is written when
    it passes; otherwise the recorded cassette is replayed and the new history compared with it.
    """
    yield from request.node.stash[LIFE_KEY].start_run(request, agentreplay_config, agentreplay_cassette_path)


@pytest.fixture
def decision_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's ``snapshot`` storing a normalised decision trace as one JSON file per test."""
    from .interop.snapshot import DecisionTraceExtension  # optional: syrupy

    return snapshot.use_extension(DecisionTraceExtension)
