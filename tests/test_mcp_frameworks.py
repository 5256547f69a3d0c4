"""MCP tool servers reached through agent frameworks: Pydantic AI's ``MCPToolset`` (the fastmcp client) and
the OpenAI Agents SDK's ``MCPServerStdio``, against the notes server of tests/mcp_servers.py. Each is
recorded in an inner pytest session, replayed with no server process started (the marker file does not
grow) or no connection made, with the same output, and a changed tool argument fails naming the tool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_servers
from frameworks_lab import Lab, make_lab, preload
from servers import ModelReply

# The frameworks and the MCP SDK's modules the adapter patches, imported in the outer process at collection,
# before any inner session of any test module: pytester drops the modules an inner session imported first,
# and a class still held elsewhere then names a module that is gone (pydantic's RootModel: ``KeyError:
# 'pydantic.root_model'`` when a generic model is built later).
_SDK = (
    "mcp",
    "mcp.client.stdio",
    "mcp.client.sse",
    "mcp.client.streamable_http",
    "mcp.shared.jsonrpc_dispatcher",
)


def _preloaded(*modules: str) -> bool:
    try:
        preload(*modules, *_SDK)
    except ImportError:
        return False
    return True


HAS_PYDANTIC_AI_MCP = _preloaded("pydantic_ai", "pydantic_ai.mcp", "fastmcp.client")
HAS_AGENTS_MCP = _preloaded("agents", "agents.mcp", "openai")


INNER = """
import json
import os
from pathlib import Path

import agentkit


def test_support(agent_replay):
    out = agentkit.run("Note that the ships are late.")
    Path(os.environ["AGENT_OUT"]).write_text(json.dumps(out))
"""


@dataclass
class McpFrameworkLab:
    lab: Lab
    marker: Path
    notes: Path
    out: Path

    def run(self, *args: str, variant: str = "") -> pytest.RunResult:
        self.out.write_text("")
        return self.lab.run("-p", "no:randomly", *args, variant=variant)

    def output(self) -> object:
        return json.loads(self.out.read_text())

    def starts(self) -> int:
        return len(self.marker.read_text().splitlines())

    def writes(self) -> list[str]:
        return self.notes.read_text().splitlines()

    def calls(self) -> dict[str, dict[str, Any]]:
        events = json.loads(self.lab.cassette.read_text())["events"]
        return {e["tool"]["name"]: e for e in events if e["type"] == "tool.call"}


def _mcp_lab(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kit: str
) -> Iterator[McpFrameworkLab]:
    marker, notes, out = (pytester.path / name for name in ("started.txt", "notes.txt", "out.json"))
    marker.write_text("")
    notes.write_text("")
    monkeypatch.setenv("MCP_MARKER", str(marker))
    monkeypatch.setenv("MCP_NOTES", str(notes))
    monkeypatch.setenv("AGENT_OUT", str(out))
    for lab in make_lab(pytester, monkeypatch, kit):
        pytester.makepyfile(test_agent=INNER)
        yield McpFrameworkLab(lab, marker, notes, out)


def _failure(result: pytest.RunResult, *patterns: str) -> None:
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for pattern in patterns:
        assert pattern in out, f"{pattern!r} not in output:\n{out}"


# --- Pydantic AI: MCPToolset over stdio and streamable HTTP, driven by a FunctionModel ----------------------

PYDANTIC_AI_KIT = r"""
import os
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

import mcp_servers


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def decide(messages, info):
    returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
    if not returns:
        topic = "Ships" if "changed_argument" in variant() else "ships"
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": topic}, tool_call_id="c1")])
    if len(returns) == 1:
        return ModelResponse(parts=[ToolCallPart("add_note", {"text": "ships late"}, tool_call_id="c2")])
    tools = sorted(t.name for t in info.function_tools)
    return ModelResponse(parts=[TextPart(repr([tools, *[r.content for r in returns]]))])


def toolset():
    if os.environ.get("MCP_URL"):
        return MCPToolset(os.environ["MCP_URL"])
    env = {key: os.environ[key] for key in ("MCP_MARKER", "MCP_NOTES")}
    return MCPToolset(StdioTransport(sys.executable, [mcp_servers.__file__, "stdio"], env=env))


def run(question):
    agent = Agent(FunctionModel(decide), toolsets=[toolset()])
    return agent.run_sync(question).output
"""

PYDANTIC_AI_OUT = (
    "[['add_note', 'lookup', 'shout'], {'topic': 'ships', 'text': 'note on ships'}, {'receipt': 'N-1'}]"
)


@pytest.fixture
def pydantic_ai_lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[McpFrameworkLab]:
    if not HAS_PYDANTIC_AI_MCP:
        pytest.skip("needs pydantic-ai-slim[mcp]")
    yield from _mcp_lab(pytester, monkeypatch, PYDANTIC_AI_KIT)


def test_pydantic_ai_stdio_toolset_recorded_replayed_without_the_server(
    pydantic_ai_lab: McpFrameworkLab,
) -> None:
    lab = pydantic_ai_lab
    lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    assert lab.output() == PYDANTIC_AI_OUT
    assert (lab.starts(), lab.writes()) == (1, ["ships late"])
    calls = lab.calls()
    assert calls["notes/lookup"]["data"]["arguments"] == {"topic": "ships"}
    assert calls["notes/lookup"]["data"]["effect"] == "read"
    assert calls["notes/add_note"]["data"]["effect"] == "write"

    lab.run().assert_outcomes(passed=1)
    assert lab.output() == PYDANTIC_AI_OUT
    assert (lab.starts(), lab.writes()) == (1, ["ships late"])

    _failure(lab.run(variant="changed_argument"), "notes/lookup(topic='Ships')")
    assert lab.starts() == 1


def test_pydantic_ai_streamable_http_toolset_replayed_with_the_server_stopped(
    pydantic_ai_lab: McpFrameworkLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = pydantic_ai_lab
    port = mcp_servers.free_port()
    with mcp_servers.http_server(port, lab.marker, lab.notes) as url:
        monkeypatch.setenv("MCP_URL", url)
        lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    assert lab.output() == PYDANTIC_AI_OUT
    assert lab.writes() == ["ships late"]
    assert lab.calls()["notes/add_note"]["data"]["effect"] == "write"

    counter = mcp_servers.ConnectionCounter(port)
    try:
        lab.run().assert_outcomes(passed=1)
        replayed = lab.output()
        changed = lab.run(variant="changed_argument")
    finally:
        connections = counter.close()
    assert connections == 0
    assert replayed == PYDANTIC_AI_OUT
    _failure(changed, "notes/lookup(topic='Ships')")
    assert lab.writes() == ["ships late"]


# --- OpenAI Agents SDK: MCPServerStdio, the model being the LLM double (Chat Completions) -------------------

AGENTS_KIT = r"""
import asyncio
import os
import sys

import openai
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_trace_processors
from agents.mcp import MCPServerStdio

import mcp_servers

set_trace_processors([])  # no export to the hosted trace backend (the network is closed anyway)


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


class NotesServer(MCPServerStdio):
    async def call_tool(self, tool_name, arguments, meta=None):
        # The agent's own code between the model and the tool: the variant changes what reaches the server.
        if "changed_argument" in variant() and arguments and "topic" in arguments:
            arguments = {**arguments, "topic": arguments["topic"].capitalize()}
        return await super().call_tool(tool_name, arguments, meta)


async def main(question):
    # The model with its own client: the SDK's process-wide defaults stay as other tests set them.
    client = openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    env = {key: os.environ[key] for key in ("MCP_MARKER", "MCP_NOTES")}
    params = {"command": sys.executable, "args": [mcp_servers.__file__, "stdio"], "env": env}
    async with NotesServer(params=params, name="notes", client_session_timeout_seconds=30) as server:
        agent = Agent(name="notes", instructions="Keep notes.", model=model, mcp_servers=[server])
        result = await Runner.run(agent, question)
    await client.close()  # before asyncio.run closes the loop its connections live on
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    return [result.final_output, *outputs]


def run(question):
    return asyncio.run(main(question))
"""

AGENTS_OUT = [
    "Noted.",
    {"type": "text", "text": '{\n  "topic": "ships",\n  "text": "note on ships"\n}'},
    {"type": "text", "text": '{\n  "receipt": "N-1"\n}'},
]
AGENTS_REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup", {"topic": "ships"})]),
    ModelReply(text=None, tool_calls=[("add_note", {"text": "ships late"})]),
    ModelReply(text="Noted."),
]


@pytest.fixture
def agents_lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[McpFrameworkLab]:
    if not HAS_AGENTS_MCP:
        pytest.skip("needs openai-agents")
    yield from _mcp_lab(pytester, monkeypatch, AGENTS_KIT)


def test_agents_sdk_stdio_server_recorded_replayed_without_the_server(agents_lab: McpFrameworkLab) -> None:
    lab = agents_lab
    lab.lab.llm.queue("chat", *AGENTS_REPLIES)
    lab.run("--agentreplay-record=all").assert_outcomes(passed=1)
    assert lab.output() == AGENTS_OUT
    assert (lab.starts(), lab.writes()) == (1, ["ships late"])
    calls = lab.calls()
    assert calls["notes/lookup"]["data"]["arguments"] == {"topic": "ships"}
    assert calls["notes/add_note"]["data"]["effect"] == "write"

    sent = len(lab.lab.llm.log)
    lab.lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert lab.output() == AGENTS_OUT
    assert (lab.starts(), lab.writes()) == (1, ["ships late"])

    _failure(lab.run(variant="changed_argument"), "notes/lookup(topic='Ships')")
    assert lab.starts() == 1
    assert len(lab.lab.llm.log) == sent
