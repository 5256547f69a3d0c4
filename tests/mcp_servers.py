"""A small MCP server (the SDK's ``MCPServer``, formerly FastMCP) for tests/test_mcp.py, and its launchers.

Run as a script it is the server: ``python mcp_servers.py stdio`` or ``python mcp_servers.py http PORT``.
Every start appends a line to the file named by ``MCP_MARKER`` (a replay must start none); every
``add_note`` appends to ``MCP_NOTES`` (a replayed write must not reach it).
``MCP_VARIANT=changed_description`` serves ``lookup`` with another description. Tools: ``lookup``
(read-only), ``add_note`` (destructive write), ``shout`` (no annotations).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from connection_counter import ConnectionCounter as ConnectionCounter  # re-exported for the tests

HERE = Path(__file__).resolve()


def build() -> object:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("notes", version="1.0")
    described = "Find a note by topic."
    if os.environ.get("MCP_VARIANT") == "changed_description":
        described = "Look a note up in the archive by its topic."

    @server.tool(description=described, annotations=ToolAnnotations(readOnlyHint=True))
    def lookup(topic: str) -> dict[str, str]:
        return {"topic": topic, "text": f"note on {topic}"}

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
    def add_note(text: str) -> dict[str, str]:
        """Store a note."""
        path = Path(os.environ["MCP_NOTES"])
        with path.open("a") as notes:
            notes.write(text + "\n")
        return {"receipt": f"N-{len(path.read_text().splitlines())}"}

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    @server.resource("notes://readme")
    def readme() -> str:
        return "the notes server"

    @server.prompt()
    def summarise(topic: str) -> str:
        return f"Summarise the notes about {topic}."

    return server


def stdio_parameters(marker: Path, notes: Path, variant: str = "") -> object:
    from mcp import StdioServerParameters

    env = {"MCP_MARKER": str(marker), "MCP_NOTES": str(notes), "MCP_VARIANT": variant}
    return StdioServerParameters(command=sys.executable, args=[str(HERE), "stdio"], env=env)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def http_server(port: int, marker: Path, notes: Path, variant: str = "") -> Iterator[str]:
    """The server over streamable HTTP on 127.0.0.1:``port`` while the block runs; yields its URL."""
    env = {**os.environ, "MCP_MARKER": str(marker), "MCP_NOTES": str(notes), "MCP_VARIANT": variant}
    process = subprocess.Popen([sys.executable, str(HERE), "http", str(port)], env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    with Path(os.environ["MCP_MARKER"]).open("a") as started:
        started.write(f"{os.getpid()}\n")
    mcp_server = build()
    if sys.argv[1] == "stdio":
        mcp_server.run()  # type: ignore[attr-defined]
    else:
        mcp_server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))  # type: ignore[attr-defined]
