"""Children that cannot reach a network are not worth a warning; the others are counted in one line, with
advice only for a setting not in use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from servers import LLMServer, ModelReply

from pytest_agentreplay.guard.children import reaches_no_network
from pytest_agentreplay.guard.session_namespace import ENTERED, OFF, UNAVAILABLE, Isolation
from pytest_agentreplay.shell.fixture_guard import ISOLATE_ADVICE, UNREACHED_CHILD, guard_summary

AGENT = """
import os
import subprocess
import sys

import openai


def test_openai_agent(agent_replay):
    # openai's client asks platform.platform(), which runs `uname -p`; agents run git for their context.
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "Fine."
    subprocess.run(["uname", "-a"], check=True, capture_output=True)
    subprocess.run(["git", "-C", os.getcwd(), "status"], capture_output=True)
"""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_URL", llm.url)
        yield llm


@pytest.mark.parametrize("isolate", ["off", "auto"])
def test_a_replayed_openai_agent_prints_no_child_warning(
    pytester: pytest.Pytester, server: LLMServer, isolate: str
) -> None:
    pytester.makepyfile(test_agent=AGENT)
    server.queue("chat", ModelReply(text="Fine."))
    # A process of its own: platform's cache of `uname -p` is empty, as in a user's session.
    pytester.runpytest_subprocess("--agentreplay-record=all").assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(f"--agentreplay-isolate={isolate}")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "not reached by the Python guard" not in out, out
    assert "did not run the guard" not in out
    assert len(server.log) == 1


@pytest.mark.parametrize(
    ("command", "local"),
    [
        ("uname -p", True),
        ("/usr/bin/uname -a", True),
        ("git status", True),
        ("git -C /work rev-parse HEAD", True),
        ("git -c http.proxy=x fetch origin", False),
        ("git -C /work push", False),
        ("curl https://example.com", False),
        ("/usr/bin/python3 -S -c import urllib.request", False),
        ("", False),
    ],
)
def test_commands_that_cannot_reach_a_network(command: str, local: bool) -> None:
    assert reaches_no_network(command) is local


def test_children_are_counted_in_one_line_with_advice_only_for_a_setting_not_in_use() -> None:
    notes = {
        f"{UNREACHED_CHILD}{pid}": f"node agent.js (pid {pid}, test_a.py::test_{pid})" for pid in range(5)
    }
    notes["native grpc"] = "grpcio's C core was loaded while tests replayed"
    lines = guard_summary(notes, Isolation("off", OFF))
    assert lines[0] == "grpcio's C core was loaded while tests replayed"
    assert lines[1].startswith("5 child process(es) did not run the guard")
    assert lines[1].endswith("; ...") and lines[1].count("node agent.js") == 3
    assert lines[2] == ISOLATE_ADVICE
    tried = guard_summary(notes, Isolation("auto", UNAVAILABLE, "no user namespaces"))
    assert ISOLATE_ADVICE not in tried
    assert "--agentreplay-isolate=auto is set but the session is not isolated" in tried[-1]
    assert guard_summary(notes, Isolation("auto", ENTERED)) == []
