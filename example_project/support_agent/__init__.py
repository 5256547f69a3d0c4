"""A customer support agent on the official OpenAI and Anthropic SDKs, instrumented for pytest-agentreplay."""

from __future__ import annotations

from .agent import (
    AGENT_NAME,
    DRIFTED_PROMPT_SUFFIX,
    SYSTEM_PROMPT,
    TOOLS,
    AgentResult,
    AgentState,
    SupportAgent,
    system_prompt,
)
from .providers import ModelTurn, Provider, ToolCall
from .tools import (
    AUTO_REFUND_LIMIT,
    DRIFTED_TICKET_QUEUE,
    REFUND_POLICY,
    REFUND_POLICY_VERSION,
    TICKET_QUEUE,
    Approval,
    ScriptedApprover,
    idempotency_key,
    refund_verdict,
    search_kb,
)

__all__ = [
    "AGENT_NAME",
    "AUTO_REFUND_LIMIT",
    "DRIFTED_PROMPT_SUFFIX",
    "DRIFTED_TICKET_QUEUE",
    "REFUND_POLICY",
    "REFUND_POLICY_VERSION",
    "SYSTEM_PROMPT",
    "TICKET_QUEUE",
    "TOOLS",
    "AgentResult",
    "AgentState",
    "Approval",
    "ModelTurn",
    "Provider",
    "ScriptedApprover",
    "SupportAgent",
    "ToolCall",
    "idempotency_key",
    "refund_verdict",
    "search_kb",
    "system_prompt",
]
