"""Claude Agent SDK (``claude-agent-sdk``): the ``claude`` CLI's session, captured at the SDK's transport.

The methods of ``SubprocessCLITransport`` are patched; the stream-json messages both ways become events
(the table in docs/frameworks.md). In replay (every mode but sandbox) no CLI process starts: the recorded
session is served (:mod:`.cli_stream`), the user's callbacks answer live, and SDK MCP tool calls are
served from the cassette, as ``@tool`` calls are.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from ..core.capture import RunContext, current_run
from ..core.documents import Document
from ..core.patching import Patches, genuine_function
from ..core.tool_calls import ToolCall
from ..exceptions import RecordedToolError
from ..http.providers.fields import obj
from .cli_stream import CliSession, ServedStream, effect

TRANSPORT: Final = "claude-code"
READ_TOOLS: Final = frozenset({"Read", "Grep", "Glob", "LS", "WebSearch", "WebFetch", "NotebookRead"})
_MCP_PREFIX: Final = "mcp__"
_PATCHED: Final = ("connect", "write", "read_messages", "close", "end_input", "is_ready")


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text")) for b in content if isinstance(b, dict) and "text" in b)
    return json.dumps(content)


class _Turn:
    """One assistant turn, gathered from the messages that share its message id."""

    def __init__(self, message: Document) -> None:
        self.id = message.get("id")
        self.model = message.get("model")
        self.usage = message.get("usage")
        self.blocks: list[Document] = []

    def add(self, message: Document) -> None:
        content = message.get("content")
        self.blocks.extend(b for b in content if isinstance(b, dict)) if isinstance(content, list) else None
        if message.get("usage") is not None:
            self.usage = message.get("usage")


class Session(CliSession):
    def __init__(self, ctx: RunContext, transport: Any) -> None:
        super().__init__(
            ctx,
            transport,
            TRANSPORT,
            what=f"Claude Agent SDK session (transport {TRANSPORT})",
            opens=lambda out: out.get("type") == "control_request" and out.get("subtype") == "initialize",
            # The SDK's own control requests (``initialize``, ``interrupt``...): their ids are the SDK's.
            own_request=lambda out: out.get("type") == "control_request",
        )
        self.turn: _Turn | None = None
        self.tools: dict[str, ToolCall] = {}
        self.requests: dict[str, Document] = {}
        self.mcp_calls: dict[str, ToolCall] = {}
        self.read_only: set[str] = set()
        servers = obj(getattr(getattr(transport, "_options", None), "mcp_servers", None))
        self.sdk_servers = {str(name) for name, config in servers.items() if obj(config).get("type") == "sdk"}

    # -- what the CLI sent ---------------------------------------------------------------------------

    def received(self, message: Document) -> None:
        kind, inner = message.get("type"), message.get("message")
        if kind == "assistant" and isinstance(inner, dict):
            if self.turn is not None and self.turn.id != inner.get("id"):
                self.flush()
            if self.turn is None:
                self.turn = _Turn(inner)
            self.turn.add(inner)
        else:
            self.flush()
        super().received(message)
        if kind == "user":
            self._tool_results(inner)
        elif kind == "control_request":
            self._control_request(message)
        elif kind == "result":
            self._result(message)

    def flush(self) -> None:
        """The turn under way: a ``model.call``, then its tool uses."""
        turn, self.turn = self.turn, None
        if turn is None:
            return
        text = "".join(str(b.get("text", "")) for b in turn.blocks if b.get("type") == "text")
        uses = [b for b in turn.blocks if b.get("type") == "tool_use"]
        decision: Document = {
            "text": text,
            "tool_calls": [{"name": b.get("name"), "arguments": b.get("input")} for b in uses],
        }
        thinking = [str(b.get("thinking", "")) for b in turn.blocks if b.get("type") == "thinking"]
        if thinking:
            decision["thinking"] = thinking
        self.model_call(provider="anthropic", model=turn.model, decision=decision, usage=turn.usage)
        for use in uses:
            self._tool_use(use)

    def _tool_use(self, use: Document) -> None:
        name = str(use.get("name"))
        if name.startswith(_MCP_PREFIX) and name.split("__")[1:2] and name.split("__")[1] in self.sdk_servers:
            return  # an in-process SDK MCP tool: its control request is the tool call
        arguments = use.get("input")
        arguments = arguments if isinstance(arguments, dict) else {"input": arguments}
        kind = effect(self.ctx, name, READ_TOOLS)
        self.tools[str(use.get("id"))] = self.tool_call(name, kind, arguments)

    def _tool_results(self, message: object) -> None:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call = self.tools.pop(str(block.get("tool_use_id")), None)
            if call is None:
                continue
            if block.get("is_error"):
                call.finished(None, _text(block.get("content")))
            else:
                call.finished(block.get("content"), None)

    def _control_request(self, message: Document) -> None:
        request = message.get("request")
        if not isinstance(request, dict):
            return
        request_id = str(message.get("request_id"))
        self.requests[request_id] = request
        mcp = obj(request.get("message"))
        if request.get("subtype") == "mcp_message" and mcp.get("method") == "tools/call":
            params = obj(mcp.get("params"))
            server, tool = str(request.get("server_name")), str(params.get("name"))
            arguments = params.get("arguments")
            qualified = f"{server}/{tool}"
            kind = effect(self.ctx, tool, self.read_only, qualified)
            arguments = dict(arguments) if isinstance(arguments, dict) else {}
            self.mcp_calls[request_id] = self.tool_call(qualified, kind, arguments, server=server)

    def serves_itself(self, message: Document) -> bool:
        """Replay: answer an SDK MCP tool call from the cassette instead of running its tool again."""
        call = self.mcp_calls.get(str(message.get("request_id")))
        if call is None or self.served is None:
            return False
        del self.mcp_calls[str(message.get("request_id"))]
        with contextlib.suppress(RecordedToolError):  # a recorded failure: its tool.result holds the error
            call.served()
        # The answer the SDK would have sent, sent in its place.
        self.sent({"type": "control_response", "request_id": message.get("request_id")})
        return True

    def _result(self, message: Document) -> None:
        text = message.get("result")
        self.state(
            "result",
            text if isinstance(text, str) else None,
            subtype=message.get("subtype"),
            is_error=message.get("is_error"),
            num_turns=message.get("num_turns"),
            cost_usd=message.get("total_cost_usd"),
            usage=message.get("usage"),
        )

    # -- what the Python side sent -------------------------------------------------------------------

    def wrote(self, message: Document) -> None:
        kind = message.get("type")
        summary: Document = {"type": kind}
        if kind == "user":
            inner = message.get("message")
            self.prompts.append(inner.get("content") if isinstance(inner, dict) else inner)
        elif kind == "control_request":
            request = message.get("request")
            summary["subtype"] = request.get("subtype") if isinstance(request, dict) else None
            summary["request_id"] = self.recorded_id(message.get("request_id"))
        elif kind == "control_response":
            response = message.get("response")
            if isinstance(response, dict):
                summary["request_id"] = response.get("request_id")
                self._answered(response)
        self.sent(summary, message.get("request_id") if kind == "control_request" else None)

    def _answered(self, response: Document) -> None:
        request_id = str(response.get("request_id"))
        request = self.requests.pop(request_id, None)
        if request is None:
            return
        error = response.get("error") if response.get("subtype") == "error" else None
        answer = obj(response.get("response"))
        subtype = request.get("subtype")
        if subtype == "can_use_tool":
            self._approval(request, answer, error)
        elif subtype == "hook_callback":
            self._hook(request, answer, error)
        elif subtype == "mcp_message":
            self._mcp_answer(request_id, request, answer, error)

    def _approval(self, request: Document, answer: Document, error: object) -> None:
        allowed = error is None and answer.get("behavior") == "allow"
        extra: Document = {}
        if allowed and answer.get("updatedInput") not in (None, request.get("input")):
            extra["updated_input"] = answer.get("updatedInput")
        for key in ("message", "interrupt", "updatedPermissions"):
            if answer.get(key) is not None:
                extra[key] = answer[key]
        if error is not None:
            extra["error"] = error
        self.approval(request.get("tool_name"), allowed, "can_use_tool", request.get("input"), **extra)

    def _hook(self, request: Document, answer: Document, error: object) -> None:
        hook_input = obj(request.get("input"))
        event_name = hook_input.get("hook_event_name")
        specific = obj(answer.get("hookSpecificOutput"))
        verdict = specific.get("permissionDecision") or answer.get("decision")
        if verdict is None:
            verdict = "stop" if answer.get("continue") is False else "continue"
        data: Document = {
            "policy": f"{event_name} hook",
            "verdict": "error" if error is not None else verdict,
            "transport": TRANSPORT,
            "tool": hook_input.get("tool_name"),
            "tool_input": hook_input.get("tool_input"),
            "output": answer,
        }
        if error is not None:
            data["error"] = error
        self.ctx.recorder.emit("policy.decision", actor="policy", event_class="decision", data=data)

    def _mcp_answer(self, request_id: str, request: Document, answer: Document, error: object) -> None:
        reply = obj(answer.get("mcp_response"))
        mcp = obj(request.get("message"))
        if mcp.get("method") == "tools/list":
            tools = obj(reply.get("result")).get("tools")
            for listed in tools if isinstance(tools, list) else ():
                hints = listed.get("annotations") if isinstance(listed, dict) else None
                if isinstance(hints, dict) and hints.get("readOnlyHint") is True:
                    self.read_only.add(str(listed.get("name")))
        call = self.mcp_calls.pop(request_id, None)
        if call is None:
            return
        if error is not None or "error" in reply:
            call.finished(None, str(error or json.dumps(reply.get("error"))))
        else:
            call.finished(reply.get("result"), None)


def install(patches: Patches) -> None:
    cls = SubprocessCLITransport
    originals = [genuine_function(getattr(cls, name)) for name in _PATCHED]
    connect, write, read, close, end_input, ready = originals

    async def patched_connect(self: Any) -> None:
        ctx = current_run()
        if ctx is None or Session(ctx, self).served is None:  # outside a run, or the CLI runs
            await connect(self)

    async def patched_write(self: Any, data: str) -> None:
        session = Session.of(self)
        if session is not None:
            for line in data.splitlines():
                if line.strip():
                    session.wrote(json.loads(line))
        if session is None or session.served is None:
            await write(self, data)

    def patched_read(self: Any) -> AsyncIterator[dict[str, Any]]:
        session = Session.of(self)
        if session is None:
            return read(self)  # type: ignore[no-any-return]
        return _read(session, read(self) if session.served is None else None)

    async def patched_close(self: Any) -> None:
        session = Session.of(self)
        if session is not None:
            session.close()
        if session is None or session.served is None:
            await close(self)

    async def patched_end_input(self: Any) -> None:
        if Session.live(self):
            await end_input(self)

    def patched_ready(self: Any) -> bool:
        return bool(ready(self)) if Session.live(self) else True

    patched = (patched_connect, patched_write, patched_read, patched_close, patched_end_input, patched_ready)
    for name, function in zip(_PATCHED, patched, strict=True):
        patches.set(cls, name, function)


async def _read(
    session: Session, live: AsyncIterator[dict[str, Any]] | None
) -> AsyncIterator[dict[str, Any]]:
    if live is not None:
        async for message in live:
            session.received(message)
            yield message
        return
    served = session.served
    assert served is not None
    async for message in served.messages():
        session.received(message)
        if message.get("type") == "control_request" and session.serves_itself(message):
            continue
        yield _with_live_id(served, message)


def _with_live_id(served: ServedStream, message: Document) -> Document:
    """A recorded answer to one of the SDK's own control requests, under the id the SDK sent now."""
    response = message.get("response")
    if message.get("type") != "control_response" or not isinstance(response, dict):
        return message
    live = served.live_id(response.get("request_id"))
    return message if live is None else {**message, "response": {**response, "request_id": live}}
