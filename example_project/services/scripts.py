"""The scripted model turns of each support scenario (the baseline model and the challenger).

A script is a list of :class:`Turn`. For each request the model server looks at the conversation
state (which tool result it sees last, and what that result says) and answers with the first turn
that matches. So the "model" is deterministic and reacts to the agent's actual tool results, in the
OpenAI and the Anthropic wire formats alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    """What the model says: final text, or tool calls (name, arguments)."""

    text: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class Turn:
    reply: Reply
    # The tool whose result the model saw last (None: the conversation holds no tool result yet).
    after: str | None = None
    # Optional: a substring the last tool result must contain.
    result_contains: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    customer_id: str
    message: str
    script: tuple[Turn, ...] = field(default_factory=tuple)


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=((name, arguments),))


def say(text: str) -> Reply:
    return Reply(text=text)


ORDER_STATUS = Scenario(
    name="order_status",
    customer_id="C-42",
    message="Hi! Where is my order A1001? I'd like to know when it arrives.",
    script=(
        Turn(call("lookup_order", order_id="A1001")),
        Turn(
            say(
                "Your order A1001 (mechanical keyboard) has shipped with DHL, tracking JD014600003828. "
                "It is due on 2024-05-03."
            ),
            after="lookup_order",
            result_contains="shipped",
        ),
    ),
)

LATE_PARCEL = Scenario(
    name="late_parcel",
    customer_id="C-42",
    message="My parcel for order A1002 was due on April 20th and it still hasn't arrived. What's going on?",
    script=(
        Turn(call("lookup_order", order_id="A1002")),
        Turn(
            call("search_kb", query="late delivery investigation"),
            after="lookup_order",
            result_contains="delayed",
        ),
        Turn(
            call(
                "create_ticket",
                order_id="A1002",
                summary="Parcel 9 days late, last scan 2024-04-18 at the Lyon sorting hub",
                priority="high",
            ),
            after="search_kb",
        ),
        Turn(
            say(
                "I'm sorry about the delay. Your parcel is 9 days late; I opened an investigation with the "
                "carrier (ticket {receipt}). You'll hear from us within 2 business days."
            ),
            after="create_ticket",
        ),
    ),
)

SMALL_REFUND = Scenario(
    name="small_refund",
    customer_id="C-7",
    message="The mug from order A1003 arrived broken. Can I get my 18.50 back?",
    script=(
        Turn(call("lookup_order", order_id="A1003")),
        Turn(
            call("issue_refund", order_id="A1003", amount=18.5, reason="item arrived damaged"),
            after="lookup_order",
            result_contains="delivered",
        ),
        Turn(
            say("Done: 18.50 is refunded to your original payment method (refund {receipt})."),
            after="issue_refund",
        ),
    ),
)

LARGE_REFUND = Scenario(
    name="large_refund",
    customer_id="C-9",
    message="The laptop stand from order A1004 is defective, one leg snapped. I want a full refund of 240.",
    script=(
        Turn(call("lookup_order", order_id="A1004")),
        Turn(call("search_kb", query="refund policy defective item"), after="lookup_order"),
        Turn(
            call("issue_refund", order_id="A1004", amount=240.0, reason="defective item: broken leg"),
            after="search_kb",
        ),
        Turn(
            say("A supervisor approved your refund of 240.00 (refund {receipt}); expect it within 5 days."),
            after="issue_refund",
            result_contains="issued",
        ),
        Turn(
            say("I'm sorry, the refund of 240.00 was not approved. A colleague will contact you."),
            after="issue_refund",
        ),
    ),
)

# The only scenario whose agent has the check_warranty tool (the warranty MCP server: warranty_mcp.py).
WARRANTY_CHECK = Scenario(
    name="warranty_check",
    customer_id="C-9",
    message="The laptop stand from order A1004 wobbles a bit. Is it still under warranty?",
    script=(
        Turn(call("check_warranty", order_id="A1004")),
        Turn(
            say(
                "Yes: your laptop stand (order A1004) has the extended warranty, active until 2027-04-19. "
                "Shall I open a repair request?"
            ),
            after="check_warranty",
            result_contains='"status": "active"',
        ),
        Turn(say("I'm sorry, I could not find a warranty for this order."), after="check_warranty"),
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (ORDER_STATUS, LATE_PARCEL, SMALL_REFUND, LARGE_REFUND, WARRANTY_CHECK)
}

# The challenger model used by the model-comparison runs: same decisions on the order-status question
# (other wording), but on the late parcel it searches the knowledge base *before* looking the order up.
CHALLENGER_SCRIPTS: dict[str, tuple[Turn, ...]] = {
    "order_status": (
        Turn(call("lookup_order", order_id="A1001")),
        Turn(
            say(
                "Good news: order A1001 (mechanical keyboard) has shipped with DHL, tracking JD014600003828, "
                "and it is due on 2024-05-03."
            ),
            after="lookup_order",
        ),
    ),
    "late_parcel": (
        Turn(call("search_kb", query="late delivery investigation")),
        Turn(call("lookup_order", order_id="A1002"), after="search_kb"),
        Turn(
            call(
                "create_ticket",
                order_id="A1002",
                summary="Parcel 9 days late, last scan 2024-04-18 at the Lyon sorting hub",
                priority="high",
            ),
            after="lookup_order",
        ),
        Turn(say("Sorry for the wait! Ticket {receipt} is open with the carrier."), after="create_ticket"),
    ),
}
