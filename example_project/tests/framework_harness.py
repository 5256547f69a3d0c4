"""Runs the framework-built support agents (``framework_agents``) against the same local services as the
hand-written one: started only while recording, nothing listening in replay."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness import API_KEYS, BACKOFFICE_URL
from services import SCENARIOS, BackofficeService, ScriptedModelServer
from support_agent.tools import Backoffice

from pytest_agentreplay import AgentReplay


@contextmanager
def backoffice_for(replay: AgentReplay, provider: str, scenario: str) -> Iterator[Backoffice]:
    """The backoffice client; while recording, the backoffice and the scripted model listen too."""
    services: list[Any] = []
    if replay.recording:
        services = [BackofficeService(), ScriptedModelServer(provider, SCENARIOS[scenario].script)]
        for service in services:
            service.start()
    client = Backoffice(
        orders_url=BACKOFFICE_URL,
        tickets_url=BACKOFFICE_URL,
        refunds_url=BACKOFFICE_URL,
        sleep=lambda s: None,
    )
    try:
        yield client
    finally:
        client.close()
        for service in reversed(services):
            service.stop()


def tool_calls(replay: AgentReplay) -> list[tuple[str, dict[str, Any]]]:
    """The tool executions of the run (name, arguments), as the framework adapter recorded them."""
    return [(e.tool.name, e.data["arguments"]) for e in replay.events if e.type == "tool.call" and e.tool]


def node_steps(replay: AgentReplay) -> list[str]:
    return [str(e.data.get("node")) for e in replay.events if e.type == "state.update"]


__all__ = ["API_KEYS", "backoffice_for", "node_steps", "tool_calls"]
