"""The support agent on LangGraph: ``intake -> agent <-> tools -> wrapup`` over langchain-openai.

``intake`` files the request (customer, conversation) in the graph state, ``agent`` calls the model with
the tools bound, ``tools`` is LangGraph's ``ToolNode``, ``wrapup`` marks the conversation answered.
``FRAMEWORK_AGENT_DRIFT=edge`` rewires ``START -> intake`` to ``START -> agent``: the intake node no
longer runs, which the replay reports as a missing node transition and changed state hashes.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support_agent.tools import Backoffice, idempotency_key

from pytest_agentreplay.frameworks.langchain import replay_tool_call

from . import SYSTEM_PROMPT, drift, search_kb, search_kb_doc

MODEL = "gpt-4.1-mini"


class SupportState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    customer_id: str
    intake: dict[str, Any]
    status: str


Graph = CompiledStateGraph[Any, Any, Any, Any]


def build_graph(
    *,
    model_base_url: str,
    api_key: str,
    backoffice: Backoffice,
    customer_id: str,
    conversation_id: str,
    http_client: Any = None,
) -> Graph:
    """``http_client``: the ``httpx2.Client`` the OpenAI SDK sends with (langchain-openai otherwise shares
    one pooled client per base URL across the process)."""

    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look an order up: status, carrier, tracking number and dates."""
        return backoffice.lookup_order(order_id)

    def create_ticket(order_id: str, summary: str, priority: str) -> dict[str, Any]:
        """Open a support ticket for a problem you cannot solve."""
        key = idempotency_key("ticket", conversation_id, order_id, summary)
        return backoffice.create_ticket(
            order_id=order_id, summary=summary, priority=priority, customer_id=customer_id, key=key
        )

    tools = [
        StructuredTool.from_function(lookup_order),
        StructuredTool.from_function(search_kb, name="search_kb", description=search_kb_doc()),
        StructuredTool.from_function(create_ticket),
    ]
    model = ChatOpenAI(
        model=MODEL, base_url=model_base_url + "/v1", api_key=api_key, max_retries=0, http_client=http_client
    )
    model_with_tools = model.bind_tools(tools)

    def intake(state: SupportState) -> dict[str, Any]:
        first = state["messages"][0]
        return {"customer_id": customer_id, "intake": {"chars": len(str(first.content))}}

    def agent(state: SupportState) -> dict[str, Any]:
        return {"messages": [model_with_tools.invoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])]}

    def wrapup(state: SupportState) -> dict[str, Any]:
        return {"status": "answered"}

    graph = StateGraph(SupportState)
    graph.add_node("intake", intake)
    graph.add_node("agent", agent)
    # Replay serves the reads from the cassette instead of running them (opt-in, one argument).
    serve_reads = replay_tool_call(reads={"lookup_order", "search_kb"})
    graph.add_node("tools", ToolNode(tools, wrap_tool_call=serve_reads))
    graph.add_node("wrapup", wrapup)
    if drift() == "edge":
        graph.add_edge(START, "agent")
    else:
        graph.add_edge(START, "intake")
        graph.add_edge("intake", "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "wrapup"})
    graph.add_edge("tools", "agent")
    graph.add_edge("wrapup", END)
    return graph.compile()


def handle(graph: Graph, message: str) -> str:
    state = graph.invoke({"messages": [("user", message)]})
    return str(state["messages"][-1].content)
