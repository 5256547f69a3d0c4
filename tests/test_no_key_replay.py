"""Replay needs no key: an unset SDK credential is a placeholder while a test replays, and only then."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
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


HELD = """
import json
import os

import pytest

NAMES = {names!r}
PLACEHOLDER = {placeholder!r}


def seen(label):
    values = {{n: "P" if os.environ.get(n) == PLACEHOLDER else os.environ.get(n) for n in NAMES}}
    with open(os.environ["ENV_LOG"], "a") as log:
        log.write(json.dumps([label, {{n: v for n, v in values.items() if v is not None}}]) + "\\n")


@pytest.mark.agentreplay
def test_a():
    seen("a")
    os.environ.pop("OPENAI_API_KEY", None)  # removed by the test and left removed
    os.environ["CO_API_KEY"] = "set-by-a"  # the test's own value, left set


@pytest.mark.agentreplay
def test_b():
    seen("b")
    os.environ["MISTRAL_API_KEY"] = ""  # emptied by the test


def test_plain():
    seen("plain")


@pytest.mark.agentreplay(mode="model-comparison")
def test_live():
    seen("live")


@pytest.mark.agentreplay
def test_c():
    seen("c")
"""


def test_placeholders_held_between_replaying_tests_are_what_each_test_would_get_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session keeps the placeholders from one replaying test to the next: each test still sees every
    unset credential as a placeholder and every value a test left as it left it, and a test that gets none
    (one that does not replay, a model-comparison) sees none."""
    names = list(CREDENTIAL_VARIABLES)
    pytester.makepyfile(test_held=HELD.format(names=names, placeholder=PLACEHOLDER))
    _without_credentials(monkeypatch)
    log = pytester.path / "env.log"
    monkeypatch.setenv("ENV_LOG", str(log))
    try:
        pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=5)
        os.environ.pop("CO_API_KEY", None)
        os.environ.pop("MISTRAL_API_KEY", None)
        log.write_text("")
        result = pytester.runpytest("-p", "no:randomly")
        result.assert_outcomes(passed=5)
        after = {name: os.environ.get(name) for name in names if name in os.environ}
    finally:
        os.environ.pop("CO_API_KEY", None)
        os.environ.pop("MISTRAL_API_KEY", None)
    seen = {label: values for label, values in map(json.loads, log.read_text().splitlines())}
    every = dict.fromkeys(names, "P")
    assert seen["a"] == every
    assert seen["b"] == {**every, "CO_API_KEY": "set-by-a"}
    assert seen["plain"] == {"CO_API_KEY": "set-by-a", "MISTRAL_API_KEY": ""}
    assert seen["live"] == {"CO_API_KEY": "set-by-a", "MISTRAL_API_KEY": ""}
    assert seen["c"] == {**every, "CO_API_KEY": "set-by-a"}
    # After the session, only the value a test set (c got a placeholder for the emptied one, removed).
    assert after == {"CO_API_KEY": "set-by-a"}


_STEPS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(CREDENTIAL_VARIABLES),
            st.sampled_from([None, "", PLACEHOLDER, "sk-the-test's"]),
        ),
        max_size=4,
    ),
    max_size=6,
)
_START = st.dictionaries(st.sampled_from(CREDENTIAL_VARIABLES), st.sampled_from(["", "sk-real", PLACEHOLDER]))


@given(start=_START, tests=_STEPS)
def test_held_placeholders_match_removing_and_setting_them_at_every_test(
    start: dict[str, str], tests: list[list[tuple[str, str | None]]]
) -> None:
    """One object providing test after test (the session's) leaves each test the environment a fresh one
    would (removed after the test before, provided anew), and the same environment once removed."""
    held_env, fresh_env = dict(start), dict(start)
    held = PlaceholderCredentials(held_env)
    for changes in tests:
        fresh = PlaceholderCredentials(fresh_env)
        assert held.provide() == fresh.provide()
        assert held_env == fresh_env
        for name, value in changes:  # what the test does to the environment
            for env in (held_env, fresh_env):
                if value is None:
                    env.pop(name, None)
                else:
                    env[name] = value
        fresh.remove()
    held.remove()
    assert held_env == fresh_env


BROKEN_GUARD = """
import json
import os

import pytest

from pytest_agentreplay.shell import fixture_guard

NAMES = {names!r}


def broken():
    raise RuntimeError("no guard today")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if item.name == "test_broken":
        item.stash_live_children = fixture_guard.live_children
        fixture_guard.live_children = broken  # the fixture guard fails as it starts
    return (yield)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    if item.name == "test_broken":
        fixture_guard.live_children = item.stash_live_children
        with open(os.environ["ENV_LOG"], "w") as log:
            json.dump([n for n in NAMES if n in os.environ], log)
"""


def test_a_set_up_failing_before_its_guard_keeps_no_placeholder_of_the_test_before(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(BROKEN_GUARD.format(names=list(CREDENTIAL_VARIABLES)))
    pytester.makepyfile(
        test_broken="""
import pytest

@pytest.mark.agentreplay
def test_first():
    pass

@pytest.mark.agentreplay
def test_broken():
    pass
"""
    )
    _without_credentials(monkeypatch)
    log = pytester.path / "env.json"
    monkeypatch.setenv("ENV_LOG", str(log))
    pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    # In a process of its own: the conftest patches the very module the plugin's guard runs.
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*RuntimeError: no guard today*"])
    assert json.loads(log.read_text()) == []
