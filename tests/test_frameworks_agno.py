"""Agno agents (an OpenAI-compatible model): the tool executions in the history, recorded against the local
LLM double, replayed offline, a changed tool result drifts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("agno")

from frameworks_lab import Lab, assert_drift, make_lab, preload, tool_history
from servers import ModelReply

preload("agno", "agno.agent", "agno.models.openai", "openai")

KIT = r'''
import os

RAN = []


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def lookup_order(order_id: str) -> str:
    """Status of an order."""
    RAN.append(("lookup_order", order_id))
    status = "delayed" if "changed_result" in variant() else "shipped"
    return f"order {order_id.upper()} is {status}"


def run(question):
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    model = OpenAIChat(id="gpt-4o-mini", base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test")
    agent = Agent(model=model, tools=[lookup_order], telemetry=False)
    return str(agent.run(question).content)
'''

REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "a1"})]),
    ModelReply(text="Order A1 has shipped."),
]


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setenv("AGNO_TELEMETRY", "false")
    yield from make_lab(pytester, monkeypatch, KIT)


def test_tool_calls_recorded_replayed_and_drift(lab: Lab) -> None:
    lab.record("chat", REPLIES)
    assert tool_history(lab.events()) == [
        ("call", "lookup_order", {"order_id": "a1"}),
        ("result", "lookup_order", "order A1 is shipped"),
    ]
    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert len(lab.llm.log) == sent
    assert_drift(
        lab.run(variant="changed_result"), [r"tool\.result lookup_order", r"shipped.*delayed"], "result"
    )
