"""The support scenarios on Pydantic AI (OpenAI and Anthropic models), no tool decorated for the plugin.

Recorded with ``--agentreplay-record=all`` against the local services, replayed with nothing listening.
The tool executions come from the plugin's Pydantic AI adapter (its OpenTelemetry instrumentation and the
``ReplayTools`` capability, which also serves ``lookup_order`` and ``search_kb`` from the cassette).
"""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("opentelemetry.sdk")

from framework_agents.pydantic_ai_support import Provider, build_agent, handle
from framework_harness import API_KEYS, backoffice_for, tool_calls
from services import SCENARIOS, url_for

from pytest_agentreplay import AgentReplay

PROVIDERS: list[Provider] = ["openai", "anthropic"]


def run(replay: AgentReplay, scenario: str, provider: Provider) -> str:
    spec = SCENARIOS[scenario]
    with backoffice_for(replay, provider, scenario) as backoffice:
        agent = build_agent(provider, model_base_url=url_for(provider), api_key=API_KEYS[provider])
        conversation = f"conv-{scenario}-{provider}-pydantic-ai"
        return handle(
            agent,
            spec.message,
            backoffice=backoffice,
            customer_id=spec.customer_id,
            conversation_id=conversation,
        )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_order_status(agent_replay: AgentReplay, provider: Provider) -> None:
    answer = run(agent_replay, "order_status", provider)

    assert "JD014600003828" in answer
    assert tool_calls(agent_replay) == [("lookup_order", {"order_id": "A1001"})]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_late_parcel_opens_ticket(agent_replay: AgentReplay, provider: Provider) -> None:
    answer = run(agent_replay, "late_parcel", provider)

    assert "TCK-1001" in answer
    assert [name for name, _ in tool_calls(agent_replay)] == ["lookup_order", "search_kb", "create_ticket"]
    results = [e for e in agent_replay.events if e.type == "tool.result"]
    assert all("error" not in e.data for e in results)
