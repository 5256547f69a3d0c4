"""The OpenAI Agents SDK exports its traces to OpenAI's backend on its own, from a background processor.
Replay sets a placeholder ``OPENAI_API_KEY`` so the SDKs construct without a key, which the exporter then
uses: its export is refused (nothing is sent) and listed as tolerated, and the test does not fail for it.
Inner sessions run in subprocesses: the SDK's trace provider and its exporter's cached key are global."""

from __future__ import annotations

import pytest

pytest.importorskip("agents.tracing")

from servers import LLMServer, ModelReply

KIT = r"""
import os

import openai
from agents import Agent, Runner, set_default_openai_client


def run(question):
    set_default_openai_client(
        openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0),
        use_for_tracing=False,
    )
    agent = Agent(name="orders", instructions="You answer order questions.", model="gpt-4o-mini")
    return Runner.run_sync(agent, question).final_output
"""

INNER_TEST = """
from agents.tracing import get_trace_provider

import agentkit


def test_support(agent_replay):
    assert agentkit.run("Where is A1?") == "Order A1 has shipped."
    get_trace_provider().force_flush()  # the export the SDK's processor would make a few seconds later
"""


def test_the_sdks_own_trace_export_is_refused_without_failing_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(agentkit=KIT, test_agent=INNER_TEST)
    for key in ("OPENAI_API_KEY", "OPENAI_AGENTS_DISABLE_TRACING"):
        monkeypatch.delenv(key, raising=False)
    llm = LLMServer().start()
    monkeypatch.setenv("LLM_URL", llm.url)
    try:
        llm.queue("responses", ModelReply(text="Order A1 has shipped."))
        args = ("-p", "no:cacheprovider", "-p", "no:randomly")
        pytester.runpytest_subprocess(*args, "--agentreplay-record=all").assert_outcomes(passed=1)
        sent = len(llm.log)
    finally:
        llm.stop()
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    assert len(llm.log) == sent
    result.stdout.fnmatch_lines(
        [
            "tolerated: 1 call refused without failing the test",
            "  refused, tolerated: POST https://api.openai.com/v1/traces/ingest* in test_agent.py::*",
        ]
    )
