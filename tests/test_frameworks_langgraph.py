"""A LangGraph agent over langchain-openai, no tool decorated by us: recorded against the local LLM double
in an inner pytest session, replayed offline, every node transition with its state hash in the history,
and each drift (tool argument, system prompt, tool description, a removed node) named in the failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

from frameworks_lab import Lab, assert_drift, history, make_lab, preload, tool_history
from servers import ModelReply

preload("langchain_core", "langchain_openai", "langgraph.graph", "langgraph.prebuilt", "openai")

KIT = r'''
import os
from typing import Annotated, TypedDict

from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from pytest_agentreplay.frameworks.langchain import replay_tool_call

RAN = []


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


class State(TypedDict):
    messages: Annotated[list, add_messages]
    policy: dict


@tool
def get_policy(topic: str) -> dict:
    """The support policy on a topic."""
    RAN.append(("get_policy", topic))
    return {"topic": topic, "refund_days": 30}


def lookup_order(order_id: str) -> dict:
    RAN.append(("lookup_order", order_id))
    return {"order_id": order_id, "status": "shipped", "carrier": "DHL"}


def build():
    v = variant()
    lookup_order.__doc__ = (
        "Find an order in the warehouse system." if "changed_description" in v else "Status of an order."
    )
    lookup = tool(lookup_order)
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0
    ).bind_tools([lookup])
    prompt = "You are a support agent."
    if "changed_prompt" in v:
        prompt = "You are a helpful and chatty support agent."

    def policy(state):
        topic = "LATE DELIVERY" if "changed_argument" in v else "late delivery"
        return {"policy": get_policy.invoke({"topic": topic})}

    def agent(state):
        return {"messages": [model.invoke([SystemMessage(prompt), *state["messages"]])]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup], wrap_tool_call=replay_tool_call(reads={"lookup_order"})))
    if "removed_node" in v:
        graph.add_edge(START, "agent")
    else:
        graph.add_node("policy", policy)
        graph.add_edge(START, "policy")
        graph.add_edge("policy", "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def run(question):
    state = build().invoke({"messages": [("user", question)], "policy": {}})
    return state["messages"][-1].content
'''

REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "A1"})]),
    ModelReply(text="Order A1 has shipped with DHL."),
]


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, KIT)


def test_record_replay_offline_node_transitions_and_drifts(lab: Lab) -> None:
    lab.record("chat", REPLIES)
    events = lab.events()
    assert tool_history(events) == [
        ("call", "get_policy", {"topic": "late delivery"}),
        ("result", "get_policy", {"topic": "late delivery", "refund_days": 30}),
        ("call", "lookup_order", {"order_id": "A1"}),
        ("result", "lookup_order", '{"order_id": "A1", "status": "shipped", "carrier": "DHL"}'),
    ]
    steps = [e for e in events if e["type"] == "state.update"]
    assert [(s["data"]["node"], s["data"]["step"], s["data"]["updated"]) for s in steps] == [
        ("policy", 1, ["policy"]),
        ("agent", 2, ["messages"]),
        ("tools", 3, ["messages"]),
        ("agent", 4, ["messages"]),
    ]
    assert all(len(s["state_hash"]) == 64 for s in steps)
    assert len({s["state_hash"] for s in steps}) == 4  # every step changed the state
    order = [(e["type"], (e.get("tool") or {}).get("name") or e["data"].get("node")) for e in history(events)]
    assert order == [
        ("tool.call", "get_policy"), ("tool.result", "get_policy"), ("state.update", "policy"),
        ("model.call", None), ("state.update", "agent"),
        ("tool.call", "lookup_order"), ("tool.result", "lookup_order"), ("state.update", "tools"),
        ("model.call", None), ("state.update", "agent"),
    ]  # fmt: skip

    # Replay with nothing listening: 0 requests; the read tool is served from the cassette.
    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert len(lab.llm.log) == sent
    assert ("lookup_order", "A1") not in lab.kit.RAN

    drifts = {
        "changed_argument": [
            r"tool\.call get_policy\n\s+data\.arguments\.topic: \"late delivery\" -> \"LATE"
        ],
        "changed_prompt": [r"model\.call", r"You are a helpful and chatty support agent"],
        "changed_description": [r"model\.call", r"Find an order in the warehouse system"],
        "removed_node": [
            r"tool\.call get_policy\n\s+missing: recorded, not replayed",
            r"state\.update policy",
        ],
    }
    for variant, patterns in drifts.items():
        assert_drift(lab.run(variant=variant), patterns, variant)
