"""pytest wiring of pytest-agentreplay: options, ini keys, marker, fixtures, hooks. Logic lives elsewhere.

Every hook here translates pytest's objects into calls on the session controller (``controller.py``), the
per-test run (``session.py``) or the status decision (``status.py``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import plain_import  # noqa: F401 (first: the modules below load without pytest's rewriting)

# isort: split
from . import hooks
from .core import socket_gate
from .core.config import settings_before_parse, settings_from_pytest
from .core.constants import ISOLATE_MODES, NETNS_ENV_VAR, RECORD_MODES, REPLAY_MODES
from .core.documents import Document
from .core.garbage import collect_test_garbage
from .exceptions import AgentReplayError, ConfigError
from .report.junit import junit_properties
from .report.status import Cause, TestStatus, cause_of
from .shell import foreign_adapters
from .shell.controller import WORKER_OUTPUT_KEY, SessionController, parse_project_rules, partial_modules
from .shell.item_facts import (
    BLOCK_KEY,
    CAUSE_KEY,
    CONTROLLER_KEY,
    GUARD_NOTE_PROPERTY,
    REPORTS_KEY,
    SETTINGS_KEY,
    TEST_RUN_KEY,
    collected_test,
    decide_status,
    default_cassette,
    fail,
    uses_agentreplay,
)

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from .guard.session_namespace import Isolation  # noqa: F401 (string annotation of ISOLATION_KEY)
    from .shell.handle import AgentReplay

PLUGIN_NAME = "agentreplay-session"
STATUS_ATTRIBUTE = "agentreplay_status"
COMPARISON_PROPERTY = "agentreplay-comparison"
NETWORK_PROPERTY = "agentreplay.network"
# What --agentreplay-isolate did, decided before conftest files load; absent: isolation off.
ISOLATION_KEY = pytest.StashKey["Isolation"]()
TOLERATED_PROPERTY = "agentreplay-tolerated"

OPTIONS: tuple[tuple[str, dict[str, Any], str], ...] = (
    (
        "record",
        {"choices": RECORD_MODES, "help": "record cassettes: none (default, replay only), missing, all"},
        "record mode: none, missing or all",
    ),
    (
        "mode",
        {"choices": REPLAY_MODES, "help": "replay mode (default regression)"},
        "replay mode: audit, regression, model-comparison or sandbox",
    ),
    (
        "cassette-dir",
        {"metavar": "DIR", "help": "cassette folder (default: cassettes under the rootdir)"},
        "cassette folder, relative to the rootdir",
    ),
    (
        "report",
        {"metavar": "PATH", "help": "write the drift report (.md, .json or .html) into an existing folder"},
        "drift report path (.md, .json or .html)",
    ),
    (
        "model",
        {"metavar": "NAME", "help": "model-comparison: replace the model of each live model call"},
        "model-comparison model override",
    ),
    (
        "allow-hosts",
        {"metavar": "HOSTS", "help": "comma-separated hosts replay may connect to (e.g. localhost)"},
        "hosts replay may connect to",
    ),
    (
        "isolate",
        {
            "choices": ISOLATE_MODES,
            "help": "Linux: run a replay session in its own network namespace (loopback only, native code "
            "and every child included): off (default), auto (where the kernel allows; the summary says why "
            "not), required (fail the session where it cannot)",
        },
        "network isolation of replay sessions: off, auto or required",
    ),
)
FLAGS: tuple[tuple[str, str, str], ...] = (
    (
        "update",
        "accept drift: rewrite drifting cassettes from the replayed run, remove unused ones",
        "accept drift (prefer the command-line flag)",
    ),
    (
        "save-on-failure",
        "also write the cassette when a recording test fails",
        "also write cassettes of failing tests",
    ),
    (
        "isolate-subprocesses",
        "Linux: run child processes started during a replay in an empty network namespace, so programs "
        "that are not Python (curl) cannot reach the network either",
        "run replay child processes in an empty network namespace (Linux)",
    ),
    (
        "block-network",
        "refuse outbound connections in every test of the session, not only in replaying ones "
        "(allowed hosts still pass)",
        "guard every test of the session with the fail-closed network guard",
    ),
)


_OPTION_NAMES = [o[0].replace("-", "_") for o in (*OPTIONS, *FLAGS)]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentreplay", "replay-based regression testing of LLM agents")
    for name, kwargs, ini_help in OPTIONS:
        dest = "agentreplay_" + name.replace("-", "_")
        group.addoption(f"--agentreplay-{name}", dest=dest, default=None, **kwargs)
        parser.addini(dest, help=f"{ini_help} (the command line wins)", default=None)
    for name, flag_help, ini_help in FLAGS:
        dest = "agentreplay_" + name.replace("-", "_")
        group.addoption(f"--agentreplay-{name}", dest=dest, action="store_true", default=None, help=flag_help)
        parser.addini(dest, help=f"{ini_help} (the command line wins)", type="bool", default=None)
    parser.addini(
        "agentreplay_runtime_values",
        help="runtime values recorded and served in replay: any of clock uuid random (default all three); "
        "empty turns it off",
        default=None,
    )
    parser.addini(
        "agentreplay_mcp_effects",
        help='MCP tools\' effect classes over their annotations: "tool=read server/tool=write"',
        default=None,
    )
    parser.addini(
        "agentreplay_tolerated_hosts",
        help="hosts whose unmatched calls in replay are refused without failing the test (libraries' own "
        "telemetry and metadata fetches; listed in the summary); empty by default",
        default=None,
    )
    parser.addini(
        "agentreplay_fail_on_unused",
        help="fail the session when cassettes no test uses remain (default true)",
        type="bool",
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
    socket_gate.install(permanent=True)  # it passes every call through until a replay guards
    foreign_adapters.register_early(early_config)  # conftests may implement those hooks, addopts name them
    known = early_config.known_args_namespace
    if getattr(known, "help", False) or getattr(known, "version", False):
        return
    first = not _SESSIONS.decided
    _SESSIONS.decided = True
    try:
        settings = settings_before_parse(early_config, _OPTION_NAMES)
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
    config.addinivalue_line(
        "markers",
        "agentreplay(cassette=None, mode=None, rules=None, record=None, allow_hosts=None, sandbox=None, "
        "faults=None, model=None, runtime_values=None, mcp_effects=None): record or replay this test (the "
        "marker alone activates it); the command line wins",
    )
    try:
        settings = foreign_adapters.session_settings(config, settings_from_pytest(config, _OPTION_NAMES))
        for warning in parse_project_rules(settings, config.rootpath):
            config.issue_config_time_warning(pytest.PytestConfigWarning(warning), stacklevel=2)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.stash[SETTINGS_KEY] = settings
    controller = SessionController(
        settings, config.rootpath, is_worker=getattr(config, "workerinput", None) is not None
    )
    controller.isolation = config.stash.get(ISOLATION_KEY, None)
    config.stash[CONTROLLER_KEY] = controller
    config.pluginmanager.register(SessionHooks(config, controller), PLUGIN_NAME)
    foreign_adapters.register(config)  # other tools' markers and fixtures (replay/foreign.py)


class SessionHooks:
    """pytest's hooks for the session; each delegates to the :class:`SessionController`."""

    def __init__(self, config: pytest.Config, controller: SessionController) -> None:
        self.config = config
        self.controller = controller
        self.deselected: list[pytest.Item] = []
        # What the network guard could not reach, by key (a child's pid, a native library): named once.
        self.guard_notes: dict[str, str] = {}
        # The uninstall of interception held from one agentreplay test to the next (run_setup.py).
        self.interception: Callable[[], None] | None = None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.extend(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = [i for i in (*session.items, *self.deselected) if uses_agentreplay(i)]
        partial = partial_modules(self.config.invocation_params.dir, self.config.args)
        self.controller.collected((collected_test(i) for i in items), partial)
        if items:
            # The session's providers, now that every conftest is loaded: a bad one stops the session.
            from .shell.run_setup import session_providers  # heavy: the recorder, only when a test replays

            try:
                session_providers(self.config)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from exc

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.controller.merge_worker({WORKER_OUTPUT_KEY: output.get(WORKER_OUTPUT_KEY)})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        replays = uses_agentreplay(item)
        if replays or self.interception is not None:
            from .shell.run_setup import (
                held_interception,  # heavy: the interceptors
            )

            self.interception = held_interception(self.interception, hold=replays)
        try:
            return (yield)
        finally:
            # After the whole protocol: pytest has dropped the test's fixture values by now.
            if replays:
                collect_test_garbage()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        if not (uses_agentreplay(item) or self.config.stash[SETTINGS_KEY].block_network):
            return (yield)
        from .shell.run_setup import guard_setup  # heavy: the recorder and the guard, only when guarding

        return (yield from guard_setup(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        if not (uses_agentreplay(item) or self.config.stash[SETTINGS_KEY].block_network):
            return (yield)
        from .shell.run_setup import guard_teardown  # heavy: as above

        return (yield from guard_teardown(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        blocked = item.stash.get(BLOCK_KEY, None)
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if test_run is None or test_run.ctx is None:
            try:
                result = yield
            except BaseException:
                if blocked is not None:
                    from .shell.run_setup import call_refusals  # heavy: the guard, only once installed

                    call_refusals(item)  # the call failed already: its refusals are not teardown's
                raise
            if blocked is not None:
                from .shell.run_setup import call_refusals  # heavy: the guard, only once installed

                refused = call_refusals(item)
                if refused is not None:
                    # A refusal the test swallowed still fails it.
                    item.stash[CAUSE_KEY] = Cause.NETWORK_BLOCKED
                    fail(item, refused)
            return result
        from .shell.run_setup import (
            hand_refusals_to_run,  # heavy: loaded by agent_replay
        )

        message: str | None = None
        try:
            result = yield
        except BaseException as exc:
            hand_refusals_to_run(item)
            failures = test_run.ctx.failures
            test_run.end(passed=False, error=f"{type(exc).__name__}: {exc}", exc=exc)
            if failures or isinstance(exc, AgentReplayError):
                item.stash[CAUSE_KEY] = cause_of(failures[0] if failures else exc)
            if not (isinstance(exc, AgentReplayError) or failures):
                raise
            # A replay error, perhaps wrapped by an SDK: our message says it all, a traceback does not.
            message = "\n\n".join(dict.fromkeys([str(f) for f in failures] or [str(exc)]))
        else:
            hand_refusals_to_run(item)
            try:
                test_run.end(passed=True)
            except AgentReplayError as exc:
                item.stash[CAUSE_KEY] = cause_of(exc)
                message = str(exc)
        if message is not None:
            fail(item, message)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        test_run = pyfuncitem.stash.get(TEST_RUN_KEY, None)
        if test_run is not None and test_run.setup_error is not None:
            pyfuncitem.stash[CAUSE_KEY] = cause_of(test_run.setup_error)
            fail(pyfuncitem, str(test_run.setup_error))
        # The body starts (TestRun.enter_body); audit executes none: it verifies and renders the recording.
        if test_run is None or test_run.enter_body() != "audit":
            return None
        pyfuncitem.add_report_section("call", "agentreplay audit", test_run.audit_view())
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if not uses_agentreplay(item):
            return report
        reports = item.stash.setdefault(REPORTS_KEY, {})
        reports[report.when] = report
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if report.when == "call" and test_run is not None and test_run.ctx is not None:
            comparison = test_run.ctx.comparison
            if comparison is not None:
                # heavy: the comparison imports the diff package, only in model-comparison runs
                from .replay.comparison import SECTION, render_comparison

                report.sections.append((SECTION, render_comparison(comparison)))
                report.user_properties.append((COMPARISON_PROPERTY, json.dumps(comparison)))
            if test_run.ctx.replay.tolerated:
                # A property: it travels from an xdist worker with the report.
                report.user_properties.append((TOLERATED_PROPERTY, json.dumps(test_run.ctx.replay.tolerated)))
        if report.when == "teardown":
            status = decide_status(item, reports, test_run)
            # A plain dict: it travels from an xdist worker with the report.
            setattr(report, STATUS_ATTRIBUTE, status.to_wire())
            # junitxml writes the teardown report's properties: the status lands in the XML from there.
            report.user_properties.extend(junit_properties(status))
            report.user_properties.append((NETWORK_PROPERTY, self.controller.network_level(status.mode)))
            # The test is over and judged: its run (the loaded cassette, the replayed history) need not live
            # as long as the session does, where every full garbage collection would walk it again.
            if test_run is not None:
                del item.stash[TEST_RUN_KEY]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for workers' reports too: the attribute travels with the report.
        status = getattr(report, STATUS_ATTRIBUTE, None)
        if isinstance(status, dict):
            self.controller.add_status(TestStatus.from_wire(status))
        for name, value in report.user_properties:
            if name == COMPARISON_PROPERTY:
                self.controller.add_comparison(json.loads(str(value)))
            elif name == GUARD_NOTE_PROPERTY and report.when == "teardown":
                key, _, text = str(value).partition("|")
                self.guard_notes.setdefault(key, text)
            elif name == TOLERATED_PROPERTY:
                self.controller.add_tolerated(report.nodeid, json.loads(str(value)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.guard_notes and getattr(self.config, "workerinput", None) is None:
            from .shell.run_setup import guard_summary  # heavy: only when a replaying test left notes

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
        if self.interception is not None:
            self.interception = self.interception()  # released: None
        # Threads (and late children) of replaying tests that called out after their test ended. A session
        # that never installed the guard has none, and must not pay for importing it.
        guard = sys.modules.get("pytest_agentreplay.guard")
        if guard is not None:
            self.controller.add_strays(guard.stray_refusals())
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_OUTPUT_KEY] = self.controller.worker_output()
            return
        failed = bool(session.testsfailed or session.shouldfail or session.shouldstop)
        new_exit = self.controller.finish(
            session_failed=failed, exit_ok=session.exitstatus == pytest.ExitCode.OK
        )
        if new_exit is not None:
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
def agentreplay_config() -> Document:
    """Per-directory overrides of agent replay settings; override this fixture in a conftest.py.

    Keys: record, mode, rules, allow_hosts, model, agent (the agent name stored in the run), sandbox
    (base-URL mapping), faults, and HTTP settings (idempotency_header, receipts, tool_names,
    openai_compatible_base_urls). The marker wins over this fixture; the command line wins over both.
    """
    return {}


@pytest.fixture
def agentreplay_cassette_path(request: pytest.FixtureRequest) -> Path:
    """The cassette path of this test; override this fixture to customise the layout."""
    return default_cassette(request.node)


@pytest.fixture(autouse=True)
def _agentreplay_activation(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """The marker alone activates replay (``--agentreplay-block-network`` guards every other test from
    ``pytest_runtest_setup`` to ``pytest_runtest_teardown``, fixtures included)."""
    if uses_agentreplay(request.node) and "agent_replay" not in request.fixturenames:
        request.getfixturevalue("agent_replay")
    yield


@pytest.fixture
def agent_replay(
    request: pytest.FixtureRequest, agentreplay_config: Document, agentreplay_cassette_path: Path
) -> Generator[AgentReplay, None, None]:
    """Activate capture or replay for this test and hand over the run.

    With ``--agentreplay-record`` the test runs against the real services and its cassette is written when
    it passes; otherwise the recorded cassette is replayed and the new history compared with it.
    """
    # heavy: the session loads the recorder, the cassette reader and the diff, only when a test replays
    from .shell.run_setup import new_test_run, replaying

    test_run = new_test_run(request, agentreplay_config, agentreplay_cassette_path)
    yield from replaying(request.node, test_run)


@pytest.fixture
def decision_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's ``snapshot`` storing a normalised decision trace as one JSON file per test."""
    from .interop.snapshot import DecisionTraceExtension  # optional: syrupy

    return snapshot.use_extension(DecisionTraceExtension)
