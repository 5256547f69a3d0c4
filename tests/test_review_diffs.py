"""Issue 16: an accepted change is a review-sized diff. Each test records a run, changes one thing, accepts
it with ``--agentreplay-update`` and counts the cassette's changed lines with ``git diff --numstat`` in a
temporary repository. The figures are printed (``-s``) so they can be compared with an older format."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_agentreplay.core.canonical import dumps_pretty

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

AGENT = """
import os
from pytest_agentreplay import tool, record_policy

@tool(name="get")
def get(i):
    return {"i": i, "body": "item %d" % i}

def run(gets, note, insert_at=None, done=True):
    record_policy("init", "ok", version="1")
    record_policy("note", note, version="1")
    for i in range(gets):
        if i == insert_at:
            record_policy("inserted", "extra", version="1")
        get(i)
    if done:
        record_policy("done", "ok", version="1")
"""


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def _numstat(repo: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for line in _git(repo, "diff", "--numstat").splitlines():
        added, removed, name = line.split("\t")
        out[name] = (int(added), int(removed))
    return out


def _project(
    pytester: pytest.Pytester, note: str, gets: int, insert_at: int | None = None, done: bool = True
) -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_flow="import agentlib\n\ndef test_a(agent_replay):\n"
        f"    agentlib.run({gets}, {note!r}, {insert_at!r}, {done!r})\n"
    )


def _record_and_commit(pytester: pytest.Pytester, gets: int, done: bool = True) -> Path:
    _project(pytester, "v1", gets, done=done)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-qm", "recorded")
    return pytester.path / "cassettes" / "test_flow" / "test_a.json"


def _update(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--agentreplay-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 updated*"])


def test_one_field_of_event_2_of_51(pytester: pytest.Pytester) -> None:
    cassette = _record_and_commit(pytester, 23)
    assert len(json.loads(cassette.read_text())["events"]) == 51
    _project(pytester, "v2", 23)
    _update(pytester)
    doc = json.loads(cassette.read_text())
    assert doc["events"][2]["data"]["verdict"] == "v2"
    added, removed = _numstat(pytester.path)["cassettes/test_flow/test_a.json"]
    print(f"\nFIGURE one field of event 2 of 51: +{added} -{removed}")
    assert added <= 3 and removed <= 3, _git(pytester.path, "diff")
    assert pytester.runpytest().ret == pytest.ExitCode.OK


def test_event_inserted_in_the_middle_of_100(pytester: pytest.Pytester) -> None:
    cassette = _record_and_commit(pytester, 48, done=False)
    assert len(json.loads(cassette.read_text())["events"]) == 100
    _project(pytester, "v1", 48, insert_at=24, done=False)
    _update(pytester)
    events = json.loads(cassette.read_text())["events"]
    assert len(events) == 101
    inserted = next(i for i, e in enumerate(events) if e.get("data", {}).get("policy") == "inserted")
    inserted_lines = dumps_pretty(events[inserted]).count("\n")
    after = len(events) - inserted - 1  # events renumbered: one `seq` line each
    added, removed = _numstat(pytester.path)["cassettes/test_flow/test_a.json"]
    print(
        f"\nFIGURE event inserted at seq {inserted} of 100: +{added} -{removed} "
        f"(inserted event {inserted_lines} lines, {after} seq lines after it)"
    )
    assert added <= inserted_lines + after + 3, _git(pytester.path, "diff")
    assert removed <= after + 3, _git(pytester.path, "diff")
    assert pytester.runpytest().ret == pytest.ExitCode.OK


def test_update_upgrades_an_intact_previous_version(pytester: pytest.Pytester) -> None:
    from pytest_agentreplay.cassette.migrations import MIGRATIONS
    from pytest_agentreplay.core.constants import FORMAT_VERSION

    cassette = _record_and_commit(pytester, 2)
    doc = json.loads(cassette.read_text())
    for key in ("event_count", "event_digests", "head_hash"):
        del doc[key]
    cassette.write_text(dumps_pretty(MIGRATIONS[1]({**doc, "version": 1}, "v1")))  # as version 2 wrote it
    assert json.loads(cassette.read_text())["version"] == 2
    refused = pytester.runpytest()
    assert refused.ret != pytest.ExitCode.OK
    refused.stdout.fnmatch_lines(["*upgraded only by `agentreplay migrate`*"])

    _project(pytester, "v2", 2)
    _update(pytester)
    doc = json.loads(cassette.read_text())
    assert doc["version"] == FORMAT_VERSION and doc["events"][2]["data"]["verdict"] == "v2"
    assert pytester.runpytest().ret == pytest.ExitCode.OK


CONVERSATION = """
import os
import httpx

SYSTEM = {system!r} * 40

def test_chat(agent_replay):
    messages = [{{"role": "system", "content": SYSTEM}}]
    with httpx.Client() as client:
        for turn in range(50):
            messages.append({{"role": "user", "content": "question %d: where is my parcel?" % turn}})
            reply = client.post(
                os.environ["LLM_BASE"] + "/v1/chat/completions",
                json={{"model": "gpt-4o-mini", "messages": messages, "temperature": 0}},
            ).json()
            messages.append(reply["choices"][0]["message"])
"""


def test_system_prompt_of_a_50_call_conversation(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers import LLMServer, ModelReply

    with LLMServer() as llm:
        monkeypatch.setenv("LLM_BASE", llm.url)
        llm.queue("chat", *[ModelReply(text=f"answer {n}: it is on its way.") for n in range(50)])
        pytester.makepyfile(test_chat=CONVERSATION.format(system="You are a careful support agent. "))
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        assert len(llm.log) == 50
    cassette = pytester.path / "cassettes" / "test_chat" / "test_chat.json"
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-qm", "recorded")
    blobs_before = set((pytester.path / "cassettes").rglob("*.blobs/*/*.json"))

    pytester.makepyfile(test_chat=CONVERSATION.format(system="You are a careful, kind support agent. "))
    drifted = pytester.runpytest()
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(["*messages[[]0[]].content*"])
    _update(pytester)
    added, removed = _numstat(pytester.path)["cassettes/test_chat/test_chat.json"]
    new_blobs = set((pytester.path / "cassettes").rglob("*.blobs/*/*.json")) - blobs_before
    print(
        f"\nFIGURE system prompt of a 50-call conversation: +{added} -{removed}, {len(new_blobs)} new blob(s)"
    )
    assert added <= 3 and removed <= 3, _git(pytester.path, "diff")
    assert len(new_blobs) <= 1, new_blobs
    assert "kind support agent" in (cassette.read_text() + "".join(p.read_text() for p in new_blobs))
    assert pytester.runpytest().ret == pytest.ExitCode.OK
