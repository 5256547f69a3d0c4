"""One owner of a test's life, from its first fixture's set-up to its status: :class:`TestLife`, to which
``plugin.py``'s hooks and the ``agent_replay`` fixture delegate. Failures go through :meth:`TestLife.fail`,
which keeps the first cause (the phase pytest reports first explains the test).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import NoReturn

import pytest
from pluggy import HookRelay

from ..core.config import Settings
from ..core.documents import Document
from ..core.json_copy import copy_json
from ..core.placeholder_credentials import PlaceholderCredentials
from ..exceptions import AgentReplayError
from ..http.providers import ProviderSet
from ..http.providers.registry import entry_point_providers
from ..http.providers.registry import session_providers as providers_from
from ..redaction.known import EnvironmentCredentials
from ..report.status import Cause, TestOutcome, TestStatus, cause_of, decide, status_message
from . import vcr_plugin
from .controller import HeldInterception
from .fixture_guard import FixtureGuard, guard_run
from .handle import AgentReplay
from .item_facts import GUARD_NOTE_PROPERTY, SETTINGS_KEY, collected_test
from .plan import TestPlan, early_plan, fixture_plan, parse_rules_of
from .session import TestRun

# The session's providers, built once (its hooks, its installed distributions' entry points, the built-ins).
PROVIDERS_KEY = pytest.StashKey[ProviderSet]()
# The session's memory of the environment's credentials, which every run learns as secrets.
ENVIRONMENT_KEY = pytest.StashKey[EnvironmentCredentials]()


def session_providers(config: pytest.Config) -> ProviderSet:
    """The providers of the session (built on first call)."""
    found = config.stash.get(PROVIDERS_KEY, None)
    if found is None:
        hooks = config.hook.pytest_agentreplay_providers(config=config)
        found = providers_from(hooks, entry_point_providers())
        config.stash[PROVIDERS_KEY] = found
    return found


class TestLife:
    __test__ = False  # a class named Test*, not a test

    def __init__(
        self,
        item: pytest.Item,
        interception: HeldInterception,
        credentials: PlaceholderCredentials,
        *,
        replays: bool,
    ) -> None:
        self.item = item
        self.settings: Settings = item.config.stash[SETTINGS_KEY]
        self.interception = interception
        # The session's placeholder credentials (core/placeholder_credentials.py), set by the fixture guard.
        self.credentials = credentials
        self.replays = replays  # uses agent replay (else: only guarded by --agentreplay-block-network)
        self.run: TestRun | None = None
        self.guard: FixtureGuard | None = None
        # The plan made before the fixtures ran (None once the run's plan took it over, or never made).
        self.early: TestPlan | None = None
        self.reports: dict[str, pytest.TestReport] = {}
        # The cause of the first failure the plugin raised, and its whole message as the terminal showed it:
        # every report carries it (report/status.py). A test run again (pytest-rerunfailures) starts a new
        # life: the last attempt's cause is not its.
        self.cause: Cause | None = None
        self.message: str | None = None

    # -- the outcome, one way in -------------------------------------------------------------------------

    def fail(self, cause: Cause, message: str) -> NoReturn:
        """Fail the current phase with the plugin's ``message``; the test's first cause is kept."""
        if self.cause is None:
            self.cause, self.message = cause, message
        # Without the exception being handled, if any: the message says everything, a chained traceback
        # would only repeat it.
        raise pytest.fail.Exception(message, pytrace=False) from None

    # -- set-up: the guard begins before any fixture -----------------------------------------------------

    def setup(self) -> Generator[None, object, object]:
        try:
            self.guard = self._fixture_guard()
        except BaseException:
            # A set-up that fails before its guard is up has no placeholder: not the last test's either.
            self.credentials.remove()
            raise
        if self.guard is None:
            return (yield)
        try:
            result = yield
        except BaseException:
            message = self._guard_message("set-up")
            if message is None:
                raise
            self.fail(Cause.NETWORK_BLOCKED, message)
        message = self._guard_message("set-up", hand_to_run=True)
        if message is not None:
            self.fail(Cause.NETWORK_BLOCKED, message)
        return result

    def _fixture_guard(self) -> FixtureGuard | None:
        """The guard over the test's fixtures, from its early plan; None for a test that records (or may),
        which gets no placeholder credential either."""
        item = self.item
        cassette = collected_test(item).cassette
        plan = self.early = early_plan(item, self.settings, cassette) if self.replays else None
        ctx = guard_run(item.nodeid, plan, self.settings, cassette)
        if ctx is None:
            self.credentials.remove()
            return None
        return FixtureGuard(item.nodeid, ctx, self.credentials)

    def _guard_message(self, phase: str, *, hand_to_run: bool = False) -> str | None:
        """The guard's new problems the test's run does not hold yet, as a message; with ``hand_to_run``
        given to the active replay run instead."""
        if self.guard is None:
            return None
        new = self.guard.new_problems(phase=phase)
        run = self.run.ctx if self.run is not None else None
        if run is not None and not run.recording and hand_to_run:
            for problem in new:
                run.failures.add(problem, once=True)
            return None
        fresh = [p for p in new if run is None or p not in run.failures]
        return "\n\n".join(str(p) for p in fresh) or None

    # -- the agent_replay fixture: the run ---------------------------------------------------------------

    def start_run(
        self, request: pytest.FixtureRequest, overrides: Document, cassette: Path
    ) -> Generator[AgentReplay, None, None]:
        """The ``agent_replay`` fixture's life: planned with the fixtures' settings, begun, handle yielded."""
        try:
            foreign = vcr_plugin.source(request) if vcr_plugin.claims(request.node) else None
            early, self.early = self.early, None  # taken over by the run's plan
            plan = fixture_plan(
                self.item, self.settings, overrides=overrides, cassette=cassette, foreign=foreign, early=early
            )
            providers = session_providers(request.config)
        except AgentReplayError as exc:
            self.fail(Cause.CONFIG, str(exc))
        # No fallback: replay without interception would let calls escape the fail-closed guard.
        self.interception.hold()
        if self.interception.error is not None:
            raise self.interception.error
        hook, item, mode, stash = request.config.hook, self.item, plan.test.mode, request.config.stash
        if ENVIRONMENT_KEY not in stash:  # made once, not for a setdefault at every test
            stash[ENVIRONMENT_KEY] = EnvironmentCredentials()
        self.run = run = TestRun(
            plan,
            self.settings,
            redact_hook=_redact_hook(hook),
            # Closes over the item, not this life: the run must not point back at its owner (a cycle only the
            # cyclic collector would free, walking the whole cassette).
            rules_hook=lambda: [r for r in hook.pytest_agentreplay_diff_rules(item=item, mode=mode) if r],
            classify_hook=_classify_hook(hook),
            providers=providers,
            rootdir=self.item.config.rootpath,
            environment=stash[ENVIRONMENT_KEY],
        )
        try:
            try:
                run.plan = parse_rules_of(plan, self.settings)
                run.begin()
            except AgentReplayError as exc:
                # Reported as the test's failure (not a set-up error) when its body would start.
                run.setup_error = exc
            yield AgentReplay(run)
        finally:
            run.deactivate()

    def enter_body(self) -> bool:
        """``pytest_pyfunc_call``: the body starts; True when the plugin ran it instead (audit mode)."""
        run = self.run
        if run is None:
            return False
        if run.setup_error is not None:
            self.fail(cause_of(run.setup_error), str(run.setup_error))
        if run.enter_body() != "audit":
            return False
        self.item.add_report_section("call", "agentreplay audit", run.audit_view())
        return True

    # -- the call: the run ends with the body ------------------------------------------------------------

    def call(self) -> Generator[None, object, object]:
        run = self.run
        if run is None or run.ctx is None:
            return (yield from self._guarded_call())
        if run.plan.test.mode == "model-comparison" and not run.plan.records:
            from .repeats import comparison_settings_of, repeated_call  # only model comparison repeats

            try:
                wanted = comparison_settings_of(run)
            except AgentReplayError as exc:
                self.fail(Cause.CONFIG, str(exc))
            if wanted.repeat > 1:
                return (yield from repeated_call(self, run, wanted))
        try:
            result = yield
        except BaseException as exc:
            self._guard_message("the test's call", hand_to_run=True)
            run.end(passed=False, exc=exc)
            failures = list(run.ctx.failures)
            if not (isinstance(exc, AgentReplayError) or failures):
                raise
            # A replay error, perhaps wrapped by an SDK: our message says it all, a traceback does not.
            message = "\n\n".join(dict.fromkeys(str(f) for f in failures or [exc]))
            self.fail(cause_of(failures[0] if failures else exc), message)
        self._guard_message("the test's call", hand_to_run=True)
        try:
            run.end(passed=True)
        except AgentReplayError as exc:
            self.fail(cause_of(exc), str(exc))
        return result

    def guard_to_run(self) -> None:
        self._guard_message("the test's call", hand_to_run=True)

    def _guarded_call(self) -> Generator[None, object, object]:
        """The call of a test with no run: a refusal the test swallowed still fails it."""
        try:
            result = yield
        except BaseException:
            self._guard_message("the test's call")  # the call failed already: its refusals are not teardown's
            raise
        message = self._guard_message("the test's call")
        if message is not None:
            self.fail(Cause.NETWORK_BLOCKED, message)
        return result

    # -- teardown: every fixture under the guard, then it ends -------------------------------------------

    def teardown(self) -> Generator[None, object, object]:
        fixture_guard = self.guard
        if fixture_guard is None:
            return (yield)
        try:
            return (yield)
        finally:
            message = self._guard_message("teardown")
            self.guard = None
            run = self.run.ctx if self.run is not None else None
            for key, text in fixture_guard.close(run):
                # On the item: pytest copies its user properties into the teardown report (xdist, JUnit).
                self.item.user_properties.append((GUARD_NOTE_PROPERTY, f"{key}|{text}"))
            if message is not None:
                # Over a teardown error, as the guard's refusal is what explains it.
                self.fail(Cause.NETWORK_BLOCKED, message)

    # -- the reports -------------------------------------------------------------------------------------

    def status(self, report: pytest.TestReport) -> TestStatus | None:
        """Keep pytest's report of a phase; at teardown, the test's one status from them and the run."""
        reports = self.reports
        reports[report.when] = report
        if report.when != "teardown":
            return None
        worst, phase = "passed", "call"
        for when in ("setup", "call", "teardown"):
            found = reports.get(when)
            if found is None:
                continue
            if found.failed:
                worst, phase = "failed", when
                break
            if found.skipped and worst == "passed":
                worst, phase = "skipped", when
        item, run = self.item, self.run
        longrepr = str(getattr(reports[phase], "longreprtext", "") or "") if worst == "failed" else None
        # The run's outcome names the cassette, the mode and what the plugin did; a run that never ended
        # (or never began) only the first two.
        outcome = run.outcome if run is not None else None
        if outcome is None:
            cassette = run.plan.cassette if run is not None else collected_test(item).cassette
            mode = run.plan.test.mode if run is not None else self.settings.mode
            outcome = TestOutcome(item.nodeid, str(cassette or ""), None, mode)
        return decide(
            outcome,
            worst,
            phase=phase,
            cause=self.cause,
            message=status_message(self.message, run, longrepr),
            xfail=any(hasattr(r, "wasxfail") for r in reports.values()),
            # pytest-rerunfailures numbers the attempts of a test it runs again; the last one is the verdict.
            reruns=max(int(getattr(item, "execution_count", 1) or 1) - 1, 0),
        )


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
