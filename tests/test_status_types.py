"""Statuses, causes and actions as types: every cause the plugin can raise is described, every action a
test's run can end with is one the status decision knows, and a status's JSON form (what an xdist worker
sends and the JSON report holds) is plain strings that read back into the same status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentreplay import exceptions
from pytest_agentreplay.core.config import build_settings, resolve_test_settings
from pytest_agentreplay.report.status import (
    CAUSES,
    Action,
    Cause,
    Status,
    TestStatus,
    cause_of,
    decide,
)
from pytest_agentreplay.shell.plan import TestPlan, records
from pytest_agentreplay.shell.session import TestRun


def _error_classes() -> list[type[exceptions.AgentReplayError]]:
    found: list[type[exceptions.AgentReplayError]] = []
    pending: list[type[exceptions.AgentReplayError]] = [exceptions.AgentReplayError]
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending.extend(kind.__subclasses__())
    return found


@pytest.mark.parametrize("kind", _error_classes(), ids=lambda k: k.__name__)
def test_every_cause_the_plugin_raises_is_described(kind: type[exceptions.AgentReplayError]) -> None:
    cause = cause_of(kind.__new__(kind))
    assert isinstance(cause, Cause)
    assert CAUSES[cause]


def test_drift_is_a_cause_that_becomes_the_drifted_status() -> None:
    cause = cause_of(exceptions.DriftError("the run drifted"))
    assert cause is Cause.DRIFT and CAUSES[cause]
    status = decide(
        nodeid="t.py::t", cassette="c.json", mode="regression", pytest_outcome="failed", cause=cause
    )
    assert (status.status, status.cause) == (Status.DRIFTED, None)


def test_a_missing_cassette_ends_the_run_with_an_action_the_status_knows(tmp_path: Path) -> None:
    settings = build_settings(rootdir=tmp_path, cli={}, ini={}, project={})
    test = resolve_test_settings(
        settings, nodeid="t.py::t", marker={}, overrides={}, default_cassette=tmp_path / "absent.json"
    )
    plan = TestPlan("t.py::t", test, records(test.record, test.cassette), False)
    run = TestRun(plan, settings, rootdir=tmp_path)
    with pytest.raises(exceptions.CassetteNotFoundError):
        run.begin()
    assert run.outcome is not None and run.outcome.action is Action.MISSING
    status = decide(
        nodeid="t.py::t",
        cassette=run.outcome.cassette,
        mode=run.outcome.mode,
        pytest_outcome="failed",
        action=run.outcome.action,
        cause=cause_of(exceptions.CassetteNotFoundError("absent")),
    )
    assert (status.status, status.cause) == (Status.FAILED, Cause.MISSING_CASSETTE)


def test_a_status_travels_as_plain_json_and_reads_back() -> None:
    status = decide(
        nodeid="t.py::t",
        cassette="c.json",
        mode="regression",
        pytest_outcome="failed",
        cause=Cause.UNMATCHED_CALL,
        message="no recorded call",
        regressions=2,
        reruns=1,
    )
    form = status.to_dict()
    assert json.loads(json.dumps(form)) == form
    assert type(form["status"]) is str and type(form["cause"]) is str
    assert form["status"] == "failed" and form["cause"] == "unmatched-call"
    assert TestStatus.from_mapping(form) == status


def test_an_unknown_status_word_is_refused() -> None:
    with pytest.raises(ValueError):
        TestStatus.from_mapping({"nodeid": "t.py::t", "status": "greenish"})


def test_a_status_dict_without_a_status_still_renders() -> None:
    """Callers of the report functions may pass an outcome dict that names no status (as before)."""
    status = TestStatus.from_mapping({"nodeid": "t.py::t", "action": "replayed"})
    assert status.status is None and status.to_dict()["status"] == ""
