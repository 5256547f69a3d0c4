"""Pending drift and ``agentreplay review`` / ``accept`` / ``reject``: drifting tests keep what an update
would write beside their cassettes, and a person goes through them one key at a time in a real terminal
(a pseudo-terminal driven by pexpect), or decides without asking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

AGENT = """
from pytest_agentreplay import tool, record_policy, record_state

@tool(name="lookup")
def lookup(q):
    return {"q": q, "hits": 3}

def agent(name, verdict):
    lookup(name)
    record_policy("refund-limit", verdict, version="2")
    record_state({"verdict": verdict})
"""

TESTS = """
import agentlib

def test_a(agent_replay):
    agentlib.agent("a", agentlib.VERDICT)

def test_b(agent_replay):
    agentlib.agent("b", agentlib.VERDICT)

def test_c(agent_replay):
    agentlib.agent("c", agentlib.VERDICT)
"""


def setup_project(pytester: pytest.Pytester, verdict: str) -> None:
    pytester.makepyfile(agentlib=AGENT + f"\nVERDICT = {verdict!r}\n")
    pytester.makepyfile(test_flow=TESTS)


def folder(pytester: pytest.Pytester) -> Path:
    return pytester.path / "cassettes" / "test_flow"


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def restore(root: Path, saved: dict[str, bytes]) -> None:
    for path in [p for p in root.rglob("*") if p.is_file()]:
        if str(path.relative_to(root)) not in saved:
            path.unlink()
    for name, data in saved.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentreplay.cli", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture
def drifted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    setup_project(pytester, "allow")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=3)
    setup_project(pytester, "deny")
    return pytester


def test_three_drifts_in_ci_reviewed_one_key_each(
    drifted: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = drifted.path
    recorded = files(root / "cassettes")
    # What --agentreplay-update writes for test_a, then the drifted state back.
    drifted.runpytest("--agentreplay-update", "-k", "test_a").assert_outcomes(passed=1)
    updated_a = (folder(drifted) / "test_a.json").read_bytes()
    assert updated_a != recorded["test_flow/test_a.json"]
    restore(root / "cassettes", recorded)

    monkeypatch.setenv("CI", "true")
    report = root / "report.json"
    result = drifted.runpytest("-n", "2", "--agentreplay-pending", f"--agentreplay-report={report}")
    result.assert_outcomes(failed=3)
    pending = sorted(p.name for p in folder(drifted).glob("*.pending.json"))
    assert pending == ["test_a.pending.json", "test_b.pending.json", "test_c.pending.json"]
    result.stdout.fnmatch_lines(
        ["*pending: *test_a.pending.json*", "*agentreplay review  # go through the 3 pending drifts*"]
    )
    tests = {t["nodeid"]: t for t in json.loads(report.read_text())["tests"]}
    assert tests["test_flow.py::test_b"]["pending"].endswith("test_b.pending.json")
    before = files(root / "cassettes")

    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "pytest_agentreplay.cli", "review"],
        cwd=str(root),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    for key in "ars":
        child.expect(r"a accept · r reject · s skip · q quit")
        child.send(key)  # one key, no Enter
    child.expect("1 accepted, 1 rejected, 1 skipped")
    child.expect(pexpect.EOF)
    child.close()
    transcript = child.before or ""
    assert child.exitstatus == 0, transcript

    assert (folder(drifted) / "test_a.json").read_bytes() == updated_a
    assert not (folder(drifted) / "test_a.pending.json").exists()
    assert (folder(drifted) / "test_b.json").read_bytes() == before["test_flow/test_b.json"]
    assert not (folder(drifted) / "test_b.pending.json").exists()
    assert (folder(drifted) / "test_c.pending.json").exists()
    assert (folder(drifted) / "test_c.json").read_bytes() == before["test_flow/test_c.json"]
    # The accepted test now replays; the others still drift.
    drifted.runpytest().assert_outcomes(passed=1, failed=2)


def test_review_shows_the_drift_and_the_lines_accepting_changes(drifted: pytest.Pytester) -> None:
    drifted.runpytest("-k", "test_b").assert_outcomes(failed=1)
    env = {**os.environ, "TERM": "xterm"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "pytest_agentreplay.cli", "review", "-k", "test_b"],
        cwd=str(drifted.path),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    child.expect(r"\[1/1\] test_flow.py::test_b")
    child.expect('"allow" -> "deny"')  # the drift as the failure showed it
    child.expect(r"accepting changes cassettes/test_flow/test_b.json")
    child.expect(r'\+.*"deny"')  # the cassette line accepting writes
    child.send("q")
    child.expect("0 accepted, 0 rejected, 0 skipped")
    child.expect(pexpect.EOF)
    assert (folder(drifted) / "test_b.pending.json").exists()


def test_a_pending_file_whose_cassette_was_re_recorded_is_refused(drifted: pytest.Pytester) -> None:
    drifted.runpytest("-k", "test_a").assert_outcomes(failed=1)
    pending = folder(drifted) / "test_a.pending.json"
    assert pending.exists()
    # Re-recorded since: the drift was found against another recording.
    drifted.runpytest("--agentreplay-record=all", "-k", "test_a").assert_outcomes(passed=1)
    assert not pending.exists(), "recording again removes the stale pending file"
    drifted.runpytest("-k", "test_b").assert_outcomes(failed=1)
    stale = folder(drifted) / "test_b.pending.json"
    cassette = folder(drifted) / "test_b.json"
    cassette.write_text(cassette.read_text().replace('"allow"', '"maybe"'))
    result = cli("accept", str(stale), cwd=drifted.path)
    assert result.returncode == 1, result
    assert "test_b.pending.json is stale" in result.stderr
    assert str(stale) in result.stderr and str(cassette) in result.stderr
    assert stale.exists() and '"maybe"' in cassette.read_text()


def test_accept_and_reject_without_asking_and_a_passing_replay_drops_a_stale_file(
    drifted: pytest.Pytester,
) -> None:
    drifted.runpytest().assert_outcomes(failed=3)
    rejected = cli("reject", str(folder(drifted) / "test_c.json"), cwd=drifted.path)
    assert rejected.returncode == 0 and "rejected: test_flow.py::test_c" in rejected.stdout
    accepted = cli("accept", "--all", "-k", "test_a or test_b", cwd=drifted.path)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.count("accepted: ") == 2
    assert not list(folder(drifted).glob("*.pending.json"))
    drifted.runpytest().assert_outcomes(passed=2, failed=1)
    assert (folder(drifted) / "test_c.pending.json").exists()
    setup_project(drifted, "allow")
    drifted.runpytest("-k", "test_c").assert_outcomes(passed=1)
    assert not (folder(drifted) / "test_c.pending.json").exists()
    # verify and the cassette folder never take a pending file for a cassette.
    verify = cli("verify", "cassettes", cwd=drifted.path)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda text: text[: len(text) // 2], "is not JSON"),
        (lambda text: "5", "is not a pytest-agentreplay cassette of version 4"),
        (lambda text: json.dumps({**json.loads(text), "head_hash": "0" * 64}), "fails its integrity check"),
    ],
)
def test_a_damaged_pending_file_never_replaces_its_cassette(
    drifted: pytest.Pytester, damage: Callable[[str], str], problem: str
) -> None:
    """A pending file whose cassette text is cut, not a cassette, or edited: accepting it wrote that text
    over the good cassette (exit 0, "accepted")."""
    drifted.runpytest("-k", "test_a").assert_outcomes(failed=1)
    pending = folder(drifted) / "test_a.pending.json"
    doc = json.loads(pending.read_text(encoding="utf-8"))
    doc["cassette_text"] = damage(doc["cassette_text"])
    pending.write_text(json.dumps(doc), encoding="utf-8")
    before = (folder(drifted) / "test_a.json").read_bytes()
    accepted = cli("accept", str(pending), cwd=drifted.path)
    assert accepted.returncode == 1, accepted.stdout
    assert f"test_a.pending.json is damaged: the cassette it holds {problem}" in accepted.stderr
    assert (folder(drifted) / "test_a.json").read_bytes() == before
    assert pending.exists()


def test_in_ci_without_the_option_no_pending_file_is_written(
    drifted: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "1")
    drifted.runpytest("-k", "test_a").assert_outcomes(failed=1)
    assert not list(folder(drifted).glob("*.pending.json"))
    monkeypatch.delenv("CI")
    drifted.runpytest("-k", "test_a", "-o", "agentreplay_pending=false").assert_outcomes(failed=1)
    assert not list(folder(drifted).glob("*.pending.json"))


def test_review_outside_a_terminal_says_what_to_run_instead(drifted: pytest.Pytester) -> None:
    drifted.runpytest("-k", "test_a").assert_outcomes(failed=1)
    result = cli("review", cwd=drifted.path)
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr and "agentreplay accept" in result.stderr


def test_pending_files_downloaded_from_ci_are_accepted_into_the_project(
    drifted: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CI", "true")
    drifted.runpytest("--agentreplay-pending", "-k", "test_a or test_b").assert_outcomes(failed=2)
    artifact = tmp_path / "artifact"
    for pending in folder(drifted).glob("*.pending.json"):
        target = artifact / pending.relative_to(drifted.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        pending.replace(target)  # the CI job's artifact, downloaded elsewhere; the checkout has none
    assert not list(folder(drifted).glob("*.pending.json"))
    result = cli("accept", "--from", str(artifact), "-k", "test_b", cwd=drifted.path)
    assert result.returncode == 0, result.stderr
    assert "accepted: test_flow.py::test_b" in result.stdout
    assert not (artifact / "cassettes" / "test_flow" / "test_b.pending.json").exists()
    assert (artifact / "cassettes" / "test_flow" / "test_a.pending.json").exists()
    monkeypatch.delenv("CI")
    drifted.runpytest("-k", "test_a or test_b").assert_outcomes(passed=1, failed=1)
