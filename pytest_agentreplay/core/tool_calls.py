"""One tool call's events: ``tool.call`` now, then ``tool.result`` (or ``effect`` with a receipt for a write)
when it finishes, or the recorded outcome served in its place during replay.

Shared by ``@tool`` (``api.py``) and the transport adapters whose calls are tool calls (``intercept/mcp.py``):
one shape of tool event, matched and served by one index (``replay/tools.ToolReplayer``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

from ..exceptions import RecordedToolError, ReplayError
from .canonical import hash_value
from .capture import RunContext, served_payload, to_jsonable
from .documents import Document
from .events import EffectInfo, ToolInfo

__all__ = ["EffectKind", "ToolCall"]

EffectKind = Literal["read", "write"]


class ToolCall:
    """The bookkeeping of one tool call: the sync and async forms of a ``@tool`` call, and the transport
    adapters whose calls are tool calls (an MCP ``tools/call``) record and serve through it."""

    def __init__(
        self,
        ctx: RunContext,
        name: str,
        schema_version: str | None,
        effect: EffectKind,
        arguments: Document,
        idempotency_key: str | None,
        extra: Document | None = None,
        *,
        may_group: bool = True,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.effect = effect
        self.arguments = arguments
        self.info = ToolInfo(name=name, schema_version=schema_version, idempotency_key=idempotency_key)
        self.attempt = ctx.recorder.next_attempt(name, idempotency_key or hash_value(arguments))
        # ``may_group=False``: a library whose own background tasks always run beside the call (an MCP
        # session's reader) would make every call look concurrent; its calls keep their order.
        self.group = _group_for(ctx, name, arguments, idempotency_key) if may_group else None
        ctx.recorder.emit(
            "tool.call",
            actor="runtime",
            event_class="decision",
            tool=self.info,
            # ``extra``: what a transport adds (an MCP call's server and its tool's annotations).
            data=self._grouped(
                {"arguments": arguments, "attempt": self.attempt, "effect": effect, **(extra or {})}
            ),
        )

    def _grouped(self, data: Document) -> Document:
        """Tag calls made concurrently (worker threads, sibling asyncio tasks) as one parallel group.

        Their order is a scheduling accident, not a decision: the diff compares such a group as a set.
        """
        if self.group is not None:
            data["group"] = self.group
        return data

    @property
    def executes(self) -> bool:
        return self.ctx.executes_tool()

    def served(self) -> object:
        """The recorded result for this call (raises the recorded error again, as the tool did)."""
        tools = self.ctx.tools
        if tools is None:
            raise ReplayError(
                f"tool {self.name!r} cannot be served: no recorded run is loaded",
                cassette=self.ctx.cassette,
                mode=self.ctx.mode,
                fixes=["record the cassette first: pytest --agentreplay-record=missing"],
            )
        outcome = tools.serve(self.name, self.arguments, self.info.idempotency_key, ctx=self.ctx)
        self.finished(outcome.result, outcome.error)
        if outcome.error is not None:
            raise RecordedToolError(self.name, outcome.error)
        return outcome.result

    def finished(self, result: object, error: str | None) -> None:
        recorder = self.ctx.recorder
        data = self._grouped({"attempt": self.attempt})
        if self.effect == "write" and error is None:
            recorder.emit(
                "effect",
                actor="tool",
                event_class="effect",
                tool=self.info,
                output=served_payload(result),
                effect=EffectInfo(kind=self.name, receipt=_receipt_of(result), committed=True),
                data=data,
            )
        else:
            recorder.tool_result(self.info, result, error, data)


def _group_for(ctx: RunContext, name: str, arguments: Document, key: str | None) -> object:
    """The order-insensitive group of a tool call: the recorded call's group when replaying a call the
    cassette holds (so the grouping does not depend on which thread replays it), else decided live."""
    if ctx.tools is not None and not ctx.recording:
        found, group = ctx.tools.recorded_group(name, arguments, ctx=ctx, idempotency_key=key)
        if found:
            return group
    return "concurrent" if _is_concurrent(ctx) else None


def _is_concurrent(ctx: RunContext) -> bool:
    origin_thread = ctx.origin_thread
    if origin_thread is None:
        origin_thread = ctx.origin_thread = threading.get_ident()
    if threading.get_ident() != origin_thread:
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    # Sibling tasks alive beside this one (gather, TaskGroup): the calls may complete in any order.
    return len(asyncio.all_tasks()) > 1


def _receipt_of(result: object) -> object:
    value = to_jsonable(result)
    if isinstance(value, dict) and isinstance(value.get("structuredContent"), dict):
        # An MCP tool result: the tool's own value is its structured content.
        value = value["structuredContent"]
    if isinstance(value, dict):
        for key in ("receipt", "id", "receipt_id", "ticket_id", "refund_id"):
            if key in value:
                return value[key]
    return value
