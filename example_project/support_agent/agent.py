"""The support agent: a plain loop (call the model, run the tools it chose, feed the results back)
until the model gives a final answer, on the official ``openai`` or ``anthropic`` SDK."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from pytest_agentreplay import record_state

from .providers import AnthropicMessages, ModelBackend, ModelTurn, OpenAIChat, Provider, ToolCall, ToolSpec
from .tools import (
    Approver,
    Backoffice,
    ToolFailure,
    deny_all,
    idempotency_key,
    issue_refund,
    search_knowledge_base,
)

if TYPE_CHECKING:  # the MCP client is imported only by agents given a warranty server
    from .warranty import WarrantyClient

AGENT_NAME = "northwind-support"
SYSTEM_PROMPT = (
    "You are the customer support agent of Northwind Goods. Answer briefly and politely. "
    "Look an order up with lookup_order before saying anything about it, check policies with search_kb, "
    "open a ticket with create_ticket for problems you cannot solve, and use issue_refund for refunds."
)
# The drift demonstration: SUPPORT_AGENT_DRIFT=prompt appends this sentence to the system prompt (the
# same as editing SYSTEM_PROMPT), SUPPORT_AGENT_DRIFT=argument sends tickets to another queue (tools.py).
DRIFTED_PROMPT_SUFFIX = " Always offer a 10% discount code."
DEFAULT_MODELS: dict[str, str] = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-6"}

TOOLS: list[ToolSpec] = [
    ToolSpec(
        "search_kb",
        "Search the support knowledge base (policies, shipping, refunds).",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "lookup_order",
        "Look up an order by id: status, carrier, tracking, items and total.",
        {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    ),
    ToolSpec(
        "create_ticket",
        "Open a support ticket for a problem that needs follow-up.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "summary": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "normal", "high"]},
            },
            "required": ["order_id", "summary", "priority"],
        },
    ),
    ToolSpec(
        "issue_refund",
        "Refund (part of) an order. Large refunds need a supervisor approval.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number"},
                "reason": {"type": "string"},
            },
            "required": ["order_id", "amount", "reason"],
        },
    ),
]

# Offered to the model only by an agent given a warranty server (``SupportAgent(warranty=...)``): the other
# agents' model requests, and so their recorded cassettes, do not change.
WARRANTY_TOOL = ToolSpec(
    "check_warranty",
    "Check the warranty of an order's item: plan, status (active, not covered) and expiry date.",
    {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def system_prompt() -> str:
    # Today's date, read from the clock: recorded with the run and served back in replay (runtime values),
    # so the cassette replays clean on any later day.
    prompt = f"Today is {date.today().isoformat()}. {SYSTEM_PROMPT}"
    if os.environ.get("SUPPORT_AGENT_DRIFT") == "prompt":
        return prompt + DRIFTED_PROMPT_SUFFIX
    return prompt


@dataclass
class AgentState:
    """What the agent knows about the conversation; recorded (hashed and snapshotted) after every step."""

    conversation_id: str
    customer_id: str
    step: int = 0
    status: str = "open"
    orders: dict[str, str] = field(default_factory=dict)
    tickets: list[str] = field(default_factory=list)
    refunds: list[str] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)


@dataclass
class AgentResult:
    answer: str
    state: AgentState
    tool_calls: list[tuple[str, dict[str, Any]]]
    turns: list[ModelTurn]


class SupportAgent:
    """Handles one support request end to end. Every URL and key comes from the constructor."""

    def __init__(
        self,
        *,
        provider: Provider = "openai",
        model_base_url: str,
        api_key: str,
        orders_url: str,
        tickets_url: str,
        refunds_url: str,
        model: str | None = None,
        stream: bool = False,
        approver: Approver = deny_all,
        ticket_timeout: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        max_steps: int = 8,
        timeout: float = 30.0,
        warranty: WarrantyClient | None = None,
    ) -> None:
        self.provider = provider
        self.model = model or DEFAULT_MODELS[provider]
        self.stream = stream
        self.max_steps = max_steps
        self.approver = approver
        self._model_args = {"base_url": model_base_url, "api_key": api_key, "timeout": timeout}
        self.backoffice = Backoffice(
            orders_url=orders_url,
            tickets_url=tickets_url,
            refunds_url=refunds_url,
            ticket_timeout=ticket_timeout,
            sleep=sleep,
        )
        self._order_totals: dict[str, float] = {}
        self.warranty = warranty
        self.tools = [*TOOLS, WARRANTY_TOOL] if warranty is not None else TOOLS

    def close(self) -> None:
        self.backoffice.close()

    def _backend(self) -> ModelBackend:
        cls = OpenAIChat if self.provider == "openai" else AnthropicMessages
        return cls(model=self.model, tools=self.tools, stream=self.stream, **self._model_args)  # type: ignore[arg-type]

    def handle(self, message: str, *, customer_id: str, conversation_id: str) -> AgentResult:
        backend = self._backend()
        backend.start(system_prompt(), message)
        state = AgentState(conversation_id=conversation_id, customer_id=customer_id)
        record_state(asdict(state), snapshot=True, label="start")
        calls: list[tuple[str, dict[str, Any]]] = []
        turns: list[ModelTurn] = []
        for _ in range(self.max_steps):
            turn = backend.step()
            turns.append(turn)
            state.step += 1
            if not turn.tool_calls:
                state.status = "answered"
                record_state(asdict(state), snapshot=True, label="answered")
                return AgentResult(turn.text, state, calls, turns)
            results: list[tuple[ToolCall, str]] = []
            for call in turn.tool_calls:
                calls.append((call.name, call.arguments))
                result = self._run_tool(call, state)
                state.tools_used.append(call.name)
                results.append((call, json.dumps(result, sort_keys=True)))
            backend.add_results(turn, results)
            record_state(asdict(state), snapshot=True, label=f"step {state.step}")
        state.status = "gave_up"
        record_state(asdict(state), snapshot=True, label="gave up")
        return AgentResult(
            "Sorry, I could not finish this request; a colleague will follow up.", state, calls, turns
        )

    def _run_tool(self, call: ToolCall, state: AgentState) -> dict[str, Any]:
        args = call.arguments
        try:
            if call.name == "search_kb":
                return search_knowledge_base(str(args.get("query", "")))
            if call.name == "lookup_order":
                order = self.backoffice.lookup_order(str(args["order_id"]))
                if "id" in order:
                    state.orders[order["id"]] = str(order.get("status"))
                    self._order_totals[order["id"]] = float(order.get("total", 0.0))
                return order
            if call.name == "create_ticket":
                order_id = str(args["order_id"])
                summary = str(args.get("summary", ""))
                key = idempotency_key("ticket", state.conversation_id, order_id, summary)
                ticket = self.backoffice.create_ticket(
                    order_id=order_id,
                    summary=summary,
                    priority=str(args.get("priority", "normal")),
                    customer_id=state.customer_id,
                    key=key,
                )
                state.tickets.append(ticket["receipt"])
                return ticket
            if call.name == "check_warranty" and self.warranty is not None:
                return self.warranty.check(str(args["order_id"]))
            if call.name == "issue_refund":
                order_id = str(args["order_id"])
                amount = round(float(args["amount"]), 2)
                key = idempotency_key("refund", state.conversation_id, order_id, f"{amount:.2f}")
                refund = issue_refund(
                    self.backoffice,
                    self.approver,
                    order_id=order_id,
                    amount=amount,
                    reason=str(args.get("reason", "")),
                    order_total=self._order_totals.get(order_id),
                    key=key,
                )
                if "receipt" in refund:
                    state.refunds.append(refund["receipt"])
                return refund
        except (ToolFailure, KeyError, ValueError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"error": f"unknown tool {call.name}"}
