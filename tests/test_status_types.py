"""Statuses, causes and actions as types: every cause the plugin can raise is described, every action a
test's run can end with is one the status decision knows, and a status's wire form (what an xdist worker
sends) is plain JSON values that read back into an equal status, its drift included."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_agentreplay import exceptions
from pytest_agentreplay.core.config import build_settings, resolve_test_settings
from pytest_agentreplay.diff.compare import compare_histories
from pytest_agentreplay.diff.result import DriftResult
from pytest_agentreplay.diff.rules.engine import RuleSet
from pytest_agentreplay.diff.rules.syntax import parse_rules
from pytest_agentreplay.diff.text import ABSENT
from pytest_agentreplay.report.status import (
    CAUSES,
    Action,
    Cause,
    Status,
    TestOutcome,
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
    status = decide(TestOutcome("t.py::t", "c.json", None, "regression"), "failed", cause=cause)
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
    status = decide(run.outcome, "failed", cause=cause_of(exceptions.CassetteNotFoundError("absent")))
    assert (status.status, status.cause) == (Status.FAILED, Cause.MISSING_CASSETTE)


def _drift() -> DriftResult:
    """A drift with a difference of each kind of value: changed, one side absent, carried by several calls,
    judged by a rule with a tolerance and normalizers."""
    recorded = [
        {
            "seq": 1,
            "type": "model.call",
            "data": {"text": "Refund 40 EUR", "score": 0.5, "extra": [1, {"a": None}]},
        },
        {"seq": 2, "type": "tool.call", "data": {"name": "refund", "arguments": {"amount": 40}}},
    ]
    replayed = [
        {"seq": 1, "type": "model.call", "data": {"text": "Refund 400 EUR", "score": 0.9}},
        {"seq": 2, "type": "tool.call", "data": {"name": "refund", "arguments": {"amount": 400}}},
        {"seq": 3, "type": "policy", "data": {"name": "limit", "decision": "allow"}},
    ]
    rules = parse_rules(
        {"model.call:data.score": {"verdict": "expected", "epsilon": 0.1, "normalize": ["x+"]}},
        source="project",
    )
    drift = compare_histories(recorded, replayed, rules=RuleSet.from_layers("regression", project=rules))
    first = replace(drift.differences[0], subject="system prompt", carriers=((1, 1), (5, None)))
    return drift._replace(differences=(first, *drift.differences[1:]))


def test_a_status_travels_as_plain_json_and_reads_back_equal() -> None:
    drift = _drift()
    assert {d.kind for d in drift.differences} >= {"changed", "inserted"}
    assert any(d.recorded is ABSENT for d in drift.differences)
    assert any(d.rule.epsilon is not None for d in drift.differences)
    outcome = TestOutcome(
        "t.py::t", "c.json", Action.DRIFTED, "regression", len(drift.regressions), len(drift.expected), drift
    )
    status = decide(outcome, "failed", message="the run drifted", reruns=1)
    form = status.to_wire()
    assert json.loads(json.dumps(form)) == form
    assert type(form["status"]) is str and form["status"] == "drifted"
    back = TestStatus.from_wire(json.loads(json.dumps(form)))
    assert back == status
    assert back.drift is not None
    for sent, read in zip(drift.differences, back.drift.differences, strict=True):
        # Not compared by a difference's equality, read back all the same.
        assert (read.path_tokens, read.subject, read.carriers) == (
            sent.path_tokens,
            sent.subject,
            sent.carriers,
        )
    # The JSON report's entry is the same status, in the schema's words.
    assert {**form, "drift": status.to_dict()["drift"]} == {**status.to_dict(), "write_failed": False}


def test_a_failed_write_is_told_from_a_test_that_failed_while_recording() -> None:
    outcome = TestOutcome("t.py::t", "c.json", Action.NOT_SAVED, "record")
    write = decide(outcome, "failed", cause=Cause.NOT_SAVED)
    test = decide(outcome, "failed")
    assert (write.status, write.cause, write.write_failed) == (Status.FAILED, Cause.NOT_SAVED, True)
    assert (test.status, test.cause, test.write_failed) == (Status.FAILED, Cause.NOT_SAVED, False)
    assert TestStatus.from_wire(write.to_wire()).write_failed
    assert "write_failed" not in write.to_dict()  # not a field of the JSON report


def test_an_unknown_status_word_is_refused() -> None:
    form = decide(TestOutcome("t.py::t", "c.json", None, "regression"), "passed").to_wire()
    with pytest.raises(ValueError):
        TestStatus.from_wire({**form, "status": "greenish"})
