"""An OpenAI Agents SDK agent (Responses API) with a hand-off and a function tool, no tool decorated by us:
recorded against the local LLM double in an inner pytest session, replayed offline, drifts named."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("agents.tracing")

from frameworks_lab import Lab, assert_drift, history, make_lab, preload, tool_history
from servers import ModelReply

preload("agents", "openai")

KIT = r"""
import os

import openai
from agents import Agent, Runner, function_tool, set_default_openai_client, set_trace_processors

set_trace_processors([])  # no export to the hosted trace backend (the network is closed anyway)
RAN = []


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def build():
    v = variant()
    set_default_openai_client(
        openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0),
        use_for_tracing=False,
    )

    def lookup_order(order_id: str) -> dict:
        RAN.append(("lookup_order", order_id))
        status = "in transit" if "changed_result" in v else "shipped"
        return {"order_id": order_id, "status": status}

    lookup_order.__doc__ = (
        "Find an order in the warehouse system." if "changed_description" in v else "Status of an order."
    )
    orders = Agent(
        name="orders", instructions="You answer order questions.", tools=[function_tool(lookup_order)],
        model="gpt-4o-mini",
    )
    billing = Agent(name="billing", instructions="You answer billing questions.", model="gpt-4o-mini")
    prompt = "You are a helpful and chatty triage agent." if "changed_prompt" in v else "You triage requests."
    return Agent(
        name="triage", instructions=prompt, model="gpt-4o-mini",
        handoffs=[billing, orders] if "changed_handoffs" in v else [orders, billing],
    )


def run(question):
    return Runner.run_sync(build(), question).final_output
"""

REPLIES = [
    ModelReply(text=None, tool_calls=[("transfer_to_orders", {})]),
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "A1"})]),
    ModelReply(text="Order A1 has shipped."),
]


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, KIT)


def test_record_replay_offline_and_drifts(lab: Lab) -> None:
    lab.record("responses", REPLIES)
    events = lab.events()
    assert tool_history(events) == [
        ("call", "lookup_order", {"order_id": "A1"}),
        ("result", "lookup_order", {"order_id": "A1", "status": "shipped"}),
    ]
    (handoff,) = [e for e in events if e["type"] == "state.update"]
    assert handoff["data"]["label"] == "handoff triage -> orders"
    types = [e["type"] for e in history(events)]
    assert types == ["model.call", "state.update", "model.call", "tool.call", "tool.result", "model.call"]

    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert len(lab.llm.log) == sent

    drifts = {
        "changed_result": [r"tool\.result lookup_order", r"in transit"],
        "changed_prompt": [r"model\.call", r"You are a helpful and chatty triage agent"],
        "changed_description": [r"model\.call", r"Find an order in the warehouse system"],
        "changed_handoffs": [r"model\.call", r"transfer_to_billing"],
    }
    for variant, patterns in drifts.items():
        assert_drift(lab.run(variant=variant), patterns, variant)
    assert len(lab.llm.log) == sent
