"""The warranty question: the agent's ``check_warranty`` tool asks the warranty MCP server
(``services/warranty_mcp.py``) over stdio through the official ``mcp`` SDK client.

Recorded with the server started by the agent's tool (one stdio session); replayed from the cassette with
no server process started: the server appends to a marker file each time it starts, and a replay leaves
it empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from harness import SupportHarness
from services.warranty_mcp import server_parameters
from support_agent.warranty import WarrantyClient

from pytest_agentreplay import AgentReplay

WARRANTY_A1004 = {
    "order_id": "A1004",
    "sku": "STD-9",
    "plan": "extended",
    "status": "active",
    "expires": "2027-04-19",
}


class SeenWarranties(WarrantyClient):
    """The agent's client, keeping what each call answered (from the server, or from the cassette)."""

    def __init__(self, marker: Path) -> None:
        super().__init__(server_parameters(marker))
        self.seen: list[dict[str, Any]] = []

    def check(self, order_id: str) -> dict[str, Any]:
        answer = super().check(order_id)
        self.seen.append(answer)
        return answer


def test_warranty_check_over_mcp(support: SupportHarness, agent_replay: AgentReplay, tmp_path: Path) -> None:
    marker = tmp_path / "warranty-server-starts.txt"
    marker.write_text("")
    warranty = SeenWarranties(marker)

    result = support.run("warranty_check", warranty=warranty)

    assert [name for name, _ in result.tool_calls] == ["check_warranty"]
    assert warranty.seen == [WARRANTY_A1004]
    assert "2027-04-19" in result.answer
    # The MCP session in the history: the handshake, the tool listing and the read-only tool's call.
    mcp_calls = [
        (event.tool.name, event.data["effect"], event.data["arguments"])
        for event in agent_replay.events
        if event.type == "tool.call" and event.tool is not None and event.data.get("transport") == "mcp"
    ]
    assert mcp_calls == [
        ("mcp:initialize", "read", {}),
        ("mcp:tools/list", "read", {"server": "warranty"}),
        ("warranty/warranty_status", "read", {"order_id": "A1004"}),
    ]
    # Recording starts the server once (the tool's stdio session); a replay starts none.
    assert len(marker.read_text().splitlines()) == (1 if agent_replay.recording else 0)
