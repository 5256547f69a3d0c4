"""One status per test, decided once, from the plugin's outcome and pytest's own verdict.

Every view (terminal summary, Markdown, JSON, HTML, JUnit) renders the dict :func:`decide` returns, so a
test pytest reports failed can never look green anywhere. No pytest import: the caller passes plain facts.

A status is one of :data:`STATUSES`; a ``failed`` (or ``error``) status carries a :data:`CAUSES` key saying
why. Where the verdict is pytest's own (``error``, ``skipped``, ``xfailed``, ``xpassed``) it is pytest's word
for it, so the summary's counts are the ones pytest prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STATUSES = (
    "recorded",
    "replayed",
    "drifted",
    "failed",
    "error",
    "updated",
    "audited",
    "skipped",
    "xfailed",
    "xpassed",
)
# The statuses that mean the gate is red.
RED = ("drifted", "failed", "error")

CAUSES: dict[str, str] = {
    "test": "the test itself failed: an assertion or an error in the test or the agent",
    "not-saved": "the cassette was not saved: writing it failed (disk full, no permission), or the test "
    "failed while recording",
    "unmatched-call": "a live call has no recorded counterpart",
    "tool-without-result": "a tool call has no recorded result",
    "network-blocked": "an outbound connection was refused by the network guard",
    "missing-cassette": "the cassette does not exist",
    "cassette-elsewhere": "the test's cassette is under a directory above pytest's rootdir",
    "corrupted-cassette": "the cassette cannot be read or failed its integrity checks",
    "wrong-test": "the cassette was recorded for another test",
    "sandbox-check": "a sandbox check failed: idempotency, a duplicate write or fault handling",
    "audit": "the audit found problems in the recorded run",
    "replay-error": "replay could not proceed",
    "config": "invalid agentreplay configuration",
    "setup": "the test's setup failed",
    "teardown": "the test's teardown failed",
}


def cause_of(exc: BaseException | None) -> str:
    """The cause key for an exception raised by the plugin (or ``test`` for anything else)."""
    if exc is None:
        return "test"
    from .. import exceptions as e

    for kind, cause in (
        (e.CassetteNotSavedError, "not-saved"),
        (e.WrongTestCassetteError, "wrong-test"),
        (e.CassetteElsewhereError, "cassette-elsewhere"),
        (e.CassetteNotFoundError, "missing-cassette"),
        (e.AuditProblemsError, "audit"),
        (e.CassetteError, "corrupted-cassette"),
        (e.NetworkBlockedError, "network-blocked"),
        (e.ToolNotRecordedError, "tool-without-result"),
        (e.UnmatchedRequestError, "unmatched-call"),
        (e.SandboxCheckError, "sandbox-check"),
        (e.ConfigError, "config"),
        (e.DriftError, "drift"),
        (e.AgentReplayError, "replay-error"),
    ):
        if isinstance(exc, kind):
            return cause
    return "test"


def decide(
    *,
    nodeid: str,
    cassette: str,
    mode: str,
    pytest_outcome: str,
    phase: str = "call",
    action: str | None = None,
    cause: str | None = None,
    message: str | None = None,
    regressions: int = 0,
    expected: int = 0,
    drift: Mapping[str, Any] | None = None,
    xfail: bool = False,
    reruns: int = 0,
) -> dict[str, Any]:
    """The status dict of one test.

    ``pytest_outcome`` is pytest's worst outcome over setup, call and teardown (``passed``, ``failed``,
    ``skipped``) and ``phase`` the phase it came from; ``action`` is what the plugin did with the cassette
    (``recorded``, ``replayed``, ``drifted``, ``updated``, ``audited``, ``not-saved``, ``missing``, or None
    when the run never finished); ``cause`` the cause key of the failure the plugin saw, if any; ``xfail``
    whether pytest judged the outcome against an xfail mark; ``reruns`` how many earlier attempts
    pytest-rerunfailures ran again before this one.
    """
    status: str
    if pytest_outcome == "skipped":
        status, cause = ("xfailed" if xfail else "skipped"), None
    elif pytest_outcome == "failed":
        if cause == "drift" or (cause is None and action == "drifted"):
            status, cause = "drifted", None
        else:
            # pytest calls a failure outside the test body an error, and counts it as one.
            status = "error" if phase in ("setup", "teardown") else "failed"
            if action == "not-saved":
                cause = "not-saved"
            elif cause is None or cause == "drift":
                cause = {"setup": "setup", "teardown": "teardown"}.get(phase, "test")
    elif xfail:
        # Passed although marked xfail (not strict: a strict one is reported failed).
        status, cause = "xpassed", None
    elif action in ("recorded", "replayed", "updated", "audited"):
        status, cause = action, None
    elif action == "drifted":
        # Drift the plugin found but pytest did not fail on cannot happen through the plugin; keep it red.
        status, cause = "drifted", None
    else:
        # pytest passed but the plugin never finished the run (e.g. a setup it could not complete).
        status, cause = "failed", cause or "replay-error"
    return {
        "nodeid": nodeid,
        "cassette": cassette,
        "status": status,
        "cause": cause,
        "message": message,
        "mode": mode,
        "regressions": int(regressions),
        "expected": int(expected),
        "drift": dict(drift) if drift is not None else None,
        "reruns": int(reruns),
    }


def write_failed(status: Mapping[str, Any]) -> bool:
    """A ``not-saved`` test whose cassette could not be written (not one that failed while recording)."""
    from ..exceptions import CassetteNotSavedError

    return status.get("cause") == "not-saved" and CassetteNotSavedError.MARK in str(
        status.get("message") or ""
    )


def is_red(status: Mapping[str, Any]) -> bool:
    return str(status.get("status")) in RED


def headline_of(exc: BaseException) -> str:
    """The first line of an error, for a one-line report cell."""
    text = getattr(exc, "headline", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0][:300]
