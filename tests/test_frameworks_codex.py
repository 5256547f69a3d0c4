"""OpenAI's Codex SDK: the real ``codex`` binary of its ``openai-codex-cli-bin`` dependency, recorded
against the local LLM double (tests/servers.py, the Responses API on 127.0.0.1) in an inner pytest session,
then replayed with no codex process started; a changed prompt drifts."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import pytest

pytest.importorskip("openai_codex")

from frameworks_lab import Lab, assert_drift, make_lab, preload, tool_history
from openai_codex.client import _installed_codex_path
from servers import ModelReply

preload("openai_codex")

KIT = r"""
import os
import tempfile

from openai_codex import Codex, CodexConfig


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def run(work):
    home = tempfile.mkdtemp(prefix="codex-home-")
    provider = (
        f'model_providers.local={{name="local", base_url="{os.environ["LLM_URL"]}/v1", '
        'wire_api="responses", env_key="OPENAI_API_KEY"}'
    )
    config = CodexConfig(
        codex_bin=os.environ["CLI_WRAPPER"],
        cwd=work,
        env={"OPENAI_API_KEY": "sk-test", "CODEX_HOME": home, "HOME": home},
        config_overrides=('model_provider="local"', provider),
    )
    question = "Show me notes.txt."
    if "changed_prompt" in variant():
        question = "Print notes.txt."
    with Codex(config) as codex:
        thread = codex.thread_start(model="gpt-test", cwd=work)
        return thread.run(question).final_response
"""

INNER_TEST = """
import os
from pathlib import Path

import agentkit

def test_support(agent_replay):
    work = Path(os.environ["WORK_DIR"])
    (work / "notes.txt").write_text("hello notes\\n")
    assert agentkit.run(str(work)) == "It says hello notes."
"""


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    work = pytester.path / "work"
    work.mkdir()
    starts = pytester.path / "cli-starts.log"
    wrapper = pytester.path / "codex-wrapper"
    # Logs each start of the binary, then runs the one the SDK installs.
    wrapper.write_text(f'#!/bin/sh\necho started >> "{starts}"\nexec "{_installed_codex_path()}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    for lab in make_lab(pytester, monkeypatch, KIT, WORK_DIR=str(work), CLI_WRAPPER=str(wrapper)):
        pytester.makepyfile(test_agent=INNER_TEST)
        yield lab


def _starts(lab: Lab) -> int:
    log = lab.pytester.path / "cli-starts.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_record_replay_without_the_binary_and_drift(lab: Lab) -> None:
    replies = [
        ModelReply(text=None, tool_calls=[("exec_command", {"cmd": "cat notes.txt"})]),
        ModelReply(text="It says hello notes."),
    ]
    lab.record("responses", replies)
    assert _starts(lab) == 1
    assert {r.path for r in lab.llm.log} == {"/v1/responses"}
    sent = len(lab.llm.log)
    events = lab.events()
    calls = [e for e in events if e["type"] == "model.call"]
    assert len(calls) == 2
    assert calls[0]["data"]["model"] == "gpt-test"
    assert calls[0]["input_ref"]["inline"]["prompts"] == [[{"type": "text", "text": "Show me notes.txt."}]]
    history = tool_history(events)
    assert [name for kind, name, _ in history if kind == "call"] == ["command"]
    effect = next(e for e in events if e["type"] == "effect")
    assert "hello notes" in effect["output_ref"]["inline"]["aggregatedOutput"]
    turns = [e["data"] for e in events if e["type"] == "state.update" and e["data"]["node"] == "codex turn"]
    assert [t["text"] for t in turns] == ["It says hello notes."]

    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert _starts(lab) == 1
    assert len(lab.llm.log) == sent
    assert_drift(lab.run(variant="changed_prompt"), [r"model\.call", r"Print notes\.txt"], "changed_prompt")
    assert _starts(lab) == 1

    verify = lab.pytester.run("python", "-m", "pytest_agentreplay.cli", "verify", str(lab.cassette))
    assert verify.ret == 0, verify.stdout.str() + verify.stderr.str()
