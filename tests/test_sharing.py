"""What a hook or the user can reach is theirs to change: no other event, no cassette, no later served
value and no comparison moves when they do.

The package shares objects for speed (a conversation's requests hold the very message objects of the
previous request, a loaded cassette's values are read in place, the recorded and the replayed side of a
comparison share what they hold alike). Each case below records an inner pytest session (pytester)
against the local servers (tests/servers.py), then replays it with the test changing, in place, one
kind of value it was handed: a ``@tool`` result, a write tool's receipt, a ``record_value`` value, a
response body its client parsed (httpx ``r.json()``, an openai SDK object) or the events read through
``agent_replay.events``; and the project's hooks change the payloads and events they are given. The
replay must stay green with no drift, leave every file as it was, and the value served after the changed
one must be the recorded one; an accepted unrelated change must rewrite that one event only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer, ModelReply

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.core.canonical import DigestMemo, in_key_order, request_digest

AGENT = '''
import json, os

import httpx

from pytest_agentreplay import record_policy, record_value, tool

CHANGE = os.environ.get("CHANGE", "")


def _result(n):
    # Keys in sorted order: nothing is reordered on the way back (the cassette stores sorted keys).
    return {"items": [{"qty": n, "sku": "a"}], "meta": {"tags": ["x", "y"]}, "order": "A1"}


def _unsorted(n):
    # Keys out of order at the top and under "b" only: "a" is served as it was loaded unless copied.
    return {"z": n, "b": {"y": 1, "x": 2}, "a": [{"k": n, "deep": {"v": [1, 2]}}]}


@tool(name="lookup")
def lookup(n):
    return _result(n)


@tool(name="unsorted")
def unsorted(n):
    return _unsorted(n)


@tool(name="create_ticket", effect="write", idempotency_key="key")
def create_ticket(subject, key):
    return {"lines": [{"n": 1}], "ticket_id": "T-9"}


def _spoil(value):
    """Change every container of ``value`` in place, as careless agent code would."""
    if isinstance(value, dict):
        for item in list(value.values()):
            _spoil(item)
        value["spoiled"] = True
    elif isinstance(value, list):
        for item in list(value):
            _spoil(item)
        value.append("spoiled")


def run(url, events):
    record_policy("note", os.environ.get("NOTE", "v1"), version="1")
    seen = {}
    first, again = lookup(1), lookup(1)  # one result recorded twice: two values, one content
    if CHANGE == "tool":
        _spoil(first)
    seen["tool"] = [again, lookup(2)]
    first = unsorted(1)
    if CHANGE == "tool_unsorted":
        _spoil(first)
    seen["tool_unsorted"] = [unsorted(1), list(unsorted(2))]
    receipt = create_ticket("late", key="k-1")
    if CHANGE == "receipt":
        _spoil(receipt)
    seen["receipt"] = create_ticket("late", key="k-2")
    flag = record_value("flag", lambda: {"buckets": [1, 2], "variant": "b"})
    if CHANGE == "value":
        _spoil(flag)
    seen["value"] = record_value("flag", lambda: {"buckets": [1, 2], "variant": "b"})
    client = httpx.Client()
    messages = [{"role": "user", "content": "Where is my parcel?"}]
    for turn in range(3):
        reply = client.post(url + "/v1/chat/completions", json={"model": "m", "messages": messages})
        body = reply.json()
        # The agent sends on a copy of the answer: what it changes in ``body`` is not sent again.
        answer = json.loads(json.dumps(body["choices"][0]["message"]))
        messages = [*messages, answer, {"role": "user", "content": f"turn {turn}"}]
        if CHANGE == "response":
            _spoil(body)
    weather = client.get(url + "/tools/weather", params={"city": "Oslo"}).json()
    if CHANGE == "response":
        _spoil(weather)
    seen["weather"] = client.get(url + "/tools/weather", params={"city": "Oslo"}).json()
    if CHANGE == "events":
        for event in events():
            _spoil(event.data)
            for ref in (event.input_ref, event.output_ref):
                if ref is not None:
                    _spoil(ref.inline)
    return seen
'''

SDK = """
import os

import openai

CHANGE = os.environ.get("CHANGE", "")


def ask(url):
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "Where is my parcel?"}]
    answers = []
    for turn in range(2):
        completion = client.chat.completions.create(model="m", messages=messages)
        answers.append(completion.choices[0].message.content)
        if CHANGE == "sdk":
            completion.choices[0].message.content = "spoiled"
            completion.usage.prompt_tokens = -1
            completion.choices.append(completion.choices[0])
        said = {"role": "assistant", "content": answers[-1]}
        messages = [*messages, said, {"role": "user", "content": "more"}]
    return answers
"""

INNER = """
import json, os

import pytest

import agent_sharing
import sdk_sharing


def test_agent(agent_replay):
    seen = agent_sharing.run(os.environ["SERVER_URL"], lambda: agent_replay.events)
    seen["sdk"] = sdk_sharing.ask(os.environ["SERVER_URL"])
    with open(os.environ["OUT"], "a") as fh:
        fh.write(json.dumps(seen) + "\\n")
"""

HOOKS = """
import os


def pytest_agentreplay_classify_exchange(request, response):
    if os.environ.get("HOOKS"):
        request["headers"]["x-hooked"] = "yes"
        body = (request.get("body") or {}).get("json")
        if isinstance(body, dict):
            for message in body.get("messages", []):
                message["content"] = "changed by the classify hook"
            body["hooked"] = True
    return None


def pytest_agentreplay_redact_event(event):
    # Changes the event it was given in place and keeps it: on a later call of the conversation only, so
    # the earlier calls' events (which sent the same first messages) must stay as they were.
    if os.environ.get("HOOKS"):
        body = (((event.get("input_ref") or {}).get("inline") or {}).get("body") or {}).get("json") or {}
        messages = body.get("messages") or []
        if len(messages) > 1:
            for message in messages:
                message["content"] = "[hidden]"
    return None
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    pytester.makepyfile(agent_sharing=AGENT, sdk_sharing=SDK, test_agent=INNER, conftest=HOOKS)
    pytester.syspathinsert()
    monkeypatch.setenv("OUT", str(pytester.path / "out.jsonl"))
    with LLMServer() as server:
        server.queue("chat", *[ModelReply(text=f"answer {n}") for n in range(20)])
        monkeypatch.setenv("SERVER_URL", server.url)
        pytester.server = server  # type: ignore[attr-defined]
        yield pytester
    import sys

    for name in ("agent_sharing", "sdk_sharing"):
        sys.modules.pop(name, None)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _outputs(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (pytester.path / "out.jsonl").read_text().splitlines()]


def _events(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    cassette = pytester.path / "cassettes" / "test_agent" / "test_agent.json"
    events: list[dict[str, Any]] = json.loads(cassette.read_text())["events"]
    return events


CHANGES = ["tool", "tool_unsorted", "receipt", "value", "response", "sdk", "events"]


@pytest.mark.parametrize("change", CHANGES)
def test_a_value_changed_by_the_agent_in_replay_changes_nothing_else(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=1)
    cassettes = project.path / "cassettes"
    before = _files(cassettes)
    recorded_events = _events(project)
    monkeypatch.setenv("CHANGE", change)
    replayed = project.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted*"])
    assert _files(cassettes) == before
    # The value served after the changed one is the recorded one.
    recorded, served = _outputs(project)
    assert served == recorded
    # An accepted change elsewhere (the policy's verdict) rewrites its own event and nothing else: what the
    # agent changed reached neither the loaded cassette nor the replayed history.
    monkeypatch.setenv("NOTE", "v2")
    updated = project.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--agentreplay-update")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(["*1 updated*"])
    after = _events(project)
    changed = [i for i, (a, b) in enumerate(zip(recorded_events, after, strict=True)) if a != b]
    assert [after[i]["type"] for i in changed] == ["policy.decision"]


def test_hooks_change_their_own_copies(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKS", "1")
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=1)
    server: LLMServer = project.server  # type: ignore[attr-defined]
    sent = [r.json() for r in server.log if r.path == "/v1/chat/completions"]
    cassette = load_cassette(project.path / "cassettes" / "test_agent" / "test_agent.json")
    requests = [cassette.payload(e.input_ref) for e in cassette.events if e.input_ref is not None]
    stored = [r["body"]["json"] for r in requests if r["url"].endswith("/chat/completions")]
    assert len(stored) == len(sent) == 5
    # The redaction hook hid the later calls' messages (more than one of them) in its own copies: the
    # first call of each conversation, which sent the same first message, is stored as it was sent.
    assert stored[0] == sent[0] and stored[3] == sent[3]
    for index in (1, 2, 4):
        assert {m["content"] for m in stored[index]["messages"]} == {"[hidden]"}
        assert len(stored[index]["messages"]) == len(sent[index]["messages"])
    # The classification hook's changes reached no stored request: it read a copy.
    assert all("hooked" not in body for body in stored)
    assert all("x-hooked" not in r["headers"] for r in requests)
    before = _files(project.path / "cassettes")
    replayed = project.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted*"])
    assert _files(project.path / "cassettes") == before


# -- the shared values themselves ------------------------------------------------------------------


def test_a_value_served_back_is_a_copy_of_its_own() -> None:
    # Sorted keys (nothing to reorder) and a partial order alike: no container of the loaded value is
    # handed out, so changing what was served cannot reach the cassette read in place.
    loaded = {"a": [{"k": 1}], "b": {"x": 2, "y": 1}, "z": 0}
    for order in (None, {"": ["z", "b", "a"], "/b": ["y", "x"]}):
        served = in_key_order(loaded, order)
        assert served == loaded
        served["a"][0]["k"] = 9
        served["b"]["x"] = 9
        assert loaded == {"a": [{"k": 1}], "b": {"x": 2, "y": 1}, "z": 0}


def test_a_digest_memo_holds_what_it_hashed() -> None:
    # The memo remembers a conversation's list by its items; a caller growing the very list it passed
    # (as a client reusing its message list does) must not make the memo believe it hashed the new items.
    memo = DigestMemo()
    messages: list[Any] = [{"role": "user", "content": "a"}]
    body = {"messages": messages, "model": "m"}
    first = request_digest(body, memo)
    messages.append({"role": "assistant", "content": "b"})
    assert request_digest(body, memo) == request_digest(body) != first
