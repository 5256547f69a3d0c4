"""Replay needs no key: an unset SDK credential is a placeholder while a test replays, and only then."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from servers import LLMServer, ModelReply

from pytest_agentreplay.core.placeholder_credentials import (
    CREDENTIAL_VARIABLES,
    PLACEHOLDER,
    PlaceholderCredentials,
)

AGENTS = """
import os

import anthropic
import openai
import pytest


@pytest.fixture
def claude():
    # Built in a fixture, before the test body: the placeholder is there from the start of set-up.
    return anthropic.Anthropic(base_url=os.environ["LLM_URL"], max_retries=0)


def test_openai_agent(agent_replay):
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "Fine."


def test_claude_agent(claude, agent_replay):
    with claude.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        assert stream.get_final_message().content[0].text == "Fine."


def test_after_them():
    # A test that does not replay sees the environment as it was.
    assert [name for name in {names!r} if name in os.environ] == []
"""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_URL", llm.url)
        yield llm


def _without_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_replay_with_no_credential_variable_set(
    pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_agents=AGENTS.replace("{names!r}", repr(list(CREDENTIAL_VARIABLES))))
    _without_credentials(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-recording")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-recording")
    server.queue("chat", ModelReply(text="Fine."))
    server.queue("messages", ModelReply(text="Fine."))
    recorded = pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all", "-k", "openai or claude")
    recorded.assert_outcomes(passed=2, deselected=1)
    assert len(server.log) == 2
    _without_credentials(monkeypatch)
    server.stop()
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*2 replayed, 0 recorded, 0 drifted*"])
    assert not [name for name in CREDENTIAL_VARIABLES if name in os.environ]
    for path in (pytester.path / "cassettes").rglob("*"):
        if path.is_file():
            assert PLACEHOLDER.encode() not in path.read_bytes()


def test_recording_never_invents_a_credential(
    pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_agents=AGENTS.replace("{names!r}", repr(list(CREDENTIAL_VARIABLES))))
    _without_credentials(monkeypatch)
    result = pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all", "-k", "openai")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*OPENAI_API_KEY*"])
    assert server.log == []


def test_a_variable_the_environment_sets_is_left_alone() -> None:
    env = {"OPENAI_API_KEY": "sk-real", "ANTHROPIC_API_KEY": ""}
    credentials = PlaceholderCredentials(env)
    names = credentials.provide()
    assert "OPENAI_API_KEY" not in names and "ANTHROPIC_API_KEY" in names
    assert env["OPENAI_API_KEY"] == "sk-real"
    assert env["ANTHROPIC_API_KEY"] == env["CO_API_KEY"] == PLACEHOLDER
    env["CO_API_KEY"] = "set-by-the-test"
    credentials.remove()
    assert env == {"OPENAI_API_KEY": "sk-real", "CO_API_KEY": "set-by-the-test"}
