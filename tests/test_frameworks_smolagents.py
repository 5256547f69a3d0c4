"""smolagents agents (ToolCallingAgent over an OpenAI-compatible model): the tool calls in the history,
recorded against the local LLM double, replayed offline, a changed tool argument drifts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("smolagents")

from frameworks_lab import Lab, assert_drift, make_lab, preload, tool_history
from servers import ModelReply

preload("smolagents", "openai")

KIT = r'''
import os

RAN = []


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def run(question):
    # Imported inside the agent: the adapter hooks in however late the framework is imported.
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def lookup_order(order_id: str) -> dict:
        """Status of an order.

        Args:
            order_id: the order's id.
        """
        order_id = order_id.lower() if "changed_argument" in variant() else order_id.upper()
        RAN.append(("lookup_order", order_id))
        return {"order_id": order_id, "status": "shipped"}

    url = os.environ["LLM_URL"] + "/v1"
    model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=url, api_key="sk-test")
    agent = ToolCallingAgent(tools=[lookup_order], model=model, max_steps=3, verbosity_level=0)
    return str(agent.run(question))
'''

REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "a1"})]),
    ModelReply(text=None, tool_calls=[("final_answer", {"answer": "Order A1 has shipped."})]),
]


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, KIT)


def test_tool_calls_recorded_replayed_and_drift(lab: Lab) -> None:
    lab.record("chat", REPLIES)
    history = tool_history(lab.events())
    assert history == [
        ("call", "lookup_order", {"order_id": "a1"}),
        ("result", "lookup_order", {"order_id": "A1", "status": "shipped"}),
        ("call", "final_answer", {"answer": "Order A1 has shipped."}),
        ("result", "final_answer", "Order A1 has shipped."),
    ]
    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert len(lab.llm.log) == sent
    assert_drift(lab.run(variant="changed_argument"), [r"tool\.result lookup_order", r"A1.*a1"], "argument")
