"""The support scenarios on LangGraph over langchain-openai, no tool decorated for the plugin.

Recorded with ``--agentreplay-record=all`` against the local services, replayed with nothing listening.
The plugin's LangChain adapter records every tool execution and, per node execution, a ``state.update``
with the hash of the graph state after that step.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

import httpx2
from framework_agents.langgraph_support import build_graph, handle
from framework_harness import API_KEYS, backoffice_for, node_steps, tool_calls
from services import SCENARIOS, url_for

from pytest_agentreplay import AgentReplay


def run(replay: AgentReplay, scenario: str) -> str:
    spec = SCENARIOS[scenario]
    # A client of its own: a pooled connection must not outlive the scripted model server of another test.
    with backoffice_for(replay, "openai", scenario) as backoffice, httpx2.Client(timeout=30) as http:
        graph = build_graph(
            model_base_url=url_for("openai"),
            api_key=API_KEYS["openai"],
            backoffice=backoffice,
            customer_id=spec.customer_id,
            conversation_id=f"conv-{scenario}-openai-langgraph",
            http_client=http,
        )
        return handle(graph, spec.message)


def test_order_status(agent_replay: AgentReplay) -> None:
    answer = run(agent_replay, "order_status")

    assert "JD014600003828" in answer
    assert tool_calls(agent_replay) == [("lookup_order", {"order_id": "A1001"})]
    if agent_replay.recording:  # in replay the recorded transitions are compared by the plugin
        assert node_steps(agent_replay) == ["intake", "agent", "tools", "agent", "wrapup"]


def test_late_parcel_opens_ticket(agent_replay: AgentReplay) -> None:
    answer = run(agent_replay, "late_parcel")

    assert "TCK-1001" in answer
    assert [name for name, _ in tool_calls(agent_replay)] == ["lookup_order", "search_kb", "create_ticket"]
    if agent_replay.recording:
        steps = node_steps(agent_replay)
        assert steps[:2] == ["intake", "agent"] and steps[-1] == "wrapup"
    hashes = [e.state_hash for e in agent_replay.events if e.type == "state.update"]
    assert all(h and len(h) == 64 for h in hashes)
