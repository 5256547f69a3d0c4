"""Claude Agent SDK agents: the real ``claude`` CLI from the SDK's wheel, recorded against the local LLM
double (tests/servers.py, Anthropic's Messages API on 127.0.0.1) in an inner pytest session, then replayed
with no CLI process started; a changed permission verdict and a changed prompt drift."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

import claude_agent_sdk as sdk
from frameworks_lab import Lab, assert_drift, make_lab, preload, tool_history
from servers import ModelReply

preload("claude_agent_sdk")

BUNDLED = Path(sdk.__file__).parent / "_bundled" / "claude"
if not BUNDLED.exists():
    pytest.skip("this claude-agent-sdk wheel bundles no claude CLI", allow_module_level=True)

KIT = r'''
import asyncio
import os
import tempfile

from claude_agent_sdk import (
    ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, PermissionResultAllow, PermissionResultDeny,
    create_sdk_mcp_server, query, tool,
)

RAN = []  # SDK MCP tool bodies that ran (a served one does not)


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


@tool("add", "Add two numbers", {"a": int, "b": int})
async def add(args):
    RAN.append(("add", args["a"], args["b"]))
    return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}


async def can_use_tool(name, tool_input, context):
    if name == "Write" or (name == "Edit" and "deny_edit" in variant()):
        return PermissionResultDeny(message=f"{name} is not allowed here")
    return PermissionResultAllow()


async def check_bash(hook_input, tool_use_id, context):
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}


def options(work):
    home = tempfile.mkdtemp(prefix="claude-home-")
    env = {
        "ANTHROPIC_BASE_URL": os.environ["LLM_URL"],
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CONFIG_DIR": home,
        "HOME": home,
    }
    return ClaudeAgentOptions(
        cwd=work,
        env=env,
        cli_path=os.environ["CLI_WRAPPER"],
        model="claude-sonnet-4-5",
        can_use_tool=can_use_tool,
        mcp_servers={"calc": create_sdk_mcp_server("calc", tools=[add])},
        hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[check_bash])]},
    )


async def _run(work, question):
    texts = []

    async def prompt():
        yield {"type": "user", "message": {"role": "user", "content": question}}

    async for message in query(prompt=prompt(), options=options(work)):
        for block in getattr(message, "content", None) or []:
            if getattr(block, "text", None):
                texts.append(block.text)
    return "".join(texts)


async def _chat(work, questions):
    """ClaudeSDKClient: one CLI session, a prompt per question, the text of each answer."""
    answers = []
    async with ClaudeSDKClient(options=options(work)) as client:
        for question in questions:
            await client.query(question)
            texts = []
            async for message in client.receive_response():
                for block in getattr(message, "content", None) or []:
                    if getattr(block, "text", None):
                        texts.append(block.text)
            answers.append("".join(texts))
    return answers


def run(work):
    question = "Read notes.txt, fix todo.txt, then say hi."
    if "changed_prompt" in variant():
        question = "Read notes.txt, fix todo.txt, then say hello."
    if os.environ.get("CLIENT"):
        return " / ".join(asyncio.run(_chat(work, [question, "Anything else?"])))
    return asyncio.run(_run(work, question))
'''

INNER_TEST = """
import os
from pathlib import Path

import agentkit

def test_support(agent_replay):
    work = Path(os.environ["WORK_DIR"])
    (work / "notes.txt").write_text("hello notes\\n")
    (work / "todo.txt").write_text("old line\\n")
    agentkit.RAN.clear()
    assert agentkit.run(str(work)) == "All done."
"""


def _replies(work: Path) -> list[ModelReply]:
    notes, todo = str(work / "notes.txt"), str(work / "todo.txt")
    edit = {"file_path": todo, "old_string": "old line", "new_string": "new line"}
    return [
        ModelReply(text=None, tool_calls=[("Read", {"file_path": notes})]),
        ModelReply(text=None, tool_calls=[("Read", {"file_path": todo})]),
        ModelReply(text=None, tool_calls=[("Edit", edit)]),
        ModelReply(text=None, tool_calls=[("Bash", {"command": "echo hi", "description": "say hi"})]),
        ModelReply(text=None, tool_calls=[("mcp__calc__add", {"a": 2, "b": 3})]),
        ModelReply(text=None, tool_calls=[("Write", {"file_path": str(work / "x.txt"), "content": "x"})]),
        ModelReply(text="All done."),
    ]


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    work = pytester.path / "work"
    work.mkdir()
    starts = pytester.path / "cli-starts.log"
    wrapper = pytester.path / "claude-wrapper"
    # Logs each start of the CLI, then runs the one the SDK's wheel bundles.
    wrapper.write_text(f'#!/bin/sh\necho started >> "{starts}"\nexec "{BUNDLED}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    pytester.makepyfile(test_agent=INNER_TEST)
    for lab in make_lab(pytester, monkeypatch, KIT, WORK_DIR=str(work), CLI_WRAPPER=str(wrapper)):
        pytester.makepyfile(test_agent=INNER_TEST)
        yield lab


def _starts(lab: Lab) -> int:
    log = lab.pytester.path / "cli-starts.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e.get("data", {}).get("transport") == "claude-code"]


def test_record_replay_without_the_cli_and_drifts(lab: Lab) -> None:
    work = Path(os.environ["WORK_DIR"])
    lab.record("messages", _replies(work))
    assert _starts(lab) == 1
    assert (work / "todo.txt").read_text() == "new line\n"
    # Only the Messages API on the local server: no start-up, telemetry or update call.
    assert {r.path for r in lab.llm.log} == {"/v1/messages?beta=true"}
    sent = len(lab.llm.log)
    assert sent == 7
    events = lab.events()
    calls = [e for e in events if e["type"] == "model.call"]
    assert len(calls) == 7
    assert {c["data"]["provider"] for c in calls} == {"anthropic"}
    assert calls[0]["data"]["model"] == "claude-sonnet-4-5"
    assert calls[0]["input_ref"]["inline"]["prompts"] == ["Read notes.txt, fix todo.txt, then say hi."]
    assert calls[-1]["data"]["decision"]["text"] == "All done."
    history = tool_history(events)
    assert [(kind, name) for kind, name, _ in history if kind == "call"] == [
        ("call", "Read"), ("call", "Read"), ("call", "Edit"), ("call", "Bash"), ("call", "calc/add"),
        ("call", "Write"),
    ]  # fmt: skip
    assert ("result", "Write", "Write is not allowed here") in history
    effects = {e["effect"]["kind"]: e["output_ref"]["inline"] for e in events if e["type"] == "effect"}
    assert list(effects) == ["Edit", "Bash", "calc/add"]  # writes; the Reads are tool.results
    assert effects["calc/add"] == {"content": [{"type": "text", "text": "5"}], "isError": False}
    approvals = [(e["data"]["subject"], e["data"]["status"]) for e in events if e["type"] == "approval"]
    assert approvals == [("Edit", "granted"), ("mcp__calc__add", "granted"), ("Write", "denied")]
    hooks = [e["data"] for e in events if e["type"] == "policy.decision"]
    assert [(h["policy"], h["tool"], h["verdict"]) for h in hooks] == [("PreToolUse hook", "Bash", "allow")]
    results = [e for e in events if e["type"] == "state.update"]
    assert results[0]["data"]["cost_usd"] > 0
    assert "model.call" in _types(events) and "approval" in _types(events)

    # Replay: no CLI started, no request sent, the SDK MCP tool served, the files untouched.
    lab.llm.stop()
    (work / "todo.txt").write_text("old line\n")
    lab.run().assert_outcomes(passed=1)
    assert _starts(lab) == 1
    assert len(lab.llm.log) == sent
    assert lab.kit.RAN == []
    assert (work / "todo.txt").read_text() == "old line\n"

    assert_drift(lab.run(variant="deny_edit"), [r"approval Edit", r"granted.*denied"], "deny_edit")
    assert_drift(lab.run(variant="changed_prompt"), [r"model\.call", r"say hello"], "changed_prompt")
    assert _starts(lab) == 1

    verify = lab.pytester.run("python", "-m", "pytest_agentreplay.cli", "verify", str(lab.cassette))
    assert verify.ret == 0, verify.stdout.str() + verify.stderr.str()
    assert json.loads(lab.cassette.read_text())["event_count"] == len(events)


def test_client_session_with_two_prompts(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """ClaudeSDKClient: two prompts in one CLI session, recorded and replayed without the CLI."""
    monkeypatch.setenv("CLIENT", "1")
    lab.pytester.makepyfile(
        test_agent=INNER_TEST.replace('== "All done."', '== "Reading.Read it. / All done."')
    )
    work = Path(os.environ["WORK_DIR"])
    replies = [
        ModelReply(text="Reading.", tool_calls=[("Read", {"file_path": str(work / "notes.txt")})]),
        ModelReply(text="Read it."),
        ModelReply(text="All done."),
    ]
    lab.record("messages", replies)
    assert _starts(lab) == 1
    events = lab.events()
    prompts = [
        e["input_ref"]["inline"]["prompts"] for e in events if e["type"] == "model.call" and "input_ref" in e
    ]
    assert prompts == [["Read notes.txt, fix todo.txt, then say hi."], ["Anything else?"]]
    nodes = [e["data"]["node"] for e in events if e["type"] == "state.update"]
    assert nodes[:2] == ["claude-code result"] * 2  # then what came before the session closed, if anything

    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert _starts(lab) == 1
    assert len(lab.llm.log) == sent


def test_sandbox_runs_the_cli_against_the_tests_services(lab: Lab) -> None:
    """Sandbox mode runs the CLI for real: its model calls reach the test's own server (a sandbox host), its
    tools run, and the history it produces is compared with the recording."""
    work = Path(os.environ["WORK_DIR"])
    lab.record("messages", _replies(work))
    sent = len(lab.llm.log)
    (work / "todo.txt").write_text("old line\n")
    host = lab.llm.url.split("//", 1)[1].rstrip("/")
    lab.pytester.makeconftest(
        "import pytest\n\n@pytest.fixture\ndef agentreplay_config():\n"
        f"    return {{'sandbox_hosts': [{host!r}]}}\n"
    )
    lab.llm.queue("messages", *_replies(work))
    result = lab.run("--agentreplay-mode=sandbox")
    result.assert_outcomes(passed=1)
    assert _starts(lab) == 2, "sandbox starts the CLI"
    assert len(lab.llm.log) == 2 * sent, "the CLI's model calls went to the test's server"
    assert (work / "todo.txt").read_text() == "new line\n", "the CLI's Edit ran"
    assert lab.kit.RAN == [("add", 2, 3)], "the SDK MCP tool's body ran"
    # The live CLI's history is compared: its ids and timings differ from the recording's, its decisions
    # do not, and a changed permission verdict still drifts.
    (work / "todo.txt").write_text("old line\n")
    lab.llm.queue("messages", *_replies(work))
    drifted = lab.run("--agentreplay-mode=sandbox", variant="deny_edit")
    assert_drift(drifted, [r"approval Edit", r"granted.*denied"], "deny_edit in sandbox")
    assert _starts(lab) == 3
