"""One test's run, as its plan says: begun, replayed or recorded, then compared or saved."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cassette.parsing import cassette_elsewhere_error, missing_cassette_error
from ..cassette.read import LoadedCassette, load_cassette
from ..core.capture import Recorder, RunContext, error_text, pop_active, push_active, utc_now
from ..core.commands import record_command, rerecord_fix
from ..core.config import Settings, pending_enabled
from ..core.constants import Mode
from ..core.documents import Document
from ..core.events import Event, RunMeta, build_validators
from ..core.paths import remove_pending
from ..core.run_state import Rerecord
from ..diff import render_drift
from ..diff.pipeline import PayloadSource, RuleLayers, compare_run
from ..diff.result import DriftResult
from ..exceptions import (
    AgentReplayError,
    AuditProblemsError,
    CassetteNotFoundError,
    CassetteNotSavedError,
    ConfigError,
    DriftError,
    WrongTestCassetteError,
)
from ..http.providers import ProviderSet, providers_of
from ..redaction import RedactedEvent, Redactor
from ..redaction.known import EnvironmentCredentials
from ..replay import runs
from ..replay.foreign import ForeignSource
from ..replay.modes import finish_replay, mode_rules
from ..replay.replayed_history import RecordedSide, ReplayedHistory
from ..replay.tools import ToolReplayer
from ..report.status import Action, Rerecorded, TestOutcome
from .plan import TestPlan

if TYPE_CHECKING:
    from ..cassette.write import RenderedCassette


@dataclass(eq=False, repr=False)  # never compared nor printed: cheaper to create without them
class TestRun:
    __test__ = False  # a class named Test*, not a test

    plan: TestPlan
    settings: Settings
    redact_hook: Callable[[Document], Document] | None = None
    rules_hook: Callable[[], list[Document]] | None = None
    classify_hook: Callable[[Document, Document | None], str | None] | None = None
    # The session's providers (``http.providers.ProviderSet``); None: the built-in ones.
    providers: ProviderSet | None = None
    # pytest's rootdir: a missing cassette is looked for above it too (cassette/parsing.py).
    rootdir: Path | None = None
    ctx: RunContext | None = None
    # The redactor the run's cassette is written with (also ``ctx.redactor``, typed there as a protocol).
    redactor: Redactor | None = None
    # The cassette replayed (None while recording): the run reads it as a RecordedRun, the session owns it.
    recorded: LoadedCassette | None = None
    outcome: TestOutcome | None = None
    drift: DriftResult | None = None
    setup_error: AgentReplayError | None = None
    # The exception that ended the test body, when it raised.
    error: BaseException | None = None
    # The plan's foreign source, when it serves the run (its own cassette did not exist at set-up).
    served_by: ForeignSource | None = None
    # The session's memory of the environment's credentials (None: read it afresh).
    environment: EnvironmentCredentials | None = None
    _token: object = None

    @property
    def failures(self) -> Sequence[BaseException]:
        return list(self.ctx.failures) if self.ctx is not None else ()

    def _outcome(
        self,
        action: Action,
        mode: str | None = None,
        *,
        regressions: int = 0,
        expected: int = 0,
        drift: DriftResult | None = None,
    ) -> TestOutcome:
        mode = mode or self.plan.test.mode
        return TestOutcome(
            self.plan.nodeid, str(self.plan.cassette), action, mode, regressions, expected, drift
        )

    def begin(self) -> RunContext:
        """Start the run; a missing cassette ends it before it starts (``outcome`` ``missing``)."""
        build_validators()
        http_settings = self.settings.http.with_overrides(self.plan.test.extra)._replace(
            allow_hosts=tuple(self.plan.test.allow_hosts),
            nodeid=self.plan.nodeid,
            # The clock, uuid and random sources RunContext.start() records or serves (runtime_values.py).
            runtime_values=self.plan.test.runtime_values,
            classify_hook=self.classify_hook,
            providers=self.providers,
            model_override=self.plan.test.model,
        )
        try:
            if self.plan.records and self.plan.test.record in ("missing", "drifted"):
                self._refuse_a_second_tree()
            recorded = None if self.plan.records else self._load_recorded()
        except AgentReplayError as exc:
            if isinstance(exc, CassetteNotFoundError):
                self.outcome = self._outcome(Action.MISSING)
            self.located(exc)
            raise
        # A replayed run keeps the recorded run's id and metadata: an update rewrites only what changed.
        if recorded is not None:
            run = recorded.run
        else:  # a new run's, made only when it records
            agent = self.plan.test.extra.get("agent")
            run = RunMeta(
                run_id=uuid.uuid4().hex,
                test=self.plan.nodeid,
                recorded_at=utc_now(),
                agent=None if agent is None else str(agent),
            )
        ctx = RunContext(
            Recorder(run),
            mode="record" if recorded is None else self.plan.test.mode,
            cassette=str(self.plan.cassette),
            tools=None if recorded is None else ToolReplayer(recorded),
            recorded=recorded,
            settings=http_settings,
        )
        if recorded is not None:
            self.recorded = recorded
            if self.served_by is not None:
                self.served_by.activate(ctx, recorded, converting=self.settings.update)
            elif self.plan.test.record == "drifted" and ctx.mode is Mode.REGRESSION:
                ctx.rerecord = Rerecord()
        ctx.redactor = self.redactor = Redactor.from_config(self.settings.redaction)
        # A credential the environment holds is a secret wherever the run repeats it (a key in a prompt).
        self.redactor.learn_environment(os.environ, self.environment)
        ctx.origin_thread = threading.get_ident()
        self.ctx = ctx
        self._token = push_active(ctx)
        runs.start(ctx)
        return ctx

    def _refuse_a_second_tree(self, mode: str = "record") -> None:
        """A cassette missing here but present under the project root (a run from a subdirectory without an
        ini file): recording would start a second cassette tree."""
        if self.rootdir is None or self.plan.foreign is not None:
            return
        error = cassette_elsewhere_error(
            self.plan.nodeid,
            self.plan.cassette,
            mode=mode,
            rootdir=self.rootdir,
            cassette_dir=self.settings.cassette_dir,
        )
        if error is not None:
            raise error

    def _load_recorded(self) -> LoadedCassette:
        if self.plan.foreign is not None and not self.plan.cassette.exists():
            self.served_by = self.plan.foreign
            return self.plan.foreign.load(self.plan.nodeid, self.plan.cassette)
        if not self.plan.cassette.exists():
            self._refuse_a_second_tree(self.plan.test.mode)
            raise missing_cassette_error(
                self.plan.nodeid, self.plan.cassette, record=self.plan.test.record, mode=self.plan.test.mode
            )
        # --agentreplay-update rewrites the cassette: an intact older version is upgraded on that save.
        recorded = load_cassette(self.plan.cassette, mode=self.plan.test.mode, migrate=self.settings.update)
        owner = recorded.run.test
        if (
            owner
            and owner != self.plan.nodeid
            and not self.plan.cassette_named
            # Node ids are redacted on write (a parametrize id may hold a secret): compared the same way.
            and Redactor.from_config(self.settings.redaction).redact_string(self.plan.nodeid) != owner
        ):
            raise WrongTestCassetteError(
                f"the cassette of {self.plan.nodeid} was recorded for another test: {owner}",
                evidence=[
                    f"this test:        {self.plan.nodeid}",
                    f"cassette records: {owner}",
                    "a cassette copied or moved from another test would replay that test's run",
                ],
                cassette=self.plan.cassette,
                mode=self.plan.test.mode,
                fixes=[
                    f"record this test's own run: {record_command(self.plan.nodeid, 'all')}",
                    "if both tests really share one run, name it on each of them: "
                    f'@pytest.mark.agentreplay(cassette="{self._relative_cassette()}")',
                    "if the test was renamed, move the cassette back or re-record it under the new name",
                ],
            )
        return recorded

    def _relative_cassette(self) -> str:
        try:
            return self.plan.cassette.relative_to(self.settings.cassette_dir).with_suffix("").as_posix()
        except ValueError:
            return str(self.plan.cassette)

    def enter_body(self) -> str | None:
        """The test body starts; returns the run's mode, None without a run."""
        if self.ctx is None:
            return None
        runs.enter_body(self.ctx)
        return self.ctx.mode

    def deactivate(self) -> None:
        if self.ctx is not None and self._token is not None:
            pop_active(self.ctx, self._token)
            self._token = None

    def end(self, *, passed: bool, exc: BaseException | None = None) -> TestOutcome:
        """Finish the run: save it when recording (only if the test passed), else check and compare it.
        The outcome is set here, once; the problem that fails the test (if any) is raised after it."""
        ctx = self.ctx
        assert ctx is not None, "end() before begin()"
        if exc is not None:
            self.error = exc
        runs.finish(ctx, "ok" if passed else "error", None if exc is None else error_text(exc))
        self.deactivate()
        if ctx.recording:
            outcome, problem = self._recorded(ctx, passed=passed)
        else:
            # Mode checks (sandbox idempotency, refusals in child processes -> ctx.failures; model-comparison
            # -> the comparison). Audit too: a refusal a fixture swallowed must still fail the test.
            finish_replay(ctx, lambda: self._rule_layers(ctx), self.settings)
            problem = ctx.failures.first if passed else None
            if problem is not None:
                outcome = self._outcome(Action.REPLAYED)
            elif ctx.mode == "audit":
                outcome, problem = self._audit()
            else:
                outcome, problem = self._compare(ctx, passed=passed)
        self.outcome = outcome
        if outcome.action in _PENDING_STALE and (outcome.mode in ("record", "regression")):
            remove_pending(self.plan.cassette)
        if problem is not None:
            raise self.located(problem)
        return outcome

    def located(self, error: BaseException) -> BaseException:
        """``error`` with this run's cassette and mode where it names none (a settings error keeps its own
        place, where the fix is)."""
        # A drift's rendered report names both already, in its own layout.
        if isinstance(error, AgentReplayError) and not isinstance(error, ConfigError | DriftError):
            if error.cassette is None:
                error.cassette = str(self.plan.cassette)
            if error.mode is None:
                error.mode = self.plan.mode
        return error

    def _recorded(self, ctx: RunContext, *, passed: bool) -> tuple[TestOutcome, BaseException | None]:
        # A call refused while recording (classified "model" and no provider reads it) that the agent
        # swallowed: the recording lacks it, so the test fails and its cassette is not saved.
        refused = ctx.failures.first if passed else None
        if (passed and refused is None) or self.settings.save_on_failure:
            events: Sequence[Event | RedactedEvent] = ctx.recorder.events
            rerecorded = None
            if ctx.rerecord is not None:
                events, rerecorded = self._rerecorded(ctx, ctx.rerecord)
            written = self._outcome(Action.RECORDED, "record")._replace(rerecorded=rerecorded)
            outcome, not_saved = self._save(ctx.recorder.run, events, written, "record")
            return outcome, refused or not_saved
        return self._outcome(Action.NOT_SAVED, "record"), refused

    def _rerecorded(self, ctx: RunContext, rerecord: Rerecord) -> tuple[list[RedactedEvent], Rerecorded]:
        from ..replay.update import rerecorded_events

        recorded, at = self.recorded, rerecord.at
        assert recorded is not None and self.redactor is not None and at is not None
        side = RecordedSide(recorded.events)
        kept = frozenset({ctx.settings.idempotency_header})
        views = ReplayedHistory(ctx.recorder.events, side, self.redactor, kept).views
        recorded_dicts = side.dicts
        events = rerecorded_events(recorded_dicts, views, at, ctx.recorder.run.run_id)
        return events, Rerecorded(
            at, rerecord.what, at, len(views) - at, rerecord.calls_kept, rerecord.calls_sent
        )

    def audit_view(self) -> str:
        from ..report.timeline import render_timeline  # only audit mode shows it

        recorded = self.recorded
        assert recorded is not None
        return render_timeline(recorded.run, recorded.events, title=f"audit of {self.plan.cassette}")

    def _audit(self) -> tuple[TestOutcome, BaseException | None]:
        from ..replay.audit import audit_advice  # only audit mode runs it

        assert self.recorded is not None
        # Audit mode asks whether the record is complete: a write without key or receipt fails it too.
        problems = [*self.recorded.verify(), *audit_advice(self.recorded)]
        outcome = self._outcome(Action.AUDITED, "audit", regressions=len(problems))
        if not problems:
            return outcome, None
        return outcome, AuditProblemsError(
            f"audit of {self.plan.nodeid} found {len(problems)} problem(s)",
            evidence=problems,
            cassette=self.plan.cassette,
            mode="audit",
            fixes=[
                rerecord_fix(self.plan.nodeid),
                "make every write carry an Idempotency-Key and return a receipt",
            ],
        )

    def _save(
        self,
        run: RunMeta,
        events: Sequence[Event | RedactedEvent],
        written: TestOutcome,
        mode: str | None = None,
    ) -> tuple[TestOutcome, CassetteNotSavedError | None]:
        """Write the cassette: ``written``, or ``not-saved`` and the error to fail the test with. Under a test
        that already failed (``--agentreplay-save-on-failure``) the failed write is a note on its error."""
        try:
            self._render(run, events).write()
        except CassetteNotSavedError as exc:
            if self.error is None:
                self.error = exc
                return self._outcome(Action.NOT_SAVED, mode), exc
            self.error.add_note(f"agentreplay: {exc}")
            return self._outcome(Action.NOT_SAVED, mode), None
        return written, None

    def _render(self, run: RunMeta, events: Sequence[Event | RedactedEvent]) -> RenderedCassette:
        # Only recording, accepting and drifting sessions write: a passing replay never imports the writer.
        from ..cassette.write import render_cassette

        assert self.ctx is not None
        return render_cassette(
            self.plan.cassette,
            run,
            events,
            redactor=self.redactor,
            extra_redact=self.redact_hook,
            inline_limit=self.settings.inline_limit,
            transport_headers=self.settings.transport_headers,
            # Replay matches writes by it: kept even when it is named like a transport header.
            keep_headers={self.ctx.settings.idempotency_header},
        )

    def _compare(self, ctx: RunContext, *, passed: bool) -> tuple[TestOutcome, BaseException | None]:
        recorded = ctx.recorded
        assert recorded is not None
        # A foreign source's recorded side is what it played; a cassette of this plugin was redacted when
        # it was saved. The replayed side is redacted the same way.
        side: PayloadSource = recorded
        twins: Sequence[Document] | RecordedSide
        if self.served_by is not None:
            side = played = self.served_by.recorded_side(ctx)
            twins = recorded_dicts = played.event_dicts()
        else:
            twins = RecordedSide(recorded.events)
            recorded_dicts = twins.dicts
        assert self.redactor is not None  # set when the run began
        kept = frozenset({ctx.settings.idempotency_header})
        replayed = ReplayedHistory(ctx.recorder.events, twins, self.redactor, kept)
        result = compare_run(
            recorded_dicts,
            replayed.compared,
            layers=self._rule_layers(ctx),
            labels=recorded.run.labels,
            payloads=side,
            inputs=providers_of(ctx.settings).inputs,
        )
        self.drift = result
        drift = result if result.has_drift else None

        def outcome(action: Action) -> TestOutcome:
            regressions, expected = len(result.regressions), len(result.expected)
            return self._outcome(action, regressions=regressions, expected=expected, drift=drift)

        # Only regression replays the agent against the recorded world; a model-comparison or sandbox
        # run is an experiment, never a new baseline.
        accepting = self.settings.update and passed and self.plan.test.mode == "regression"
        if accepting and self.served_by is not None:
            # The other tool's recordings stay; this plugin's own cassette is written beside them.
            return self._save(
                self.served_by.converted_run(recorded.run), replayed.views, outcome(Action.UPDATED)
            )
        if not result.has_regressions:
            return outcome(Action.REPLAYED), None
        # Only an update, a kept drift or a re-recording merges: a passing replay never imports it.
        from ..replay.update import merge_for_update

        if accepting:
            events = merge_for_update(recorded_dicts, replayed.views, recorded.run.run_id)
            return self._save(recorded.run, events, outcome(Action.UPDATED))
        if not passed:
            # The test failed on its own (an assertion, an unmatched call): accepting the drift cannot fix
            # that, so the outcome stays "replayed" and the summary does not suggest --agentreplay-update.
            return outcome(Action.REPLAYED), None
        rendered = render_drift(
            result, test=self.plan.nodeid, cassette=str(self.plan.cassette), mode=self.plan.test.mode
        )
        error = DriftError(rendered)
        pending = None
        if self.plan.foreign is None and pending_enabled(self.settings, os.environ):
            events = merge_for_update(recorded_dicts, replayed.views, recorded.run.run_id)
            pending = self._keep_pending(recorded.run, events, rendered, error)
        return outcome(Action.DRIFTED)._replace(pending=pending), error

    def _keep_pending(
        self, run: RunMeta, events: Sequence[RedactedEvent], rendered: str, error: DriftError
    ) -> str | None:
        """Write the test's pending drift (for ``agentreplay review``); one that cannot be written is a note
        on the drift, never another failure."""
        from ..cassette.pending import write_pending  # only a drifting test keeps one

        try:
            path = write_pending(
                self._render(run, events),
                test=self.plan.nodeid,
                mode=self.plan.test.mode,
                drift=rendered,
                rootdir=self.rootdir or self.plan.cassette.parent,
                redact=self.redactor.redact_string if self.redactor is not None else str,
            )
        except AgentReplayError as exc:
            error.add_note(f"agentreplay: the pending drift was not written: {exc.headline}")
            return None
        return str(path)

    def _rule_layers(self, ctx: RunContext) -> RuleLayers:
        return RuleLayers(
            self.plan.test.mode,
            project=self.plan.test.rules,
            marker=self.plan.test.marker_rules,
            hook=self.rules_hook() if self.rules_hook is not None else None,
            extra=mode_rules(ctx) or None,
        )


# After these a test's pending drift is stale: the cassette passed as it is, or was replaced.
_PENDING_STALE = frozenset({Action.REPLAYED, Action.UPDATED, Action.RECORDED})
