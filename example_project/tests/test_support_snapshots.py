"""Decision snapshots: each scenario's decision trace (model decisions, tool calls, retrievals, policy
verdicts, approvals, effects, state transitions; volatile fields removed) as one reviewable JSON file
per test under ``__snapshots__/``. Update with ``--snapshot-update`` after an accepted change."""

from __future__ import annotations

from typing import Any

import pytest
from harness import SupportHarness
from support_agent import Provider

from pytest_agentreplay import AgentReplay

CASES = [
    pytest.param("order_status", "openai", True, id="order_status-openai-stream"),
    pytest.param("late_parcel", "anthropic", False, id="late_parcel-anthropic-plain"),
    pytest.param("small_refund", "openai", False, id="small_refund-openai-plain"),
    pytest.param("large_refund", "anthropic", True, id="large_refund-anthropic-stream"),
]


@pytest.mark.parametrize(("scenario", "provider", "stream"), CASES)
def test_decisions(
    support: SupportHarness,
    agent_replay: AgentReplay,
    decision_snapshot: Any,
    scenario: str,
    provider: Provider,
    stream: bool,
) -> None:
    support.run(scenario, provider=provider, stream=stream)

    assert _without_prompt_hash(agent_replay.decisions()) == decision_snapshot


def _without_prompt_hash(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace without each model call's ``request_hash``: the prompt carries today's date, so its hash
    changes every day a run is recorded afresh. The prompt itself is compared through the cassette."""
    for event in trace:
        data = event.get("data")
        if isinstance(data, dict):
            data.pop("request_hash", None)
    return trace
