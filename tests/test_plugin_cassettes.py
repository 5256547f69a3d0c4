"""Bad cassettes fail the test with their own clear error; xdist writes one valid cassette per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentreplay.cassette.read import load_cassette

BIG_AGENT_TEST = """
from pytest_agentreplay import tool, record_state

@tool(name="fetch_doc")
def fetch_doc(doc_id):
    return {"doc_id": doc_id, "text": "lorem ipsum " * 400}

def test_agent(agent_replay):
    doc = fetch_doc("d1")
    record_state({"doc": doc["doc_id"]})
    record_state({"done": True})
"""


def recorded(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(test_big=BIG_AGENT_TEST)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    path = pytester.path / "cassettes" / "test_big" / "test_agent.json"
    assert path.is_file()
    return path


def replay_fails_with(pytester: pytest.Pytester, *needles: str) -> None:
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out
    for needle in needles:
        assert needle in out, f"{needle!r} not in output:\n{out}"
    assert "test_agent.json" in out
    assert "How to fix" in out


def test_malformed_json(pytester: pytest.Pytester) -> None:
    path = recorded(pytester)
    path.write_text(path.read_text().replace('"events"', '"events" ::', 1))
    replay_fails_with(pytester, "not valid JSON", "line")


def test_truncated_file(pytester: pytest.Pytester) -> None:
    path = recorded(pytester)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    replay_fails_with(pytester, "line")


def test_reordered_events(pytester: pytest.Pytester) -> None:
    path = recorded(pytester)
    doc = json.loads(path.read_text())
    events = doc["events"]
    events[2], events[3] = events[3], events[2]
    path.write_text(json.dumps(doc))
    replay_fails_with(pytester, "seq")


def test_edited_event(pytester: pytest.Pytester) -> None:
    path = recorded(pytester)
    doc = json.loads(path.read_text())
    doc["events"][1]["data"]["arguments"]["doc_id"] = "d2"
    path.write_text(json.dumps(doc))
    replay_fails_with(pytester, "seq 1 was edited")


def test_newer_format_version(pytester: pytest.Pytester) -> None:
    path = recorded(pytester)
    doc = json.loads(path.read_text())
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    replay_fails_with(pytester, "99", "upgrade")


def test_missing_blob(pytester: pytest.Pytester) -> None:
    recorded(pytester)
    blobs = [p for p in (pytester.path / "cassettes" / ".blobs").rglob("*") if p.is_file()]
    assert blobs, "the large tool result must live in the blob store"
    for blob in blobs:
        blob.unlink()
    replay_fails_with(pytester, "blob")


def test_fifty_tests_recorded_under_xdist(pytester: pytest.Pytester) -> None:
    body = "\n".join(
        f"""
def test_n{i}(agent_replay):
    fetch_doc("doc-{i % 7}")
    record_state({{"n": {i}}})
"""
        for i in range(50)
    )
    pytester.makepyfile(
        test_many="from pytest_agentreplay import tool, record_state\n"
        + '@tool\ndef fetch_doc(doc_id):\n    return {"doc_id": doc_id, "text": "x" * 3000}\n'
        + body
    )
    result = pytester.runpytest_subprocess("-n", "2", "--agentreplay-record=all")
    result.assert_outcomes(passed=50)
    files = sorted((pytester.path / "cassettes" / "test_many").glob("*.json"))
    assert len(files) == 50
    for path in files:
        loaded = load_cassette(path, verify_blobs=True)
        assert [e.type for e in loaded.events][:2] == ["run.start", "tool.call"]
    result.stdout.fnmatch_lines(["*50 recorded*"])
    replay = pytester.runpytest_subprocess("-n", "2")
    replay.assert_outcomes(passed=50)
