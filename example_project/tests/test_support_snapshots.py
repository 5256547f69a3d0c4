"""Decision snapshots: each scenario's decision trace (model decisions, tool calls, retrievals, policy
verdicts, approvals, effects, state transitions; volatile fields removed) as one reviewable JSON file
per test under ``__snapshots__/``. Update with ``--snapshot-update`` after an accepted change."""

from __future__ import annotations

from typing import Any

import pytest
from harness import SupportHarness
from support_agent import Provider

from pytest_agentreplay.handle import AgentReplay

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

    assert agent_replay.decisions() == decision_snapshot
