"""Diff rules through real pytest sessions: config, marker and hook precedence; invalid rules; the failure
text a developer reads (kept as a snapshot); decision snapshots through syrupy."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).parent / "snapshots"

AGENT = """
from pytest_agentreplay import tool, record_policy, record_retrieval

@tool(name="lookup")
def lookup(q):
    return {"q": q, "hits": 3}

def agent(verdict, scores, reason):
    record_retrieval("parcel", document_ids=["kb-1", "kb-2"], corpus_version="7", scores=scores)
    lookup("parcel")
    record_policy("refund-limit", verdict, version="2", reason=reason)
"""


def project(
    pytester: pytest.Pytester, *, verdict: str, scores: list[float], reason: str, marker: str = ""
) -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_flow=f"""
import pytest
import agentlib

{marker}
def test_flow(agent_replay):
    agentlib.agent({verdict!r}, {scores!r}, {reason!r})
"""
    )


def record(pytester: pytest.Pytester) -> None:
    project(
        pytester, verdict="allow", scores=[0.91, 0.5], reason="under the limit of 100 EUR for this customer"
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)


def test_default_rules_fail_on_a_changed_verdict(pytester: pytest.Pytester) -> None:
    record(pytester)
    project(
        pytester, verdict="deny", scores=[0.91, 0.5], reason="under the limit of 100 EUR for this customer"
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(['*data.verdict: "allow" -> "deny"  [regression, default rule*'])


def test_project_rule_makes_a_difference_expected(pytester: pytest.Pytester) -> None:
    record(pytester)
    pytester.makepyprojecttoml('[tool.agentreplay.rules]\n"policy.decision:data.verdict" = "expected"\n')
    project(
        pytester, verdict="deny", scores=[0.91, 0.5], reason="under the limit of 100 EUR for this customer"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*replayed with expected drift*(0 regression(s), 1 expected)*"])


def test_marker_overrides_project_and_hook_overrides_marker(pytester: pytest.Pytester) -> None:
    record(pytester)
    pytester.makepyprojecttoml('[tool.agentreplay.rules]\n"policy.decision:data.verdict" = "expected"\n')
    marker = '@pytest.mark.agentreplay(rules={"policy.decision:data.verdict": "regression"})'
    project(
        pytester,
        verdict="deny",
        scores=[0.91, 0.5],
        reason="under the limit of 100 EUR for this customer",
        marker=marker,
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[regression, marker rule policy.decision:data.verdict]*"])

    pytester.makeconftest(
        """
def pytest_agentreplay_diff_rules(item, mode):
    assert mode == "regression"
    return [{"event": "policy.decision", "path": "data.verdict", "verdict": "ignore"}]
"""
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_tolerances_epsilon_and_similarity(pytester: pytest.Pytester) -> None:
    record(pytester)
    project(
        pytester, verdict="allow", scores=[0.9105, 0.5], reason="under the limit of 100 EUR for this client"
    )
    pytester.runpytest().assert_outcomes(failed=1)
    pytester.makepyprojecttoml(
        "[tool.agentreplay.rules]\n"
        '"retrieval:data.scores" = { epsilon = 0.001 }\n'
        '"policy.decision:data.reason" = { similarity = 0.8 }\n'
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_regex_normaliser(pytester: pytest.Pytester) -> None:
    record(pytester)
    project(
        pytester, verdict="allow", scores=[0.91, 0.5], reason="under the limit of 250 EUR for this customer"
    )
    pytester.runpytest().assert_outcomes(failed=1)
    pytester.makepyprojecttoml(
        '[tool.agentreplay.rules]\n"policy.decision:data.reason" = { normalize = ["\\\\d+ EUR"] }\n'
    )
    pytester.runpytest().assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("rules", "needle"),
    [
        ('"policy.decision:data.verdict" = "maybe"', "maybe"),
        ('"policy.decision:data.verdict" = { epsilon = "wide" }', "epsilon"),
        ('"policy.decision:data.verdict" = { colour = "red" }', "colour"),
    ],
)
def test_invalid_project_rule_is_named(pytester: pytest.Pytester, rules: str, needle: str) -> None:
    record(pytester)
    pytester.makepyprojecttoml(f"[tool.agentreplay.rules]\n{rules}\n")
    result = pytester.runpytest()
    assert result.ret != 0
    text = result.stdout.str() + result.stderr.str()
    assert needle in text
    assert "policy.decision:data.verdict" in text


def test_invalid_marker_rule_is_named(pytester: pytest.Pytester) -> None:
    record(pytester)
    marker = '@pytest.mark.agentreplay(rules={"policy.decision:data.verdict": "sometimes"})'
    project(
        pytester,
        verdict="allow",
        scores=[0.91, 0.5],
        reason="under the limit of 100 EUR for this customer",
        marker=marker,
    )
    result = pytester.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*sometimes*"])


def _stable(text: str, root: Path) -> str:
    text = text.replace(str(root), "<tmp>")
    return re.sub(r"[0-9a-f]{64}", "<sha256>", text)


def test_failure_text_matches_its_snapshot(pytester: pytest.Pytester) -> None:
    record(pytester)
    project(pytester, verdict="deny", scores=[0.7, 0.5], reason="over the limit: a long reason " * 6)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    # Up to the plugin's summary sections (the guard's notes depend on what this process has loaded).
    end = min(out.index(mark) for mark in ("= agentreplay =", "= agentreplay guard:") if mark in out)
    block = out[out.index("test_flow.py::test_flow: ") : end].rstrip("= \n")
    text = _stable(block, pytester.path) + "\n"
    snapshot = SNAPSHOTS / "drift_failure.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not snapshot.exists():
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(text)
    assert text == snapshot.read_text()


def test_decision_snapshot_through_syrupy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_snap="""
import agentlib

def test_snap(agent_replay, decision_snapshot):
    agentlib.agent(agentlib.VERDICT, [0.9], "r")
    assert agent_replay.decisions() == decision_snapshot
"""
    )
    pytester.makepyfile(agentlib=AGENT + "\nVERDICT = 'allow'\n")
    pytester.runpytest("--agentreplay-record=all", "--snapshot-update").assert_outcomes(passed=1)
    snapshots = list(pytester.path.rglob("__snapshots__/**/*.json"))
    assert len(snapshots) == 1
    content = snapshots[0].read_text()
    assert '"verdict": "allow"' in content and '"ts"' not in content and "run_id" not in content
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makepyfile(agentlib=AGENT + "\nVERDICT = 'deny'\n")
    # Replay drift fails through agentreplay; the snapshot fails too once the cassette is accepted.
    pytester.runpytest("--agentreplay-update").assert_outcomes(failed=1)
    pytester.runpytest("--agentreplay-update", "--snapshot-update").assert_outcomes(passed=1)
    assert '"verdict": "deny"' in snapshots[0].read_text()
