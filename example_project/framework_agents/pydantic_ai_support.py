"""The support agent on Pydantic AI: an ``Agent`` with ``lookup_order``, ``search_kb`` and
``create_ticket`` tools, on an OpenAI (Chat Completions) or Anthropic (Messages) model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai import Agent, RunContext
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from support_agent.tools import Backoffice, idempotency_key

from pytest_agentreplay.frameworks.pydantic_ai import ReplayTools

from . import SYSTEM_PROMPT, search_kb, search_kb_doc

Provider = Literal["openai", "anthropic"]
MODELS: dict[str, str] = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-6"}


@dataclass
class Deps:
    backoffice: Backoffice
    customer_id: str
    conversation_id: str


def build_agent(provider: Provider, *, model_base_url: str, api_key: str) -> Agent[Deps, str]:
    model: OpenAIChatModel | AnthropicModel
    if provider == "openai":
        model = OpenAIChatModel(
            MODELS[provider], provider=OpenAIProvider(base_url=model_base_url + "/v1", api_key=api_key)
        )
    else:
        model = AnthropicModel(
            MODELS[provider], provider=AnthropicProvider(base_url=model_base_url, api_key=api_key)
        )
    agent = Agent(
        model,
        deps_type=Deps,
        system_prompt=SYSTEM_PROMPT,
        name="support-pydantic-ai",
        # Replay serves these reads from the cassette instead of running them (opt-in, one line).
        capabilities=[ReplayTools(reads={"lookup_order", "search_kb"})],
    )

    @agent.tool
    def lookup_order(ctx: RunContext[Deps], order_id: str) -> dict[str, Any]:
        """Look an order up: status, carrier, tracking number and dates."""
        return ctx.deps.backoffice.lookup_order(order_id)

    def kb_search(query: str) -> dict[str, Any]:
        return search_kb(query)

    kb_search.__doc__ = search_kb_doc()  # FRAMEWORK_AGENT_DRIFT=docstring rewords it
    agent.tool_plain(name="search_kb")(kb_search)

    @agent.tool
    def create_ticket(ctx: RunContext[Deps], order_id: str, summary: str, priority: str) -> dict[str, Any]:
        """Open a support ticket for a problem you cannot solve."""
        deps = ctx.deps
        key = idempotency_key("ticket", deps.conversation_id, order_id, summary)
        return deps.backoffice.create_ticket(
            order_id=order_id, summary=summary, priority=priority, customer_id=deps.customer_id, key=key
        )

    return agent


def handle(
    agent: Agent[Deps, str], message: str, *, backoffice: Backoffice, customer_id: str, conversation_id: str
) -> str:
    result = agent.run_sync(message, deps=Deps(backoffice, customer_id, conversation_id))
    return result.output
