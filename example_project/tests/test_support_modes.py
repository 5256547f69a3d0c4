"""The other replay modes on the support agent: model-comparison against a challenger model, and the
audit view of a recorded run.

Each test records like any other (``--agentreplay-record=all``); the mode applies to its replay.
A mode the installed plugin does not implement yet is skipped at run time with the reason.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import CHALLENGER_MODEL, SupportHarness

from pytest_agentreplay import AgentReplay

# A challenger necessarily changes the request body (its model name) and the response's model: the
# plugin's model-comparison defaults already expect data.model, these two are the same change.
COMPARISON_RULES = {"model.call:data.request_hash": "expected", "model.call:data.response_model": "expected"}


@pytest.mark.agentreplay(mode="model-comparison", model=CHALLENGER_MODEL, rules=COMPARISON_RULES)
def test_challenger_agrees_on_order_status(
    support: SupportHarness, agent_replay: AgentReplay, require_mode: Callable[[str], None]
) -> None:
    """Same decisions, other wording: the wording and model name are expected differences, not failures."""
    require_mode("model-comparison")
    result = support.run("order_status")

    assert [name for name, _ in result.tool_calls] == ["lookup_order"]
    if agent_replay.mode == "model-comparison":
        assert support.model_server is not None and support.model_server.calls == 2  # answered live
        assert result.answer.startswith("Good news")  # the challenger's own words


@pytest.fixture
def expect_tool_order_drift(request: pytest.FixtureRequest, agent_replay: AgentReplay) -> object:
    """In model-comparison replay the challenger must fail this test with a tool-order regression."""
    if agent_replay.recording:
        yield None
        return
    if request.config.getoption("agentreplay_update"):
        pytest.skip("accepting drift must never turn the recorded baseline into the challenger's run")
    request.applymarker(
        pytest.mark.xfail(
            strict=True,
            reason="the challenger searches the knowledge base before looking the order up: "
            "model-comparison reports the changed tool choice as a regression",
        )
    )
    yield None
    if agent_replay.mode == "model-comparison":
        drift = agent_replay.drift
        assert drift is not None and drift.has_regressions, "expected the challenger to drift"
        rendered = " ".join(f"{d.event_type} {d.path} {d.recorded} {d.replayed}" for d in drift.regressions)
        assert "search_kb" in rendered and "lookup_order" in rendered, rendered


@pytest.mark.agentreplay(mode="model-comparison", model=CHALLENGER_MODEL, rules=COMPARISON_RULES)
def test_challenger_diverges_on_late_parcel(
    support: SupportHarness,
    agent_replay: AgentReplay,
    require_mode: Callable[[str], None],
    expect_tool_order_drift: object,
) -> None:
    require_mode("model-comparison")
    result = support.run("late_parcel")

    assert result.state.tickets == ["TCK-1001"]
    if agent_replay.mode == "model-comparison":
        assert result.tool_calls[0][0] == "search_kb"


@pytest.mark.agentreplay(mode="audit")
def test_audit_large_refund(support: SupportHarness) -> None:
    """Audit executes nothing: the plugin verifies the recorded run (schema, hash chain, receipts, no
    secrets) and renders it (see the "agentreplay audit" section with ``-rA``). This body runs only
    while recording."""
    result = support.run("large_refund", provider="anthropic", stream=True)

    assert result.state.refunds == ["RF-2001"]
