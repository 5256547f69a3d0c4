"""One status per test, decided once from the plugin's outcome and pytest's own verdict, which every view
renders: a test pytest reports failed can never look green anywhere. Where the verdict is pytest's own
(``error``, ``skipped``, ``xfailed``, ``xpassed``) it is pytest's word, so the counts match pytest's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from .. import exceptions as e
from ..core.documents import Document

if TYPE_CHECKING:
    from ..diff.result import DriftResult

    class RunFailures(Protocol):
        """What a status message is taken from: a test's run (``session.TestRun``)."""

        @property
        def setup_error(self) -> BaseException | None: ...

        @property
        def failures(self) -> Sequence[BaseException]: ...

        @property
        def error(self) -> BaseException | None: ...


class Status(StrEnum):
    """The one status of a test (``report/schema.json`` lists the same values)."""

    RECORDED = "recorded"
    REPLAYED = "replayed"
    DRIFTED = "drifted"
    FAILED = "failed"
    ERROR = "error"
    UPDATED = "updated"
    AUDITED = "audited"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"


class Action(StrEnum):
    """What the plugin did with a test's cassette (``TestOutcome.action``)."""

    RECORDED = "recorded"
    REPLAYED = "replayed"
    DRIFTED = "drifted"
    UPDATED = "updated"
    AUDITED = "audited"
    NOT_SAVED = "not-saved"
    # The cassette did not exist (or lay above the rootdir): the run never started.
    MISSING = "missing"


class Cause(StrEnum):
    """Why the plugin failed a test (``drift`` becomes the ``drifted`` status in :func:`decide`)."""

    TEST = "test"
    NOT_SAVED = "not-saved"
    UNMATCHED_CALL = "unmatched-call"
    TOOL_WITHOUT_RESULT = "tool-without-result"
    NETWORK_BLOCKED = "network-blocked"
    MISSING_CASSETTE = "missing-cassette"
    CASSETTE_ELSEWHERE = "cassette-elsewhere"
    CORRUPTED_CASSETTE = "corrupted-cassette"
    WRONG_TEST = "wrong-test"
    SANDBOX_CHECK = "sandbox-check"
    AUDIT = "audit"
    REPLAY_ERROR = "replay-error"
    CONFIG = "config"
    SETUP = "setup"
    TEARDOWN = "teardown"
    DRIFT = "drift"


STATUSES: Final = tuple(Status)
# The longest one-line status message taken from an error or a traceback.
LINE_LIMIT: Final = 300
# The statuses that mean the gate is red.
RED: Final = (Status.DRIFTED, Status.FAILED, Status.ERROR)
# What the plugin did that is, when pytest passed, the test's status as it is.
_ACTION_STATUS: Final = {
    a: Status(a.value) for a in (Action.RECORDED, Action.REPLAYED, Action.UPDATED, Action.AUDITED)
}

CAUSES: Final[dict[Cause, str]] = {
    Cause.TEST: "the test itself failed: an assertion or an error in the test or the agent",
    Cause.NOT_SAVED: "the cassette was not saved: writing it failed (disk full, no permission), or the test "
    "failed while recording",
    Cause.UNMATCHED_CALL: "a live call has no recorded counterpart",
    Cause.TOOL_WITHOUT_RESULT: "a tool call has no recorded result",
    Cause.NETWORK_BLOCKED: "an outbound connection was refused by the network guard, or stopped by the "
    "session's network namespace under --agentreplay-isolate",
    Cause.MISSING_CASSETTE: "the cassette does not exist",
    Cause.CASSETTE_ELSEWHERE: "the test's cassette is under a directory above pytest's rootdir",
    Cause.CORRUPTED_CASSETTE: "the cassette cannot be read or failed its integrity checks",
    Cause.WRONG_TEST: "the cassette was recorded for another test",
    Cause.SANDBOX_CHECK: "a sandbox check failed: idempotency, a duplicate write or fault handling",
    Cause.AUDIT: "the audit found problems in the recorded run",
    Cause.REPLAY_ERROR: "replay could not proceed",
    Cause.CONFIG: "invalid agentreplay configuration",
    Cause.SETUP: "the test's setup failed",
    Cause.TEARDOWN: "the test's teardown failed",
    Cause.DRIFT: "the replayed run drifted from the recording",
}

# Most specific first: the first class the exception is an instance of names its cause.
_CAUSE_BY_ERROR: Final[tuple[tuple[type[e.AgentReplayError], Cause], ...]] = (
    (e.CassetteNotSavedError, Cause.NOT_SAVED),
    (e.WrongTestCassetteError, Cause.WRONG_TEST),
    (e.CassetteElsewhereError, Cause.CASSETTE_ELSEWHERE),
    (e.CassetteNotFoundError, Cause.MISSING_CASSETTE),
    (e.AuditProblemsError, Cause.AUDIT),
    (e.CassetteError, Cause.CORRUPTED_CASSETTE),
    (e.NetworkBlockedError, Cause.NETWORK_BLOCKED),
    (e.ToolNotRecordedError, Cause.TOOL_WITHOUT_RESULT),
    (e.UnmatchedRequestError, Cause.UNMATCHED_CALL),
    (e.SandboxCheckError, Cause.SANDBOX_CHECK),
    (e.ConfigError, Cause.CONFIG),
    (e.DriftError, Cause.DRIFT),
    (e.AgentReplayError, Cause.REPLAY_ERROR),
)


# The fields JUnit's properties show, in their order.
_JUNIT_FIELDS: Final = ("status", "cause", "cassette", "mode", "regressions", "expected", "reruns", "pending")


class Rerecorded(NamedTuple):
    """Where a test re-recorded from its first drift (``--agentreplay-record=drifted``) turned live."""

    at: int  # the seq of the first live event
    what: str  # the call it turned live at: ``model.call gpt-4o-mini``
    kept: int  # events kept from the cassette (the prefix, unchanged)
    live: int  # events recorded live from ``at`` on
    calls_kept: int  # calls served from the cassette before the drift
    calls_sent: int  # calls sent live from the drift on

    def line(self) -> str:
        return f"drifted at seq {self.at} ({self.what}): {self.kept} events kept, {self.live} recorded live"


# NamedTuples, not frozen dataclasses: as immutable, and far cheaper to create at start-up.
class TestOutcome(NamedTuple):
    """What happened to one test's cassette (``shell.session.TestRun``); ``action`` None: the run never
    finished (or never began)."""

    nodeid: str
    cassette: str
    action: Action | None
    mode: str
    regressions: int = 0
    expected: int = 0
    drift: DriftResult | None = None
    rerecorded: Rerecorded | None = None
    pending: str | None = None


class TestStatus(NamedTuple):
    """The status of one test, as every report shows it."""

    nodeid: str
    cassette: str
    status: Status
    mode: str
    cause: Cause | None = None
    message: str | None = None
    regressions: int = 0
    expected: int = 0
    drift: DriftResult | None = None
    reruns: int = 0
    # A ``not-saved`` test whose cassette could not be written (False: the test failed while recording).
    write_failed: bool = False
    # Re-recorded from its first drift: where, and how much was kept.
    rerecorded: Rerecorded | None = None
    # The pending file a drifting test wrote beside its cassette (``agentreplay review`` reads it).
    pending: str | None = None

    @property
    def red(self) -> bool:
        return self.status in RED

    def label(self, *, why: bool = False) -> str:
        """``failed (unmatched-call)`` (``why``: with the cause's meaning), or the status alone."""
        cause = self.cause
        if self.status not in (Status.FAILED, Status.ERROR) or not cause:
            return self.status.value
        return f"{self.status} ({cause}: {CAUSES[cause]})" if why else f"{self.status} ({cause})"

    def junit_properties(self) -> list[tuple[str, str]]:
        """``[("agentreplay.status", ...), ...]``, which pytest's junitxml writes for the test."""
        message = self.message
        if message is not None:
            from ..redaction import default_redactor  # heavy: ~20 ms, paid once a test has a status

            # The whole failure message the terminal showed (XML keeps its line breaks as &#10;), as a
            # cassette would store it: the XML is a file like the reports.
            message = default_redactor().redact_string(message)
        values = {name: getattr(self, name) for name in _JUNIT_FIELDS} | {"reruns": self.reruns or None}
        values["message"] = message
        return [(f"agentreplay.{name}", str(value)) for name, value in values.items() if value is not None]

    def to_dict(self) -> Document:
        """The test's entry in the JSON report (``report/schema.json``): plain strings, in its order."""
        return {
            "nodeid": self.nodeid,
            "cassette": self.cassette,
            "status": self.status.value,
            "cause": None if self.cause is None else self.cause.value,
            "message": self.message,
            "mode": self.mode,
            "regressions": self.regressions,
            "expected": self.expected,
            "drift": None if self.drift is None else self.drift.to_dict(),
            "reruns": self.reruns,
            # Only when there is one: reports of sessions without them read as before.
            **({"rerecorded": self.rerecorded._asdict()} if self.rerecorded is not None else {}),
            **({"pending": self.pending} if self.pending is not None else {}),
        }

    def to_wire(self) -> Document:
        """What an xdist worker sends the controller: the report's entry with the whole drift and
        ``write_failed``, which :meth:`from_wire` reads back as an equal status."""
        drift = None if self.drift is None else self.drift.to_dict(wire=True)
        return self.to_dict() | {"drift": drift, "write_failed": self.write_failed}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> TestStatus:
        """The status :meth:`to_wire` sent. Raises ``ValueError`` on a status or cause no report knows."""
        drift, cause, rerecorded = data["drift"], data["cause"], data.get("rerecorded")
        if drift is not None:
            from ..diff.result import DriftResult  # heavy: the diff package, only for a test that drifted

            drift = DriftResult.from_dict(drift)
        return cls(
            **{
                **data,
                "status": Status(data["status"]),
                "cause": None if cause is None else Cause(cause),
                "drift": drift,
                "rerecorded": None if rerecorded is None else Rerecorded(**rerecorded),
            }
        )


# Classes named Test*, not tests (a NamedTuple's body may not say so).
TestOutcome.__test__ = TestStatus.__test__ = False  # type: ignore[attr-defined]


def cause_of(exc: BaseException | None) -> Cause:
    """The cause for an exception raised by the plugin (``test`` for anything else, and for None)."""
    for kind, cause in _CAUSE_BY_ERROR:
        if isinstance(exc, kind):
            return cause
    return Cause.TEST


def decide(
    outcome: TestOutcome,
    pytest_outcome: str,
    *,
    phase: str = "call",
    cause: Cause | None = None,
    message: str | None = None,
    xfail: bool = False,
    reruns: int = 0,
) -> TestStatus:
    """The status of one test. ``pytest_outcome``: pytest's worst outcome over the phases, from ``phase``;
    ``outcome``: what the plugin did with the cassette; ``reruns``: earlier attempts pytest-rerunfailures
    ran again."""
    action = outcome.action
    status: Status
    write_failed = False
    if pytest_outcome == "skipped":
        status, cause = (Status.XFAILED if xfail else Status.SKIPPED), None
    elif pytest_outcome == "failed":
        if cause == Cause.DRIFT or (cause is None and action == Action.DRIFTED):
            status, cause = Status.DRIFTED, None
        else:
            # pytest calls a failure outside the test body an error, and counts it as one.
            status = Status.ERROR if phase in ("setup", "teardown") else Status.FAILED
            if action == Action.NOT_SAVED or cause == Cause.NOT_SAVED:
                # The plugin failed the test with a failed write; without it the test failed while recording.
                write_failed, cause = cause == Cause.NOT_SAVED, Cause.NOT_SAVED
            elif cause is None:
                cause = {"setup": Cause.SETUP, "teardown": Cause.TEARDOWN}.get(phase, Cause.TEST)
    elif xfail:
        # Passed although marked xfail (not strict: a strict one is reported failed).
        status, cause = Status.XPASSED, None
    elif action in _ACTION_STATUS:
        status, cause = _ACTION_STATUS[action], None
    elif action == Action.DRIFTED:
        # Drift the plugin found but pytest did not fail on cannot happen through the plugin; keep it red.
        status, cause = Status.DRIFTED, None
    else:
        # pytest passed but the plugin never finished the run (e.g. a setup it could not complete).
        status, cause = Status.FAILED, cause or Cause.REPLAY_ERROR
    # A failed re-recording kept nothing: the cassette stands as it was.
    return TestStatus(
        nodeid=outcome.nodeid,
        cassette=outcome.cassette,
        status=status,
        mode=outcome.mode,
        cause=cause,
        message=message,
        regressions=outcome.regressions,
        expected=outcome.expected,
        drift=outcome.drift,
        reruns=reruns,
        write_failed=write_failed,
        rerecorded=outcome.rerecorded if status == Status.RECORDED else None,
        pending=outcome.pending,
    )


def status_message(shown: str | None, test_run: RunFailures | None, longrepr: str | None) -> str | None:
    """The message a test's status carries into every report and JUnit: for a failure the plugin raised
    (``shown``, else the run's first), the whole text the terminal showed, never one line of it; else the
    last line of pytest's ``longrepr``."""
    if shown is not None:
        return shown
    # The first failure of the run: setup, a refusal, or what ended the body.
    failure = None
    if test_run is not None:
        failure = test_run.setup_error or (test_run.failures[0] if test_run.failures else test_run.error)
    if isinstance(failure, e.AgentReplayError):
        return str(failure)
    if failure is not None:  # its first line
        text = getattr(failure, "headline", None) or str(failure) or type(failure).__name__
        return str(text).splitlines()[0][:LINE_LIMIT]
    # The test's own failure: its traceback belongs to pytest's report; its last line says what failed.
    last = (longrepr or "").strip().splitlines()[-1:]
    return last[0][:LINE_LIMIT] if last else None
