"""The ``check_warranty`` tool: asks the warranty MCP server (stdio) through the official ``mcp`` SDK client.

Each call opens a stdio session (the SDK starts the server process), lists the server's tools, calls
``warranty_status`` and closes the session. Nothing here knows about the plugin: it records the session
(``mcp:initialize``, ``mcp:tools/list``, ``tool.call warranty/warranty_status``) and in replay serves it
from the cassette without starting the server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

SERVER_TOOL = "warranty_status"


class WarrantyClient:
    """Client of the warranty MCP server started with ``server`` (command, arguments, environment)."""

    def __init__(self, server: StdioServerParameters) -> None:
        self.server = server

    def check(self, order_id: str) -> dict[str, Any]:
        return asyncio.run(self._check(order_id))

    async def _check(self, order_id: str) -> dict[str, Any]:
        async with stdio_client(self.server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            if SERVER_TOOL not in {tool.name for tool in listed.tools}:
                return {"error": f"the warranty server has no {SERVER_TOOL} tool"}
            result = await session.call_tool(SERVER_TOOL, {"order_id": order_id})
        if result.is_error or not isinstance(result.structured_content, dict):
            return {"error": "the warranty server could not answer"}
        return dict(result.structured_content)
