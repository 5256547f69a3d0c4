"""The warranty service: an MCP server over stdio (the official ``mcp`` SDK's ``MCPServer``, formerly
FastMCP), deterministic, with one read-only tool.

``warranty_status(order_id)`` answers from a fixed table; it is annotated ``readOnlyHint: true``, so the
plugin records its calls as reads (``tool.call warranty/warranty_status``). The agent starts this script as
a subprocess for each call (``python warranty_mcp.py``: see ``support_agent/warranty.py``). When
``WARRANTY_MCP_MARKER`` names a file, every start appends a line to it: a replay must start none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

SCRIPT = Path(__file__).resolve()
MARKER_ENV = "WARRANTY_MCP_MARKER"

WARRANTIES: dict[str, dict[str, Any]] = {
    "A1001": {"sku": "KB-200", "plan": "standard", "status": "active", "expires": "2026-05-03"},
    "A1002": {"sku": "LMP-7", "plan": "standard", "status": "active", "expires": "2026-04-20"},
    "A1003": {"sku": "MUG-01", "plan": "none", "status": "not covered", "expires": None},
    "A1004": {"sku": "STD-9", "plan": "extended", "status": "active", "expires": "2027-04-19"},
}


def build() -> MCPServer:
    server = MCPServer("warranty", version="1.0")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    def warranty_status(order_id: str) -> dict[str, Any]:
        """The warranty of an order's item: plan, status and expiry date."""
        found = WARRANTIES.get(order_id)
        if found is None:
            return {"order_id": order_id, "status": "unknown order"}
        return {"order_id": order_id, **found}

    return server


def server_parameters(marker: Path | None = None) -> StdioServerParameters:
    """How to start this server over stdio (the marker file, if any, is passed in its environment)."""
    env = {MARKER_ENV: str(marker)} if marker is not None else {}
    return StdioServerParameters(command=sys.executable, args=[str(SCRIPT)], env=env)


if __name__ == "__main__":
    if os.environ.get(MARKER_ENV):
        with Path(os.environ[MARKER_ENV]).open("a") as started:
            started.write(f"{os.getpid()}\n")
    build().run()
