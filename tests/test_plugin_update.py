"""Accepting drift with --agentreplay-update, and cassettes no test uses any more."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

AGENT = """
from pytest_agentreplay import tool, record_policy, record_state

@tool(name="lookup")
def lookup(q):
    return {"q": q, "hits": 3}

def agent(verdict):
    lookup("parcel")
    record_policy("refund-limit", verdict, version="2")
    record_state({"verdict": verdict})
"""

TESTS = """
import agentlib

def test_a(agent_replay):
    agentlib.agent(agentlib.VERDICT)

def test_b(agent_replay):
    agentlib.lookup("parcel")
"""


def setup_project(pytester: pytest.Pytester, verdict: str) -> None:
    pytester.makepyfile(agentlib=AGENT + f"\nVERDICT = {verdict!r}\n")
    pytester.makepyfile(test_flow=TESTS)


def cassette(pytester: pytest.Pytester, name: str) -> Path:
    return pytester.path / "cassettes" / "test_flow" / f"{name}.json"


def test_drift_then_update_then_pass(pytester: pytest.Pytester) -> None:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    before_a = cassette(pytester, "test_a").read_text()
    before_b = cassette(pytester, "test_b").read_bytes()

    setup_project(pytester, "deny")
    drift = pytester.runpytest()
    drift.assert_outcomes(passed=1, failed=1)
    drift.stdout.fnmatch_lines(
        [
            "*test_flow.py::test_a: 2 regressions*",
            '*data.verdict: "allow" -> "deny"*',
            "*pytest --agentreplay-update*",
        ]
    )

    update = pytester.runpytest("--agentreplay-update")
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines(["*1 updated*", "*updated: test_flow.py::test_a*"])
    assert cassette(pytester, "test_b").read_bytes() == before_b, "a cassette without drift is not rewritten"

    after_a = cassette(pytester, "test_a").read_text()
    changed = [
        (old, new) for old, new in zip(before_a.splitlines(), after_a.splitlines(), strict=True) if old != new
    ]
    # Only the verdict, the state hash it changes, their events' digest lines and head_hash differ.
    digest_line = re.compile(r'\s*"[0-9a-f]{64}",?')
    assert all(
        any(key in old for key in ('"verdict"', '"state_hash"', '"head_hash"')) or digest_line.fullmatch(old)
        for old, _ in changed
    ), changed
    assert sum(bool(digest_line.fullmatch(old)) for old, _ in changed) == 2  # the two changed events
    assert sum('"verdict"' in old for old, _ in changed) == 1
    assert json.loads(after_a)["events"][3]["data"]["verdict"] == "deny"

    pytester.runpytest().assert_outcomes(passed=2)


def test_unused_cassettes_fail_the_session_and_update_removes_them(pytester: pytest.Pytester) -> None:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    stale = cassette(pytester, "test_gone")
    stale.write_bytes(cassette(pytester, "test_b").read_bytes())

    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 unused*", f"*unused: {stale}*"])

    # Deselecting a test never makes its cassette look unused.
    deselect = pytester.runpytest("-k", "test_a")
    deselect.stdout.fnmatch_lines(["*unused: *test_gone.json*"])
    assert "test_b.json" not in "\n".join(line for line in deselect.outlines if "unused:" in line)

    relaxed = pytester.runpytest("-o", "agentreplay_fail_on_unused=false")
    assert relaxed.ret == pytest.ExitCode.OK

    # Updating one test by node id judges nothing else: its module was only partly collected.
    single = pytester.runpytest("--agentreplay-update", "test_flow.py::test_a")
    assert single.ret == pytest.ExitCode.OK
    assert stale.exists() and cassette(pytester, "test_b").exists()

    removed = pytester.runpytest("--agentreplay-update")
    assert removed.ret == pytest.ExitCode.OK
    removed.stdout.fnmatch_lines([f"*removed unused cassette: {stale}*"])
    assert not stale.exists()
    assert cassette(pytester, "test_a").exists() and cassette(pytester, "test_b").exists()
    assert pytester.runpytest().ret == pytest.ExitCode.OK


def test_a_json_file_that_is_not_a_cassette_is_never_unused_and_survives_update(
    pytester: pytest.Pytester,
) -> None:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    golden = cassette(pytester, "test_a").parent / "expected_output.json"
    golden.write_text('{"expected": "answer"}')
    vcr_json = cassette(pytester, "test_a").parent / "test_old_vcr.json"
    vcr_json.write_text('{"interactions": [], "version": 1}')
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the stale vcr cassette is unused
    assert "expected_output.json" not in result.stdout.str()
    updated = pytester.runpytest("--agentreplay-update")
    assert updated.ret == pytest.ExitCode.OK
    updated.stdout.fnmatch_lines(
        [f"*removed unused cassette: {vcr_json}*", f"*kept (not a cassette): {golden}*"]
    )
    assert golden.read_text() == '{"expected": "answer"}'
    assert not vcr_json.exists()
    assert pytester.runpytest().ret == pytest.ExitCode.OK


def test_a_failing_session_never_removes_cassettes(pytester: pytest.Pytester) -> None:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    stale = cassette(pytester, "test_gone")
    stale.write_bytes(cassette(pytester, "test_b").read_bytes())
    pytester.makepyfile(test_broken="def test_broken():\n    assert False\n")
    result = pytester.runpytest("--agentreplay-update")
    result.assert_outcomes(passed=2, failed=1)
    assert stale.exists()


def test_unused_detection_under_xdist(pytester: pytest.Pytester) -> None:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    stale = cassette(pytester, "test_gone")
    stale.write_bytes(cassette(pytester, "test_b").read_bytes())
    result = pytester.runpytest_subprocess("-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*unused: *test_gone.json*"])
    pytester.runpytest_subprocess("-n", "2", "--agentreplay-update")
    assert not stale.exists()
