"""Regression suite of the support agent: every scenario, both providers, plain and streamed.

Recorded with ``--agentreplay-record=all`` against the local services; replayed from the cassettes
with nothing listening. Assertions hold in both: while recording they also check the services.
"""

from __future__ import annotations

import pytest
from harness import SupportHarness
from support_agent import Provider, ScriptedApprover

PROVIDERS: list[Provider] = ["openai", "anthropic"]
STREAMING = [pytest.param(False, id="plain"), pytest.param(True, id="stream")]


@pytest.mark.parametrize("stream", STREAMING)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_order_status(support: SupportHarness, provider: Provider, stream: bool) -> None:
    result = support.run("order_status", provider=provider, stream=stream)

    assert [name for name, _ in result.tool_calls] == ["lookup_order"]
    assert "JD014600003828" in result.answer
    assert result.state.orders == {"A1001": "shipped"}
    assert result.state.status == "answered"
    # What the SDK parsed (live while recording, from the cassette in replay): ids, stop reasons, usage.
    first, last = result.turns
    prefix = "chatcmpl-sup" if provider == "openai" else "msg_sup"
    assert (first.response_id, last.response_id) == (f"{prefix}0001", f"{prefix}0002")
    tool_stop = "tool_calls" if provider == "openai" else "tool_use"
    assert (first.stop_reason, last.stop_reason) == (
        tool_stop,
        "stop" if provider == "openai" else "end_turn",
    )
    assert first.tool_calls[0].id.endswith("sup0001_0")
    assert all(t.input_tokens and t.output_tokens for t in result.turns)


@pytest.mark.parametrize("stream", STREAMING)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_late_parcel_opens_ticket(support: SupportHarness, provider: Provider, stream: bool) -> None:
    result = support.run("late_parcel", provider=provider, stream=stream)

    assert [name for name, _ in result.tool_calls] == ["lookup_order", "search_kb", "create_ticket"]
    assert result.state.tickets == ["TCK-1001"]
    assert "TCK-1001" in result.answer
    if support.backoffice is not None:  # recording: the real service saw exactly one write
        posts = support.backoffice.requests_to("POST", "/tickets")
        assert len(posts) == 1
        assert posts[0].headers["idempotency-key"].startswith("ticket-")
        assert list(support.backoffice.tickets) == ["TCK-1001"]


@pytest.mark.parametrize("stream", STREAMING)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_small_refund_auto_approved(support: SupportHarness, provider: Provider, stream: bool) -> None:
    approver = ScriptedApprover()
    result = support.run("small_refund", provider=provider, stream=stream, approver=approver)

    assert result.state.refunds == ["RF-2001"]
    assert approver.asked == []  # within the automatic limit: no human involved
    assert "RF-2001" in result.answer


@pytest.mark.parametrize("stream", STREAMING)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_large_refund_needs_approval(support: SupportHarness, provider: Provider, stream: bool) -> None:
    approver = ScriptedApprover({"A1004": True})
    result = support.run("large_refund", provider=provider, stream=stream, approver=approver)

    assert approver.asked == [("A1004", 240.0)]
    assert result.state.refunds == ["RF-2001"]
    assert "approved" in result.answer
    if support.backoffice is not None:
        (refund,) = support.backoffice.refunds.values()
        assert refund["approved_by"] == "supervisor:dana"


def test_large_refund_denied(support: SupportHarness) -> None:
    approver = ScriptedApprover({"A1004": False})
    result = support.run("large_refund", approver=approver)

    assert approver.asked == [("A1004", 240.0)]
    assert result.state.refunds == []
    assert "not approved" in result.answer
    if support.backoffice is not None:
        assert support.backoffice.requests_to("POST", "/refunds") == []
