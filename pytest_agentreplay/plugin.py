"""pytest wiring of pytest-agentreplay: options, ini keys, marker, fixtures, hooks. Logic lives elsewhere."""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .constants import RECORD_MODES, REPLAY_MODES

if TYPE_CHECKING:
    from .config import Settings
    from .handle import AgentReplay
    from .session import TestRun  # noqa: F401

# String subscripts: the typed classes import pydantic, which a session that never replays should not pay for.
SETTINGS_KEY = pytest.StashKey["Settings"]()
TEST_RUN_KEY = pytest.StashKey["TestRun"]()
PLUGIN_NAME = "agentreplay-session"
REPORT_PROPERTY = "agentreplay"

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
        {"metavar": "PATH", "help": "write the session drift report; format by suffix: .md, .json, .html"},
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


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentreplay", "replay-based regression testing of LLM agents")
    for name, kwargs, ini_help in OPTIONS:
        dest = "agentreplay_" + name.replace("-", "_")
        group.addoption(f"--agentreplay-{name}", dest=dest, default=None, **kwargs)
        parser.addini(dest, help=f"{ini_help} (the command line wins)", default=None)
    group.addoption(
        "--agentreplay-update",
        dest="agentreplay_update",
        action="store_true",
        default=None,
        help="accept drift: rewrite drifting cassettes from the replayed run, remove unused ones",
    )
    parser.addini(
        "agentreplay_update", help="accept drift (prefer the command-line flag)", type="bool", default=None
    )
    group.addoption(
        "--agentreplay-save-on-failure",
        dest="agentreplay_save_on_failure",
        action="store_true",
        default=None,
        help="also write the cassette when a recording test fails",
    )
    parser.addini(
        "agentreplay_save_on_failure", help="also write cassettes of failing tests", type="bool", default=None
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
        "faults=None, model=None): configure agent replay for this test; the command line wins",
    )
    from .config import build_settings, read_pyproject_table
    from .exceptions import ConfigError

    names = [o[0].replace("-", "_") for o in OPTIONS] + ["update", "save_on_failure"]
    cli = {name: config.getoption("agentreplay_" + name) for name in names}
    ini = {name: config.getini("agentreplay_" + name) for name in [*names, "fail_on_unused"]}
    try:
        project = read_pyproject_table(config.rootpath)
        settings = build_settings(rootdir=config.rootpath, cli=cli, ini=ini, project=project)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.stash[SETTINGS_KEY] = settings
    config.pluginmanager.register(SessionPlugin(config, settings), PLUGIN_NAME)


class SessionPlugin:
    """Per-session state: what happened to each cassette (collected from xdist workers too)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.outcomes: list[dict[str, Any]] = []
        self.deselected: list[pytest.Item] = []
        self.module_dirs: set[Path] = set()
        self.known_cassettes: set[Path] = set()
        self.unused: list[str] = []
        self.removed: list[str] = []
        # model-comparison results per test (collected from xdist workers' reports too).
        self.comparisons: list[dict[str, Any]] = []

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.extend(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from .paths import default_cassette_path

        cassette_dir = self.settings.cassette_dir
        items = [*session.items, *self.deselected]
        replay_modules = {item.path for item in items if "agent_replay" in getattr(item, "fixturenames", ())}
        # A module named with ``::`` on the command line was collected only in part: the cassettes of its
        # other tests are not unused, so its folder is not judged at all (as syrupy does).
        partial = {
            (self.config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
            for arg in self.config.args
            if "::" in arg
        }
        for item in items:
            if item.path not in replay_modules:
                continue
            default = default_cassette_path(cassette_dir, self.config.rootpath, item.path, item.name)
            if item.path.resolve() not in partial:
                self.module_dirs.add(default.parent)
            self.known_cassettes.add(default)
            for mark in item.iter_markers("agentreplay"):
                if mark.kwargs.get("cassette"):
                    named = Path(str(mark.kwargs["cassette"]))
                    named = named if named.is_absolute() else cassette_dir / named
                    self.known_cassettes.add(
                        named if named.suffix == ".json" else named.with_name(named.name + ".json")
                    )

    def _find_unused(self, session: pytest.Session) -> list[str]:
        from .unused import unused_cassettes

        if session.testsfailed or session.shouldfail or session.shouldstop:
            # A crashed or failing session says nothing reliable about which cassettes are still wanted.
            return []
        used = {Path(str(o["cassette"])) for o in self.outcomes}
        return [str(p) for p in unused_cassettes(self.module_dirs, self.known_cassettes | used)]

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # xdist controller: every worker collected the whole suite, so any worker's list will do.
        output = getattr(node, "workeroutput", {}) or {}
        if not self.unused and output.get("agentreplay_unused"):
            self.unused = list(output["agentreplay_unused"])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if test_run is None or test_run.ctx is None:
            return (yield)
        from .exceptions import AgentReplayError

        message: str | None = None
        try:
            result = yield
        except BaseException as exc:
            failures = test_run.ctx.failures
            test_run.end(passed=False, error=f"{type(exc).__name__}: {exc}")
            if not (isinstance(exc, AgentReplayError) or failures):
                raise
            # A replay error, perhaps wrapped by an SDK: our message says it all, a traceback does not.
            message = "\n\n".join(dict.fromkeys([str(f) for f in failures] or [str(exc)]))
        else:
            try:
                test_run.end(passed=True)
            except AgentReplayError as exc:
                message = str(exc)
        if message is not None:
            pytest.fail(message, pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report: pytest.TestReport = yield
        test_run = item.stash.get(TEST_RUN_KEY, None)
        if test_run is not None and report.when == "call" and test_run.outcome is not None:
            from .report.junit import add_junit_properties

            outcome = test_run.outcome.to_dict()
            report.user_properties.append((REPORT_PROPERTY, json.dumps(outcome)))
            # On the item: junitxml writes the properties of the teardown report, built from the item's.
            add_junit_properties(item, outcome)
        comparison = test_run.ctx.extensions.get("comparison") if test_run and test_run.ctx else None
        if comparison is not None and report.when == "call":
            from .replay.comparison import PROPERTY, SECTION, render_comparison

            report.sections.append((SECTION, render_comparison(comparison)))
            report.user_properties.append((PROPERTY, json.dumps(comparison)))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        # Audit mode executes nothing: the recorded run is verified and rendered instead of the test body.
        test_run = pyfuncitem.stash.get(TEST_RUN_KEY, None)
        if test_run is not None and test_run.setup_error is not None:
            pytest.fail(str(test_run.setup_error), pytrace=False)
        if test_run is None or test_run.ctx is None or test_run.ctx.mode != "audit":
            return None
        pyfuncitem.add_report_section("call", "agentreplay audit", test_run.audit_view())
        return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for xdist workers' reports too: user_properties travel with the report.
        for name, value in report.user_properties:
            if name == REPORT_PROPERTY:
                self.outcomes.append(json.loads(str(value)))
            elif name == "agentreplay-comparison":
                self.comparisons.append(json.loads(str(value)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes and not self.unused and not self.removed:
            return
        from .summary import summary_lines

        terminalreporter.section("agentreplay")
        for line in summary_lines(self.outcomes, unused=self.unused):
            terminalreporter.write_line(line)
        for path in self.removed:
            terminalreporter.write_line(f"  removed unused cassette: {path}")
        if self.comparisons:
            from .replay.comparison import summary_lines as comparison_lines

            for line in comparison_lines(self.comparisons):
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is not None:
            if workerinput.get("workerid") == "gw0":
                self.config.workeroutput["agentreplay_unused"] = self._find_unused(session)  # type: ignore[attr-defined]
            return
        if not self.unused and not self.config.pluginmanager.has_plugin("dsession"):
            self.unused = self._find_unused(session)
        if self.unused:
            if self.settings.update:
                from .unused import remove

                self.removed = [str(p) for p in remove(Path(p) for p in self.unused)]
                self.unused = []
            elif self.settings.fail_on_unused and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.settings.report is not None:
            from .summary import write_report

            write_report(self.settings.report, self.outcomes, unused=self.unused)


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
    from .paths import default_cassette_path

    item = request.node
    settings = request.config.stash[SETTINGS_KEY]
    default = default_cassette_path(settings.cassette_dir, request.config.rootpath, item.path, item.name)
    chosen = request.config.hook.pytest_agentreplay_cassette_path(item=item, default=default)
    return Path(chosen) if chosen is not None else default


@pytest.fixture
def agent_replay(
    request: pytest.FixtureRequest, agentreplay_config: dict[str, Any], agentreplay_cassette_path: Path
) -> Generator[AgentReplay, None, None]:
    """Activate capture or replay for this test and hand over the run.

    With ``--agentreplay-record`` the test runs against the real services and its cassette is written when
    it passes; otherwise the recorded cassette is replayed and the new history compared with it.
    """
    from .config import marker_kwargs, resolve_test_settings
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
        pytest.fail(config_error, pytrace=False)
    hook = request.config.hook
    test_run = TestRun(
        item.nodeid,
        settings,
        test_settings,
        redact_hook=_redact_hook(hook),
        rules_hook=lambda: [
            r for r in hook.pytest_agentreplay_diff_rules(item=item, mode=test_settings.mode) if r
        ],
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
    from .snapshot import DecisionTraceExtension

    return snapshot.use_extension(DecisionTraceExtension)


def _redact_hook(hook: Any) -> Any:
    def redact(event: dict[str, Any]) -> dict[str, Any]:
        for replacement in hook.pytest_agentreplay_redact_event(event=event):
            if replacement is not None:
                event = replacement
        return event

    return redact


def _install_interception() -> Any:
    # No fallback: replay without interception would let calls escape the fail-closed guard.
    from .http import install

    return install()
