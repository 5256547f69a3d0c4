"""MCP client sessions as tool calls, without the MCP SDK: what the adapter (``intercept/mcp.py``) records
for each JSON-RPC request, and what replay serves instead (through ``replay/tools.ToolReplayer``).

- ``tools/call`` is the tool ``server/tool`` (two servers may both have a ``search``) with the client's
  arguments; ``read`` when the server listed it ``readOnlyHint: true``, else ``write`` (the MCP spec's
  default), ``mcp_effects`` overriding both. ``tool.schema_version`` digests the tool's listing, so a
  changed description is drift where the server runs.
- every other request is the read ``mcp:<method>`` with the server and the parameters as arguments (no
  ``_meta``: the SDK stamps its version there); ``initialize`` and ``server/discover`` (no server yet) are
  served in recorded order.

A JSON-RPC error answer is recorded as ``MCPError <code>: <message>`` and raised again in replay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ..core.canonical import hash_value
from ..core.capture import RunContext
from ..core.documents import Document
from ..core.tool_calls import EffectKind, ToolCall

TRANSPORT: Final = "mcp"
# Keep-alives: their number depends on timing, not on the agent. Never recorded; answered empty in replay.
UNRECORDED: Final = frozenset({"ping"})
# Requests made before a server is known: nothing in their parameters tells one server from another.
_HANDSHAKES: Final = frozenset({"initialize", "server/discover"})
_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
# Where a 2026-era server names itself in a ``server/discover`` result (``_meta``).
_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
_ERROR: Final = re.compile(r"^MCPError (-?\d+): (.*)$", re.DOTALL)


@dataclass
class McpServer:
    """What one client session learnt about its server: its name (``initialize``/``server/discover``)
    and the tools it listed, by name."""

    name: str | None = None
    tools: dict[str, Document] = field(default_factory=dict)
    # Whether the adapter asked for the tool list itself (once per session, when recording).
    listed_by_adapter: bool = False
    # In replay, before the agent lists the tools: the hints and digest each tool was recorded with.
    recorded_listing: dict[str, tuple[Document, str | None]] | None = None
    # Opened while its run was served (no server behind it): served to its end, also after a re-recording
    # turns live at its first drift.
    served: bool = False

    def needs_listing(self, method: str, params: object) -> bool:
        """Whether a request calls a tool whose listing (its annotations) this session has not seen: the
        SDK's ``call_tool`` lists the tools only after the call, to check its output."""
        if method != "tools/call" or self.listed_by_adapter or not isinstance(params, dict):
            return False
        return str(params.get("name")) not in self.tools

    def learn(self, method: str, result: Document) -> None:
        """Take the server's name and tool listing from a result (recorded or served alike)."""
        if method == "initialize":
            info = result.get("serverInfo")
        elif method == "server/discover":
            meta = result.get("_meta")
            info = meta.get(_SERVER_INFO) if isinstance(meta, dict) else None
        else:
            info = None
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            self.name = info["name"]
        if method == "tools/list":
            for tool in result.get("tools") or ():
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    self.tools[tool["name"]] = tool

    def qualified(self, tool: str) -> str:
        return f"{self.name}/{tool}" if self.name else tool


def start_request(ctx: RunContext, server: McpServer, method: str, params: Document | None) -> ToolCall:
    """The tool call of one request (``tool.call`` emitted now); the caller sends or serves it."""
    params = {k: v for k, v in (params or {}).items() if k != "_meta"}
    if method == "tools/call":
        name, digest, effect, arguments, extra = _tool_call(ctx, server, params)
    else:
        name, digest, effect, extra = f"mcp:{method}", None, "read", _extra(server)
        arguments = {} if method in _HANDSHAKES else {"server": server.name, **params}
    return ToolCall(
        ctx,
        name,
        digest,
        effect,
        arguments,
        None,
        extra=extra,
        may_group=False,
        live_midway=not server.served,
    )


def _tool_call(
    ctx: RunContext, server: McpServer, params: Document
) -> tuple[str, str | None, EffectKind, Document, Document]:
    """A ``tools/call`` request's tool name, listing digest, effect class, arguments and extra data."""
    tool = str(params.get("name"))
    arguments = params.get("arguments")
    listed = server.tools.get(tool)
    annotations = listed.get("annotations") if listed is not None else None
    hints = {k: annotations[k] for k in _HINTS if isinstance(annotations, dict) and k in annotations}
    digest = hash_value(listed)[:16] if listed is not None else None
    if listed is None and ctx.recorded is not None and not ctx.executes_tool():
        # Replay before the agent listed the tools: the recording listed them (the adapter asks the server
        # itself when the agent had not), and the call is classified as it was then.
        hints, digest = _recorded_listing(ctx, server).get(server.qualified(tool), (hints, digest))
    extra = {**_extra(server), "hints": hints}
    for key in ("inputResponses", "requestState"):
        if key in params:
            extra[key] = params[key]
    arguments = dict(arguments) if isinstance(arguments, dict) else {}
    return server.qualified(tool), digest, effect_of(ctx, server, tool, hints), arguments, extra


def _recorded_listing(ctx: RunContext, server: McpServer) -> dict[str, tuple[Document, str | None]]:
    """The hints and listing digest each MCP tool call of the recording was made with, by tool name."""
    if server.recorded_listing is None:
        found: dict[str, tuple[Document, str | None]] = {}
        recorded = ctx.recorded
        for event in recorded.events if recorded is not None else ():
            if event.type != "tool.call" or event.tool is None or event.data.get("transport") != TRANSPORT:
                continue
            hints = event.data.get("hints")
            if isinstance(hints, dict) and event.tool.name not in found:
                found[event.tool.name] = (dict(hints), event.tool.schema_version)
        server.recorded_listing = found
    return server.recorded_listing


def effect_of(ctx: RunContext, server: McpServer, tool: str, hints: Document) -> EffectKind:
    """``mcp_effects`` (``server/tool`` first, then the tool name), else the annotations: ``read`` only for
    a tool the server lists ``readOnlyHint: true``."""
    overrides = ctx.settings.mcp_effects
    for key in (server.qualified(tool), tool):
        chosen = overrides.get(key)
        if chosen == "read":
            return "read"
        if chosen == "write":
            return "write"
    return "read" if hints.get("readOnlyHint") is True else "write"


def _extra(server: McpServer) -> Document:
    return {"transport": TRANSPORT, "server": server.name}


def error_text(code: int, message: str) -> str:
    """How a JSON-RPC error answer is recorded (``data.error`` of the call's result)."""
    return f"MCPError {code}: {message}"


def error_parts(text: str) -> tuple[int, str] | None:
    """The code and message of a recorded JSON-RPC error (None: the call failed another way)."""
    found = _ERROR.match(text)
    return (int(found.group(1)), found.group(2)) if found else None
