"""pytest wiring of pytest-agentreplay: options, ini keys, marker, fixtures, hooks. Logic lives elsewhere.

Every hook here translates pytest's objects into calls on the session controller (``controller.py``), the
per-test run (``session.py``) or the status decision (``status.py``).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .core.constants import RECORD_MODES, REPLAY_MODES

if TYPE_CHECKING:
    from .controller import CollectedTest, SessionController
    from .core.capture import RunContext  # noqa: F401 (string annotation of BLOCK_KEY)
    from .core.config import Settings
    from .handle import AgentReplay
    from .session import TestRun

# String subscripts: the typed classes import the recorder and the cassette reader, which a session that
# never replays should not pay for.
SETTINGS_KEY = pytest.StashKey["Settings"]()
CONTROLLER_KEY = pytest.StashKey["SessionController"]()
TEST_RUN_KEY = pytest.StashKey["TestRun"]()
# The cause of a failure the plugin raised for this item (a status.CAUSES key), set where it is raised.
CAUSE_KEY = pytest.StashKey[str]()
# The whole message of that failure, as the terminal showed it: every report carries it (report/message.py).
MESSAGE_KEY = pytest.StashKey[str]()
# pytest's reports of this item so far, by phase: the status is decided once, at teardown.
REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
# The guard-only run of a test guarded by --agentreplay-block-network without replaying anything.
BLOCK_KEY = pytest.StashKey["RunContext"]()
PLUGIN_NAME = "agentreplay-session"
STATUS_ATTRIBUTE = "agentreplay_status"
COMPARISON_PROPERTY = "agentreplay-comparison"

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


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

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
        "agentreplay_fail_on_unused",
        help="fail the session when cassettes no test uses remain (default true)",
        type="bool",
        default=None,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentreplay(cassette=None, mode=None, rules=None, record=None, allow_hosts=None, sandbox=None, "
        "faults=None, model=None, runtime_values=None): record or replay this test (the marker alone "
        "activates it); the command line wins",
    )
    from .controller import SessionController
    from .core.config import settings_from_pytest
    from .exceptions import ConfigError

    try:
        settings = settings_from_pytest(config, [o[0].replace("-", "_") for o in (*OPTIONS, *FLAGS)])
        if settings.rules is not None:  # parsed once, here: a bad rule stops the session, not each test
            from .diff.rules import parse_rules

            where = f"[tool.agentreplay.rules] of {config.rootpath / 'pyproject.toml'}"
            settings.rules = tuple(parse_rules(settings.rules, source="project", place=where))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.stash[SETTINGS_KEY] = settings
    controller = SessionController(
        settings, config.rootpath, is_worker=getattr(config, "workerinput", None) is not None
    )
    config.stash[CONTROLLER_KEY] = controller
    config.pluginmanager.register(SessionHooks(config, controller), PLUGIN_NAME)
    from . import vcr_plugin

    vcr_plugin.register(config)  # @pytest.mark.vcr and its fixtures, when pytest-recording is not active


def uses_agentreplay(item: pytest.Item) -> bool:
    """A test replays when it requests the fixture or carries the marker (on itself, class or module)."""
    if "agent_replay" in getattr(item, "fixturenames", ()):
        return True
    if item.get_closest_marker("agentreplay") is not None:
        return True
    from .vcr_plugin import is_vcr_test  # @pytest.mark.vcr, when pytest-recording is not active

    return is_vcr_test(item)


def _overrides_fixture(item: pytest.Item, name: str) -> bool:
    """Whether a project fixture ``name`` is visible to ``item`` (its module, class or a conftest above)."""
    for holder in (getattr(item, "cls", None), getattr(item, "module", None)):
        if holder is not None and name in vars(holder):
            return True
    for plugin in item.config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", None)
        if not path or Path(path).name != "conftest.py" or name not in vars(plugin):
            continue
        if Path(path).parent in item.path.parents:
            return True
    return False


def _default_cassette(item: pytest.Item) -> Path:
    from .core.paths import default_for_item

    settings = item.config.stash[SETTINGS_KEY]
    default = default_for_item(settings.cassette_dir, item.config.rootpath, item.path, item.nodeid, item.name)
    chosen = item.config.hook.pytest_agentreplay_cassette_path(item=item, default=default)
    return Path(chosen) if chosen is not None else default


def _collected_test(item: pytest.Item) -> CollectedTest:
    from .controller import CollectedTest
    from .core.config import marker_cassette

    settings = item.config.stash[SETTINGS_KEY]
    cassette: Path | None
    marks = [m.kwargs.get("cassette") for m in item.iter_markers("agentreplay")]
    named = next((m for m in marks if m is not None), None)
    if named is not None:
        cassette = marker_cassette(settings.cassette_dir, named)
    elif _overrides_fixture(item, "agentreplay_cassette_path"):
        cassette = None
    else:
        cassette = _default_cassette(item)
    return CollectedTest(nodeid=item.nodeid, module=item.path, cassette=cassette)


class SessionHooks:
    """pytest's hooks for the session; each delegates to the :class:`SessionController`."""

    def __init__(self, config: pytest.Config, controller: SessionController) -> None:
        self.config = config
        self.controller = controller
        self.deselected: list[pytest.Item] = []

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.extend(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from .controller import partial_modules

        items = [i for i in (*session.items, *self.deselected) if uses_agentreplay(i)]
        partial = partial_modules(self.config.invocation_params.dir, self.config.args)
        self.controller.collected((_collected_test(i) for i in items), partial)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from .controller import WORKER_OUTPUT_KEY

        output = getattr(node, "workeroutput", None) or {}
        self.controller.merge_worker({WORKER_OUTPUT_KEY: output.get(WORKER_OUTPUT_KEY)})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        blocked = item.stash.get(BLOCK_KEY, None)
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if test_run is None or test_run.ctx is None:
            result = yield
            if blocked is not None:
                from .http.guard import collect_child_refusals

                blocked.failures.extend(collect_child_refusals(blocked))
            if blocked is not None and blocked.failures:
                # A refusal the test swallowed still fails it.
                item.stash[CAUSE_KEY] = "network-blocked"
                _fail(item, str(blocked.failures[0]))
            return result
        from .exceptions import AgentReplayError
        from .report.status import cause_of

        message: str | None = None
        try:
            result = yield
        except BaseException as exc:
            failures = test_run.ctx.failures
            test_run.end(passed=False, error=f"{type(exc).__name__}: {exc}", exc=exc)
            if failures or isinstance(exc, AgentReplayError):
                item.stash[CAUSE_KEY] = cause_of(failures[0] if failures else exc)
            if not (isinstance(exc, AgentReplayError) or failures):
                raise
            # A replay error, perhaps wrapped by an SDK: our message says it all, a traceback does not.
            message = "\n\n".join(dict.fromkeys([str(f) for f in failures] or [str(exc)]))
        else:
            try:
                test_run.end(passed=True)
            except AgentReplayError as exc:
                item.stash[CAUSE_KEY] = cause_of(exc)
                message = str(exc)
        if message is not None:
            _fail(item, message)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        test_run = pyfuncitem.stash.get(TEST_RUN_KEY, None)
        if test_run is not None and test_run.setup_error is not None:
            from .report.status import cause_of

            pyfuncitem.stash[CAUSE_KEY] = cause_of(test_run.setup_error)
            _fail(pyfuncitem, str(test_run.setup_error))
        # The body starts (TestRun.enter_body); audit executes none: it verifies and renders the recording.
        if test_run is None or test_run.enter_body() != "audit":
            return None
        pyfuncitem.add_report_section("call", "agentreplay audit", test_run.audit_view())
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report: pytest.TestReport = yield
        if not uses_agentreplay(item):
            return report
        reports = item.stash.setdefault(REPORTS_KEY, {})
        reports[report.when] = report
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if report.when == "call" and test_run is not None and test_run.ctx is not None:
            comparison = test_run.ctx.extensions.get("comparison")
            if comparison is not None:
                import json

                from .replay.comparison import SECTION, render_comparison

                report.sections.append((SECTION, render_comparison(comparison)))
                report.user_properties.append((COMPARISON_PROPERTY, json.dumps(comparison)))
        if report.when == "teardown":
            from .report.junit import junit_properties

            status = _decide_status(item, reports, test_run)
            setattr(report, STATUS_ATTRIBUTE, status)
            # junitxml writes the teardown report's properties: the status lands in the XML from there.
            report.user_properties.extend(junit_properties(status))
            # The test is over and judged: its run (the loaded cassette, the replayed history) need not live
            # as long as the session does, where every full garbage collection would walk it again.
            if test_run is not None:
                del item.stash[TEST_RUN_KEY]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for workers' reports too: the attribute travels with the report.
        status = getattr(report, STATUS_ATTRIBUTE, None)
        if isinstance(status, dict):
            self.controller.add_status(status)
        for name, value in report.user_properties:
            if name == COMPARISON_PROPERTY:
                import json

                self.controller.add_comparison(json.loads(str(value)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
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
        import sys

        # Threads (and late children) of replaying tests that called out after their test ended. A session
        # that never installed the guard has none, and must not pay for importing it.
        guard = sys.modules.get("pytest_agentreplay.http.guard")
        if guard is not None:
            self.controller.add_strays(guard.stray_refusals())
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            from .controller import WORKER_OUTPUT_KEY

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


def _decide_status(
    item: pytest.Item, reports: dict[str, pytest.TestReport], test_run: TestRun | None
) -> dict[str, Any]:
    from .report.message import status_message
    from .report.status import decide

    worst, phase = "passed", "call"
    for when in ("setup", "call", "teardown"):
        report = reports.get(when)
        if report is None:
            continue
        if report.failed:
            worst, phase = "failed", when
            break
        if report.skipped and worst == "passed":
            worst, phase = "skipped", when
    xfail = any(hasattr(r, "wasxfail") for r in reports.values())
    outcome = test_run.outcome if test_run is not None else None
    message = status_message(
        item.stash.get(MESSAGE_KEY, None),
        test_run,
        str(getattr(reports[phase], "longreprtext", "") or "") if worst == "failed" else None,
    )
    settings = item.config.stash[SETTINGS_KEY]
    return decide(
        nodeid=item.nodeid,
        cassette=str(test_run.cassette if test_run is not None else _collected_test(item).cassette or ""),
        mode=(outcome.mode if outcome is not None else test_run.test.mode if test_run else settings.mode),
        pytest_outcome=worst,
        phase=phase,
        action=outcome.action if outcome is not None else None,
        cause=item.stash.get(CAUSE_KEY, None),
        message=message,
        regressions=outcome.regressions if outcome is not None else 0,
        expected=outcome.expected if outcome is not None else 0,
        drift=outcome.drift if outcome is not None else None,
        xfail=xfail,
        # pytest-rerunfailures numbers the attempts of a test it runs again; the last one is the verdict.
        reruns=max(int(getattr(item, "execution_count", 1) or 1) - 1, 0),
    )


def _fail(item: pytest.Item, message: str) -> NoReturn:
    item.stash[MESSAGE_KEY] = message
    pytest.fail(message, pytrace=False)


@pytest.fixture
def agentreplay_config() -> dict[str, Any]:
    """Per-directory overrides of agent replay settings; override this fixture in a conftest.py.

    Keys: record, mode, rules, allow_hosts, model, agent (the agent name stored in the run), sandbox
    (base-URL mapping), faults, and HTTP settings (idempotency_header, receipts, tool_names,
    openai_compatible_base_urls). The marker wins over this fixture; the command line wins over both.
    """
    return {}


@pytest.fixture
def agentreplay_cassette_path(request: pytest.FixtureRequest) -> Path:
    """The cassette path of this test; override this fixture to customise the layout."""
    return _default_cassette(request.node)


@pytest.fixture(autouse=True)
def _agentreplay_activation(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """The marker alone activates replay; ``--agentreplay-block-network`` guards every other test."""
    item = request.node
    if uses_agentreplay(item):
        if "agent_replay" not in request.fixturenames:
            request.getfixturevalue("agent_replay")
        yield
        return
    settings = request.config.stash[SETTINGS_KEY]
    if not settings.block_network:
        yield
        return
    release = _guard_only(item, settings)
    try:
        yield
    finally:
        release()


def _guard_only(item: pytest.Item, settings: Settings) -> Any:
    from .core.capture import Recorder, RunContext, utc_now
    from .core.events import RunMeta
    from .http import guard
    from .http.refusal import BLOCK_ONLY

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


@pytest.fixture
def agent_replay(
    request: pytest.FixtureRequest, agentreplay_config: dict[str, Any], agentreplay_cassette_path: Path
) -> Generator[AgentReplay, None, None]:
    """Activate capture or replay for this test and hand over the run.

    With ``--agentreplay-record`` the test runs against the real services and its cassette is written when
    it passes; otherwise the recorded cassette is replayed and the new history compared with it.
    """
    from .core.config import marker_kwargs, resolve_test_settings
    from .exceptions import AgentReplayError, ConfigError
    from .handle import AgentReplay
    from .session import TestRun

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
        vcr = _vcr_source(request)
        if vcr is not None:
            marker = vcr.marker_defaults(marker)
        test_settings = resolve_test_settings(
            settings,
            nodeid=item.nodeid,
            marker=marker,
            overrides=agentreplay_config,
            default_cassette=agentreplay_cassette_path,
        )
    except AgentReplayError as exc:
        config_error = str(exc)
    if config_error is not None:
        # Outside the except block: the message says everything, a chained traceback would only repeat it.
        item.stash[CAUSE_KEY] = "config"
        _fail(item, config_error)
    hook = request.config.hook
    test_run = TestRun(
        item.nodeid,
        settings,
        test_settings,
        redact_hook=_redact_hook(hook),
        rules_hook=lambda: [
            r for r in hook.pytest_agentreplay_diff_rules(item=item, mode=test_settings.mode) if r
        ],
        classify_hook=_classify_hook(hook),
        cassette_named=marker.get("cassette") is not None,
        vcr=vcr,
        rootdir=item.config.rootpath,
    )
    uninstall = _install_interception()
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
        if uninstall is not None:
            uninstall()


@pytest.fixture
def decision_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` storing a normalised decision trace as one JSON file per test."""
    from .interop.snapshot import DecisionTraceExtension

    return snapshot.use_extension(DecisionTraceExtension)


def _vcr_source(request: pytest.FixtureRequest) -> Any:
    """A vcr-marked test's pytest-recording cassettes (read in place when it has no cassette of ours)."""
    from .vcr_plugin import is_vcr_test, vcr_source

    return vcr_source(request) if is_vcr_test(request.node) else None


def _redact_hook(hook: Any) -> Any:
    if not hook.pytest_agentreplay_redact_event.get_hookimpls():
        # No project hook: the save keeps the redacted events as they are, their shared messages shared
        # (a hook gets a copy of each event to change, which costs a conversation's square).
        return None

    def redact(event: dict[str, Any]) -> dict[str, Any]:
        for replacement in hook.pytest_agentreplay_redact_event(event=event):
            if replacement is not None:
                event = replacement
        return event

    return redact


def _classify_hook(hook: Any) -> Any:
    if not hook.pytest_agentreplay_classify_exchange.get_hookimpls():
        # No project classifies: keep the per-request hot path free of a hook call.
        return None

    from .core.model import copy_json  # lazy, as the plugin's other imports: loaded when a test runs

    def classify(request: dict[str, Any], response: dict[str, Any]) -> str | None:
        # Copies of their own: a request's body holds the very messages earlier requests' events hold.
        result = hook.pytest_agentreplay_classify_exchange(
            request=copy_json(request), response=copy_json(response)
        )
        return None if result is None else str(result)

    return classify


def _install_interception() -> Any:
    # No fallback: replay without interception would let calls escape the fail-closed guard.
    from .intercept import install

    return install()
