"""The support agent's scenarios written on agent frameworks, without a single pytest-agentreplay decorator.

- :mod:`.pydantic_ai_support`: a Pydantic AI agent (OpenAI or Anthropic model) with three tools;
- :mod:`.langgraph_support`: a LangGraph graph (intake -> agent <-> tools -> wrap-up) over langchain-openai.

Both talk to the same local services as :mod:`support_agent` (orders and tickets through its
``Backoffice`` client, the knowledge base shipped as data). The only lines that mention the replay plugin
are opt-ins for serving read-only tools from the cassette in replay (``ReplayTools`` /
``replay_tool_call``); the tool executions, retries and graph steps are recorded by the plugin's
framework adapters. ``FRAMEWORK_AGENT_DRIFT`` switches on the drift demonstrations: ``docstring`` edits
the ``search_kb`` tool's docstring (Pydantic AI), ``edge`` rewires the graph to skip the intake node
(LangGraph).
"""

from __future__ import annotations

import os
from typing import Any

from support_agent.kb import load_kb

SYSTEM_PROMPT = (
    "You are the customer support agent of Northwind Goods. Answer briefly and politely. "
    "Look an order up with lookup_order before saying anything about it, check policies with search_kb "
    "and open a ticket with create_ticket for problems you cannot solve."
)
SEARCH_KB_DOC = "Search the support knowledge base (policies, shipping, refunds)."
# The drift demonstration of the Pydantic AI agent: a reworded tool docstring (its tool description).
DRIFTED_SEARCH_KB_DOC = "Search the help-center articles for an answer."


def drift() -> str:
    return os.environ.get("FRAMEWORK_AGENT_DRIFT", "")


def search_kb_doc() -> str:
    return DRIFTED_SEARCH_KB_DOC if drift() == "docstring" else SEARCH_KB_DOC


def search_kb(query: str) -> dict[str, Any]:
    """The knowledge-base search shared by both agents (a read: served from the cassette in replay)."""
    kb = load_kb()
    return {
        "corpus_version": kb.version,
        "documents": [{"id": d.id, "title": d.title, "text": d.body} for d, _ in kb.search(query, 3)],
    }
