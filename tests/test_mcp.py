"""MCP client sessions (the official SDK) recorded at the session level against a real MCP server (stdio and
streamable HTTP on 127.0.0.1), replayed in inner pytest sessions with the server stopped: no process
started, no connection made, a write answered with its recorded receipt, and every drift naming the tool."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_servers

# pytester's in-process sessions drop the modules they imported first: import the SDK (and the adapter) in
# the outer process so every inner session patches the same copy.
for _name in (
    "mcp",
    "mcp.client.stdio",
    "mcp.client.sse",
    "mcp.client.streamable_http",
    "mcp.shared.jsonrpc_dispatcher",
    "pytest_agentreplay.intercept.mcp",
):
    importlib.import_module(_name)

INNER = """
import asyncio
import os
from pathlib import Path

import pytest
from mcp import ClientSession, stdio_client
from mcp.client.streamable_http import streamable_http_client

import mcp_servers


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


async def agent(transport):
    async with transport as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if "call_first" in variant():
                # The SDK lists the tools itself only after this call (to check its output).
                early = await session.call_tool("lookup", {"topic": "early"})
                assert early.structured_content is not None
            listed = await session.list_tools()
            topic = "Ships" if "changed_argument" in variant() else "ships"
            found = await session.call_tool("lookup", {"topic": topic})
            stored = await session.call_tool("add_note", {"text": "call back"})
            loud = await session.call_tool("shout", {"text": "done"})
            if "extra_call" in variant():
                await session.call_tool("shout", {"text": "once more"})
            readme = await session.read_resource("notes://readme")
            prompt = await session.get_prompt("summarise", {"topic": "ships"})
            return {
                "tools": [tool.name for tool in listed.tools],
                "found": found.structured_content,
                "stored": stored.structured_content,
                "loud": loud.content[0].text,
                "readme": readme.contents[0].text,
                "prompt": prompt.messages[0].content.text,
            }


def transport():
    if os.environ["MCP_TRANSPORT"] == "http":
        return streamable_http_client(os.environ["MCP_URL"])
    marker, notes = Path(os.environ["MCP_MARKER"]), Path(os.environ["MCP_NOTES"])
    return stdio_client(mcp_servers.stdio_parameters(marker, notes, os.environ.get("MCP_VARIANT", "")))


@pytest.mark.agentreplay
def test_notes():
    out = asyncio.run(agent(transport()))
    assert out["tools"] == ["lookup", "add_note", "shout"]
    assert out["stored"] == {"receipt": "N-1"}
    assert out["loud"] == "DONE"
    assert out["readme"] == "the notes server"
    assert out["prompt"] == "Summarise the notes about ships."
"""


# The stdio recording every test replays (its cassette's bytes), made by whichever test needs it first.
_RECORDED: dict[str, bytes] = {}


@dataclass
class McpLab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    marker: Path
    notes: Path

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_notes.json"

    def run(self, *args: str, variant: str = "", server_variant: str = "") -> pytest.RunResult:
        self.monkeypatch.setenv("AGENT_VARIANT", variant)
        self.monkeypatch.setenv("MCP_VARIANT", server_variant)
        return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def recorded(self) -> None:
        """The stdio session recorded: once per process, then copied (a recording starts the server: ~4 s)."""
        if "stdio" not in _RECORDED:
            self.run("--agentreplay-record=all").assert_outcomes(passed=1)
            _RECORDED["stdio"] = self.cassette.read_bytes()
        else:
            self.cassette.parent.mkdir(parents=True, exist_ok=True)
            self.cassette.write_bytes(_RECORDED["stdio"])
            self.notes.write_text("call back\n")

    def events(self) -> list[dict[str, Any]]:
        return list(json.loads(self.cassette.read_text())["events"])

    def starts(self) -> int:
        return len(self.marker.read_text().splitlines())

    def writes(self) -> list[str]:
        return self.notes.read_text().splitlines()


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[McpLab]:
    pytester.makepyfile(test_agent=INNER)
    marker, notes = pytester.path / "started.txt", pytester.path / "notes.txt"
    marker.write_text("")
    notes.write_text("")
    monkeypatch.setenv("MCP_MARKER", str(marker))
    monkeypatch.setenv("MCP_NOTES", str(notes))
    monkeypatch.setenv("MCP_TRANSPORT", "stdio")
    yield McpLab(pytester, monkeypatch, marker, notes)


def _calls(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["tool"]["name"]: e for e in events if e["type"] == "tool.call"}


def _failure(result: pytest.RunResult, *patterns: str) -> str:
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for pattern in patterns:
        assert pattern in out, f"{pattern!r} not in output:\n{out}"
    return out


def test_stdio_session_recorded_then_replayed_without_starting_the_server(lab: McpLab) -> None:
    lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    _RECORDED["stdio"] = lab.cassette.read_bytes()
    assert lab.starts() == 1
    assert lab.writes() == ["call back"]
    events = lab.events()
    calls = _calls(events)
    # Each tool call with its transport, server and effect class (annotations: only readOnlyHint is a read).
    assert calls["notes/lookup"]["data"]["arguments"] == {"topic": "ships"}
    assert {n: calls[f"notes/{n}"]["data"]["effect"] for n in ("lookup", "add_note", "shout")} == {
        "lookup": "read",
        "add_note": "write",
        "shout": "write",
    }
    assert calls["notes/add_note"]["data"]["hints"]["destructiveHint"] is True
    assert calls["notes/lookup"]["data"]["transport"] == "mcp"
    assert calls["notes/lookup"]["data"]["server"] == "notes"
    assert {"mcp:initialize", "mcp:tools/list", "mcp:resources/read", "mcp:prompts/get"} <= set(calls)
    effects = [e for e in events if e["type"] == "effect"]
    assert [e["effect"]["receipt"] for e in effects if e["tool"]["name"] == "notes/add_note"] == ["N-1"]

    result = lab.run()
    result.assert_outcomes(passed=1)
    # No server process started, and the write did not reach it: its recorded receipt answered.
    assert lab.starts() == 1
    assert lab.writes() == ["call back"]


def test_a_tool_called_before_the_agent_lists_the_tools_is_classified_by_its_annotations(
    lab: McpLab,
) -> None:
    lab.run("--agentreplay-record=all", variant="call_first").assert_outcomes(passed=1)
    events = lab.events()
    early = next(
        e for e in events if e["type"] == "tool.call" and e["data"].get("arguments") == {"topic": "early"}
    )
    assert early["data"]["effect"] == "read"
    assert early["data"]["hints"]["readOnlyHint"] is True
    assert early["tool"]["schema_version"] == _calls(events)["notes/lookup"]["tool"]["schema_version"]
    starts = lab.starts()
    result = lab.run(variant="call_first")
    result.assert_outcomes(passed=1)
    assert lab.starts() == starts  # served: no server started
    lab.run("--agentreplay-update", variant="call_first").assert_outcomes(passed=1)
    assert lab.events() == events


def test_stdio_changed_argument_fails_naming_the_tool(lab: McpLab) -> None:
    lab.recorded()
    started = lab.starts()
    result = lab.run(variant="changed_argument")
    out = _failure(result, "tool call notes/lookup(topic='Ships') has no recorded result")
    assert "recorded: notes/lookup(topic='ships')" in out
    assert lab.starts() == started


def test_unrecorded_call_fails_like_an_unmatched_request(lab: McpLab) -> None:
    lab.recorded()
    started = lab.starts()
    result = lab.run(variant="extra_call")
    out = _failure(
        result, "tool call notes/shout(text='once more') has no recorded result", "mode: regression"
    )
    assert str(lab.cassette) in out
    assert lab.starts() == started


def test_changed_tool_description_is_drift_where_the_server_runs(lab: McpLab) -> None:
    lab.recorded()
    started = lab.starts()
    # Sandbox runs the test's own MCP server: the tool it lists now is described differently. It writes to
    # the server again: from an empty notes file, the receipt it answers is the recorded one.
    lab.notes.write_text("")
    result = lab.run("--agentreplay-mode=sandbox", server_variant="changed_description")
    _failure(result, "notes/lookup", "schema_version")
    assert lab.starts() == started + 1
    # Unchanged, the same sandbox replay passes.
    lab.notes.write_text("")
    lab.run("--agentreplay-mode=sandbox").assert_outcomes(passed=1)
    assert lab.starts() == started + 2


def test_effect_override_and_bad_value(lab: McpLab) -> None:
    lab.pytester.makepyprojecttoml(
        '[tool.agentreplay]\nmcp_effects = { "notes/shout" = "read", "lookup" = "write" }\n'
    )
    lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    calls = _calls(lab.events())
    assert calls["notes/shout"]["data"]["effect"] == "read"
    assert calls["notes/lookup"]["data"]["effect"] == "write"

    lab.pytester.makepyprojecttoml('[tool.agentreplay]\nmcp_effects = { "shout" = "delete" }\n')
    result = lab.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "mcp_effects" in err and "'delete'" in err and "read, write" in err


def test_streamable_http_recorded_then_replayed_with_the_server_stopped(
    lab: McpLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TRANSPORT", "http")
    port = mcp_servers.free_port()
    with mcp_servers.http_server(port, lab.marker, lab.notes) as url:
        monkeypatch.setenv("MCP_URL", url)
        lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    assert lab.writes() == ["call back"]
    events = lab.events()
    # The session is the history: the HTTP requests carrying it are not recorded beside it.
    assert not [e for e in events if e["type"] in ("http", "model.call")]
    assert _calls(events)["notes/add_note"]["data"]["effect"] == "write"

    counter = mcp_servers.ConnectionCounter(port)
    try:
        lab.run().assert_outcomes(passed=1)
        changed = lab.run(variant="changed_argument")
    finally:
        connections = counter.close()
    assert connections == 0
    _failure(changed, "notes/lookup(topic='Ships')")
    assert lab.writes() == ["call back"]
