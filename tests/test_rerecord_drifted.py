"""``--agentreplay-record=drifted``: replay until the first changed call, record live from there on.

The agent is a 6-call tool loop on the official ``openai`` SDK against a local model server that plans
its tool calls from the conversation; its tools are HTTP reads and an idempotent write on a local service.
Every request the services receive is counted, so "served, never sent" is checked where it happens.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from json_server import JsonHandler, JsonServer

# The tool calls the model asks for, one per answer, then the final answer (6 model calls in all).
PLAN = [
    ("lookup", {"topic": "parcel"}),
    ("open_ticket", {"title": "late parcel"}),
    ("lookup", {"topic": "carrier"}),
    ("lookup", {"topic": "refund"}),
    ("lookup", {"topic": "policy"}),
]


class Services(JsonHandler):
    """The model (it answers step k of :data:`PLAN` after k tool results) and the tools, counting requests."""

    seen: Counter[str] = Counter()

    def do_GET(self) -> None:
        type(self).seen["GET " + self.path.split("?")[0]] += 1
        topic = self.path.split("topic=")[-1]
        self.send_json({"topic": topic, "facts": [f"{topic}-1", f"{topic}-2"]})

    def do_POST(self) -> None:
        body = json.loads(self.body())
        type(self).seen["POST " + self.path] += 1
        if self.path == "/tickets":
            self.send_json({"id": "T-" + self.headers["Idempotency-Key"], "title": body["title"]}, 201)
            return
        messages = body["messages"]
        step = sum(1 for m in messages if m["role"] == "tool")
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if step < len(PLAN):
            name, arguments = PLAN[step]
            message["tool_calls"] = [
                {
                    "id": f"call_{step}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ]
        else:
            message["content"] = "done: " + messages[0]["content"]
        self.send_json(
            {
                "id": f"chatcmpl-{step}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if step < len(PLAN) else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )


AGENT = """
import json, os

import httpx
import openai


def run_tool(name, arguments, step):
    base = os.environ["SERVICES"]
    if name == "lookup":
        topic = arguments["topic"]
        if step == 2 and os.environ.get("THIRD_TOPIC"):
            topic = os.environ["THIRD_TOPIC"]  # the agent's code changed the 3rd call's argument
        return httpx.get(base + "/lookup", params={"topic": topic}).json()
    response = httpx.post(
        base + "/tickets", json=arguments, headers={"Idempotency-Key": "k-" + arguments["title"][:4]}
    )
    return response.json()


def agent():
    client = openai.OpenAI(base_url=os.environ["SERVICES"] + "/v1", api_key="sk-test", max_retries=0)
    messages = [
        {"role": "system", "content": os.environ.get("SYSTEM_PROMPT", "You are a support agent.")},
        {"role": "user", "content": "Where is my parcel?"},
    ]
    for step in range(10):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        call = message.tool_calls[0]
        messages.append(message.model_dump(exclude_none=True))
        result = run_tool(call.function.name, json.loads(call.function.arguments), step)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    raise AssertionError("the agent never finished")
"""

TESTS = """
import agentlib

def test_support(agent_replay):
    assert agentlib.agent().startswith("done: ")
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    pytester.makepyfile(agentlib=AGENT, test_support=TESTS)
    for name in ("SYSTEM_PROMPT", "THIRD_TOPIC", "CI"):
        monkeypatch.delenv(name, raising=False)
    handler = type("Counted", (Services,), {"seen": Counter()})
    with JsonServer(handler) as server:
        monkeypatch.setenv("SERVICES", server.url)
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        assert handler.seen == {"POST /v1/chat/completions": 6, "GET /lookup": 4, "POST /tickets": 1}
        handler.seen.clear()
        pytester.seen = handler.seen  # type: ignore[attr-defined]
        pytester.server = server  # type: ignore[attr-defined]
        yield pytester


def cassette(pytester: pytest.Pytester) -> Path:
    return pytester.path / "cassettes" / "test_support" / "test_support.json"


def kept_prefix(before: str, after: str) -> int:
    """How many leading events the two cassettes hold byte for byte alike (as lines and as digests)."""
    old, new = json.loads(before), json.loads(after)
    n = 0
    while n < min(len(old["events"]), len(new["events"])) and old["events"][n] == new["events"][n]:
        n += 1
    return n


def test_a_changed_prompt_records_from_the_first_model_call(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = cassette(project).read_text()
    monkeypatch.setenv("SYSTEM_PROMPT", "You are a terse support agent.")
    result = project.runpytest("--agentreplay-record=drifted")
    result.assert_outcomes(passed=1)
    seen: Counter[str] = project.seen  # type: ignore[attr-defined]
    # The first model call changed: it and everything after it were sent.
    assert seen == {"POST /v1/chat/completions": 6, "GET /lookup": 4, "POST /tickets": 1}
    after = cassette(project).read_text()
    first_model = next(i for i, e in enumerate(json.loads(before)["events"]) if e["type"] == "model.call")
    assert kept_prefix(before, after) == first_model
    assert "terse support agent" in after
    result.stdout.fnmatch_lines(
        [
            f"*recorded: test_support.py::test_support*drifted at seq {first_model} "
            f"(model.call gpt-4o-mini): {first_model} events kept, * recorded live*",
            "*re-recorded from the drift: 1 test, 0 calls kept from the cassettes, 11 calls sent live*",
        ]
    )
    # The services are gone: the new cassette replays offline, with the new prompt.
    project.server.stop()  # type: ignore[attr-defined]
    project.runpytest().assert_outcomes(passed=1)


def test_a_changed_tool_argument_keeps_the_calls_before_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = cassette(project).read_text()
    monkeypatch.setenv("THIRD_TOPIC", "courier")
    # Under xdist: the worker's status carries where the test turned to the controller's summary.
    result = project.runpytest("--agentreplay-record=drifted", "-n", "2")
    result.assert_outcomes(passed=1)
    seen: Counter[str] = project.seen  # type: ignore[attr-defined]
    # Model calls 1-3, the first read and the write were served: the write's receipt stands, never re-sent.
    assert seen == {"GET /lookup": 3, "POST /v1/chat/completions": 3}
    after = cassette(project).read_text()
    old_events = json.loads(before)["events"]
    changed_read = next(i for i, e in enumerate(old_events) if "topic=carrier" in json.dumps(e))
    assert kept_prefix(before, after) == changed_read
    assert "topic=courier" in after and "topic=carrier" not in after
    shown = r"drifted at seq (\d+) \(read GET 127\.0\.0\.1/lookup\): (\d+) events kept"
    match = re.search(shown, result.stdout.str())
    assert match is not None, result.stdout.str()
    assert int(match.group(1)) == int(match.group(2)) == changed_read
    result.stdout.fnmatch_lines(["*5 calls kept from the cassettes, 6 calls sent live*"])
    # The file's lines before the first changed event are the recorded ones: its diff starts there.
    old_lines, new_lines = before.splitlines(), after.splitlines()
    first_diff = next(i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=False)) if a != b)
    assert "carrier" not in "\n".join(new_lines[:first_diff])
    assert "topic=carrier" in "\n".join(old_lines[first_diff:])

    project.server.stop()  # type: ignore[attr-defined]
    project.runpytest().assert_outcomes(passed=1)


def test_a_test_that_does_not_drift_is_replayed_and_left_alone(project: pytest.Pytester) -> None:
    before = cassette(project).read_bytes()
    result = project.runpytest("--agentreplay-record=drifted")
    result.assert_outcomes(passed=1)
    assert project.seen == {}  # type: ignore[attr-defined]
    assert cassette(project).read_bytes() == before
    result.stdout.fnmatch_lines(["*1 replayed*"])


def test_a_test_without_a_cassette_is_recorded_whole(project: pytest.Pytester) -> None:
    cassette(project).unlink()
    result = project.runpytest("--agentreplay-record=drifted")
    result.assert_outcomes(passed=1)
    assert sum(project.seen.values()) == 11  # type: ignore[attr-defined]
    assert cassette(project).exists()
    result.stdout.fnmatch_lines(["*1 recorded*"])


MIXED = """
import asyncio
import os
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, stdio_client

import mcp_servers


async def agent():
    marker, notes = Path(os.environ["MCP_MARKER"]), Path(os.environ["MCP_NOTES"])
    async with stdio_client(mcp_servers.stdio_parameters(marker, notes)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            found = await session.call_tool("lookup", {"topic": "ships"})
            stored = await session.call_tool("add_note", {"text": "call back"})
            topic = os.environ.get("HTTP_TOPIC", "parcel")
            async with httpx.AsyncClient() as client:
                fact = (await client.get(os.environ["SERVICES"] + "/lookup", params={"topic": topic})).json()
            again = await session.call_tool("shout", {"text": "done"})
            return found.structured_content, stored.structured_content, fact, again.content[0].text


@pytest.mark.agentreplay
def test_mixed():
    found, stored, fact, loud = asyncio.run(agent())
    assert found["topic"] == "ships" and stored == {"receipt": "N-1"} and loud == "DONE"
    assert fact["topic"] == os.environ.get("HTTP_TOPIC", "parcel")
"""


def test_mcp_calls_around_the_drift_stay_served_and_the_write_is_not_sent_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_mixed=MIXED)
    marker, notes = pytester.path / "started.txt", pytester.path / "notes.txt"
    monkeypatch.setenv("MCP_MARKER", str(marker))
    monkeypatch.setenv("MCP_NOTES", str(notes))
    monkeypatch.delenv("HTTP_TOPIC", raising=False)
    handler = type("Counted", (Services,), {"seen": Counter()})
    with JsonServer(handler) as server:
        monkeypatch.setenv("SERVICES", server.url)
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        assert len(marker.read_text().splitlines()) == 1 and notes.read_text() == "call back\n"
        handler.seen.clear()
        monkeypatch.setenv("HTTP_TOPIC", "courier")
        result = pytester.runpytest("--agentreplay-record=drifted")
        result.assert_outcomes(passed=1)
        # The MCP session was served from its start: no server process, the note not written again.
        assert len(marker.read_text().splitlines()) == 1 and notes.read_text() == "call back\n"
        assert handler.seen == {"GET /lookup": 1}
        result.stdout.fnmatch_lines(["*drifted at seq * (read GET 127.0.0.1/lookup)*"])
    after = (pytester.path / "cassettes" / "test_mixed" / "test_mixed.json").read_text()
    assert "topic=courier" in after and '"DONE"' in after
    pytester.runpytest().assert_outcomes(passed=1)


IDS = """
import os
import uuid

import httpx


def test_ids(agent_replay):
    first = str(uuid.uuid4())
    topic = os.environ.get("HTTP_TOPIC", "parcel")
    httpx.get(os.environ["SERVICES"] + "/lookup", params={"topic": topic})
    second = str(uuid.uuid4())
    with open(os.environ["OUT"], "a") as fh:
        fh.write(first + " " + second + "\\n")
"""


def test_runtime_values_are_served_before_the_drift_and_live_after_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_ids=IDS)
    out = pytester.path / "ids.txt"
    monkeypatch.setenv("OUT", str(out))
    monkeypatch.delenv("HTTP_TOPIC", raising=False)
    with JsonServer(type("Counted", (Services,), {"seen": Counter()})) as server:
        monkeypatch.setenv("SERVICES", server.url)
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        monkeypatch.setenv("HTTP_TOPIC", "courier")
        pytester.runpytest("--agentreplay-record=drifted").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)
    recorded, rerecorded, replayed = (line.split() for line in out.read_text().splitlines())
    assert rerecorded[0] == recorded[0], "drawn before the drift: served as recorded"
    assert rerecorded[1] != recorded[1], "drawn after the drift: live"
    assert replayed == rerecorded, "the new cassette serves both"
