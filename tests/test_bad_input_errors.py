"""Bad input gets an error of the family naming the place and a fix that works: text that is not UTF-8,
a cassette with git merge-conflict markers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_cli_support import build_run, read, write_rechained

from pytest_agentreplay import capture_run, record_state
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cli import main
from pytest_agentreplay.core.unencodable import surrogate_field
from pytest_agentreplay.exceptions import CassetteCorruptError, UnencodableValueError

SURROGATE_AGENT = """
import json
import os

import httpx
from pytest_agentreplay import tool


def test_http(agent_replay):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "cut \\ud83d here"}]})
    httpx.post(os.environ["TARGET"] + "/v1/chat/completions", content=body.encode(),
               headers={"content-type": "application/json"})


@tool(name="lookup")
def lookup(query):
    return {"found": query}


def test_tool(agent_replay):
    lookup("cut \\ud83d here")

"""


def test_a_lone_surrogate_is_named_with_its_event_and_field(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers import LLMServer

    pytester.makepyfile(test_surrogate=SURROGATE_AGENT)
    with LLMServer() as llm:
        monkeypatch.setenv("TARGET", llm.url)
        result = pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "UnicodeEncodeError" not in out
    assert "tool lookup: its arguments hold text that is not valid UTF-8" in out
    assert "tool lookup: the arguments at /query holds \\ud83d" in out
    assert "the request body at /body/json/messages/0/content holds \\ud83d, a lone UTF-16 surrogate" in out
    assert "holds text that is not valid UTF-8" in out
    assert "text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')" in out
    assert not list((pytester.path / "cassettes").rglob("test_*.json"))


REPLAYED_TOOL = """
from pytest_agentreplay import tool

QUERY = {query!r}


@tool(name="lookup")
def lookup(query):
    return {{"found": query}}


@tool(name="refund", effect="write", idempotency_key="key")
def refund(query, key):
    return {{"refunded": query}}


def test_tool(agent_replay):
    lookup(QUERY)


def test_keyed_tool(agent_replay):
    refund(QUERY, key="k-1")
"""


def test_a_lone_surrogate_in_a_replayed_tool_call_is_named(pytester: pytest.Pytester) -> None:
    """Recorded with plain text, replayed with a lone surrogate in a tool's arguments: finding the call in
    the cassette raised UnicodeEncodeError out of the tool index (with or without an idempotency key)."""
    pytester.makepyfile(test_replayed=REPLAYED_TOOL.format(query="cut here"))
    pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    pytester.makepyfile(test_replayed=REPLAYED_TOOL.format(query="cut \ud83d here"))
    replayed = pytester.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(failed=2)
    cassettes = pytester.path / "cassettes" / "test_replayed"
    for test, tool in (("test_tool", "lookup"), ("test_keyed_tool", "refund")):
        replayed.stdout.fnmatch_lines(
            [
                f"*tool {tool}: the arguments at /query holds \\ud83d, a lone UTF-16 surrogate*",
                f"cassette: {cassettes / test}.json",
                "mode: regression",
            ],
            consecutive=False,
        )
    assert "UnicodeEncodeError" not in replayed.stdout.str()


@pytest.mark.parametrize(
    ("state", "evidence"),
    [
        ({"score": float("nan")}, "the state holds NaN or Infinity"),
        ([float("-inf")], "the state holds NaN or Infinity"),
        ({"text": "cut \ud83d"}, "the state at /text holds \\ud83d, a lone UTF-16 surrogate"),
    ],
)
def test_a_state_without_json_form_is_named(tmp_path: Path, state: object, evidence: str) -> None:
    """record_state hashes the state: a NaN raised ValueError, a lone surrogate UnicodeEncodeError, bare out
    of the state hash."""
    path = tmp_path / "run.json"
    with pytest.raises(UnencodableValueError) as info, capture_run(path, intercept_http=False):
        record_state(state)
    text = str(info.value)
    assert (
        info.value.headline == "record_state: the state has no canonical JSON form, so it has no state hash"
    )
    assert evidence in text
    assert f"cassette: {path}" in text and "mode: capture" in text


def test_surrogate_field_finds_keys_and_nested_values() -> None:
    assert surrogate_field({"a": ["ok", {"b": "x\udc80"}]}) == ("/a/1/b", "\\udc80")
    assert surrogate_field({"k\ud800": 1}) == ("/k\ud800", "\\ud800")
    assert surrogate_field({"a/b": ["fine", 1, None]}) is None


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)


def test_a_cassette_with_conflict_markers_is_named_so_with_fixes_that_work_during_the_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    cassette = repo / "cassettes" / "tests" / "test_agent" / "test_refund.json"
    build_run(cassette)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "recorded")
    for branch, amount in (("theirs", 50), ("main", 60)):
        if branch == "theirs":
            git(repo, "checkout", "-q", "-b", "theirs")
        else:
            git(repo, "checkout", "-q", "main")
        doc = read(cassette)
        doc["events"][8]["data"]["arguments"]["amount"] = amount
        write_rechained(cassette, doc)
        git(repo, "commit", "-qam", f"amount {amount}")
    assert git(repo, "merge", "theirs", check=False).returncode != 0
    assert "<<<<<<< " in cassette.read_text()

    code = main(["verify", str(cassette)])
    out = capsys.readouterr().out
    assert code == 1
    assert "cassette test_refund.json holds git merge-conflict markers" in out
    assert "line 12: <<<<<<< HEAD" in out and "not valid JSON" not in out
    # Replay loads it with the same check: the message names the cassette, the mode and the fixes.
    with pytest.raises(CassetteCorruptError) as raised:
        load_cassette(cassette, mode="regression")
    message = str(raised.value)
    assert f"cassette: {cassette}" in message and "mode: regression" in message
    assert f"1. keep one side whole: `git checkout --theirs -- {cassette}`" in message
    assert "2. or, after the merge, re-record it against the real services: pytest" in message

    # The first fix works while the path is unmerged (plain `git checkout -- path` does not).
    assert git(repo, "checkout", "--", str(cassette), check=False).returncode != 0
    git(repo, "checkout", "--theirs", "--", str(cassette))
    assert main(["verify", str(cassette)]) == 0
    assert read(cassette)["events"][8]["data"]["arguments"]["amount"] == 50


def test_an_error_names_the_mode_a_layer_above_added_and_survives_pickling(tmp_path: Path) -> None:
    import pickle

    from pytest_agentreplay.exceptions import CassetteElsewhereError

    cassette = tmp_path / "cassettes" / "t.json"
    cassette.parent.mkdir()
    cassette.write_text("{")
    with pytest.raises(CassetteCorruptError) as raised:
        load_cassette(cassette)
    error = raised.value
    error.mode = "sandbox"  # what a caller that knows the mode does on the way up
    assert "mode: sandbox" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is CassetteCorruptError and str(again) == str(error)
    elsewhere = CassetteElsewhereError("moved", found=tmp_path / "a.json", root=tmp_path, fixes=["look"])
    assert str(pickle.loads(pickle.dumps(elsewhere))) == str(elsewhere)
