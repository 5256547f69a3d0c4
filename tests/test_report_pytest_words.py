"""The session summary speaks pytest's words with pytest's counts (error, skipped, xfailed, xpassed, rerun),
one verdict per test, the same in the terminal, the JSON, Markdown and HTML reports and JUnit; and its
regression count is the regressions that fail the run: those of a test pytest expected to fail are
counted under their own name, so a green run reports 0 regressions."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("pytest_rerunfailures")

XDIST = [[], ["-n", "2"]]
# pytest-randomly reseeds `random` per test, which the runtime values report as an expected difference.
QUIET = ["-p", "no:cacheprovider", "-p", "no:randomly"]

OUTCOMES = """
import os
from pathlib import Path

import pytest
from pytest_agentreplay import record_policy

REPLAY = os.environ.get("PHASE") == "replay"

@pytest.fixture
def service():
    if REPLAY:
        raise RuntimeError("the service fixture cannot start")

@pytest.mark.agentreplay
def test_fine():
    record_policy("refund-limit", "allow")

@pytest.mark.agentreplay
@pytest.mark.xfail(REPLAY, reason="the new limit is not released yet", strict=True)
def test_xfailed_drift():
    record_policy("refund-limit", "deny" if REPLAY else "allow")

@pytest.mark.agentreplay
@pytest.mark.xfail(REPLAY, reason="was flaky")
def test_xpassed():
    record_policy("refund-limit", "allow")

@pytest.mark.agentreplay
@pytest.mark.skipif(REPLAY, reason="not today")
def test_skipped():
    record_policy("refund-limit", "allow")

@pytest.mark.agentreplay
def test_setup_error(service):
    record_policy("refund-limit", "allow")

@pytest.mark.agentreplay
@pytest.mark.flaky(reruns=1)
def test_flaky():
    record_policy("refund-limit", "allow")
    marker = Path(os.environ["FLAKY_MARK"])
    if REPLAY and not marker.exists():
        marker.write_text("failed once")
        raise AssertionError("first attempt fails")
"""

VERDICTS = {
    "test_fine": "replayed",
    "test_xfailed_drift": "xfailed",
    "test_xpassed": "xpassed",
    "test_skipped": "skipped",
    "test_setup_error": "error",
    "test_flaky": "replayed",
}


@pytest.mark.parametrize("xdist", XDIST, ids=["plain", "xdist"])
def test_every_outcome_has_pytests_word_and_count_in_every_view(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    marker = pytester.path / "flaky.mark"
    monkeypatch.setenv("FLAKY_MARK", str(marker))
    pytester.makepyfile(test_outcomes=OUTCOMES)
    pytester.runpytest("--agentreplay-record=all", *QUIET).assert_outcomes(passed=6)
    monkeypatch.setenv("PHASE", "replay")
    result = pytester.runpytest(*xdist, "--agentreplay-report=r.json", "--junitxml=junit.xml", *QUIET)
    # parseoutcomes spells pytest's "1 error" as "errors".
    pytest_counts = {("error" if k == "errors" else k): v for k, v in result.parseoutcomes().items()}
    assert pytest_counts == {"passed": 2, "xfailed": 1, "xpassed": 1, "skipped": 1, "error": 1, "rerun": 1}
    assert "2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error, 1 rerun" in result.stdout.lines[-1]

    # Terminal: pytest's words, pytest's counts; the xfailed test's regression is not a failing one.
    text = result.stdout.str()
    assert (
        "2 replayed, 0 recorded, 0 drifted, 0 failed, 0 updated, 0 audited, "
        "1 error, 1 skipped, 1 xfailed, 1 xpassed, 1 rerun, 0 unused"
    ) in text
    assert "differences: 0 regressions, 0 expected differences, 1 regression in xfailed tests" in text
    assert re.search(r"error \(setup: [^)]*\): test_outcomes.py::test_setup_error ", text), text
    assert "xfailed: test_outcomes.py::test_xfailed_drift (1 regression(s), 0 expected)" in text

    # JSON: one entry per test (the rerun attempt is not a second one), the same counts.
    doc = json.loads((pytester.path / "r.json").read_text())
    got = {t["nodeid"].split("::")[1]: t["status"] for t in doc["tests"]}
    assert got == VERDICTS
    summary = doc["summary"]
    for word, count in pytest_counts.items():
        if word != "passed":
            assert summary[word] == count, word
    assert summary["replayed"] == pytest_counts["passed"] and summary["tests"] == 6
    assert (summary["regressions"], summary["regressions_xfailed"], summary["expected_differences"]) == (
        0,
        1,
        0,
    )
    flaky = next(t for t in doc["tests"] if t["nodeid"].endswith("test_flaky"))
    assert flaky["reruns"] == 1

    # Markdown and HTML: the same words and numbers.
    for suffix in ("md", "html"):
        marker.unlink()
        pytester.runpytest(*xdist, f"--agentreplay-report=r.{suffix}", *QUIET)
    md = (pytester.path / "r.md").read_text()
    headline = md.splitlines()[2]
    assert headline.startswith("❌"), headline  # the setup error is red, as in pytest
    assert "**1 error** · 1 skipped · 1 xfailed · 1 xpassed · 1 rerun" in headline
    assert headline.endswith("0 regressions, 0 expected differences, 1 regression in xfailed tests")
    html = (pytester.path / "r.html").read_text()
    for word in ("1 error", "1 skipped", "1 xfailed", "1 xpassed", "1 rerun"):
        assert f">{word}</span>" in html, word
    assert "0 regressions, 0 expected differences, 1 regression in xfailed tests" in html

    # JUnit: the same verdict per test.
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    for name, status in VERDICTS.items():
        props = {p.get("name"): p.get("value") for p in cases[name].iter("property")}
        assert props["agentreplay.status"] == status, name
    flaky_props = {p.get("name"): p.get("value") for p in cases["test_flaky"].iter("property")}
    assert flaky_props["agentreplay.reruns"] == "1"
