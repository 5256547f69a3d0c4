"""What every adapter emits: framework tool executions as ``tool.call``/``tool.result`` pairs, graph steps
as ``state.update``, and agent metadata on the run header. Shared so that all frameworks record tools in
the shape ``@tool`` does (``replay/tools.py`` serves and the diff aligns them the same way)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

from ..core.canonical import hash_value
from ..core.capture import RunContext, current_run, to_jsonable
from ..core.documents import Document
from ..core.events import ToolInfo


def as_arguments(value: object) -> Document:
    """Tool arguments as a JSON object (a bare value becomes ``{"input": value}``). Tracing APIs carry them
    as JSON text: structured when it parses, else the text."""
    if isinstance(value, bytes | bytearray):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    parsed = to_jsonable(value)
    if isinstance(parsed, dict):
        return parsed
    return {} if parsed is None or parsed == "" else {"input": parsed}


class ToolExecution:
    """One framework tool execution: emits ``tool.call`` now and ``tool.result`` on :meth:`finish`."""

    def __init__(
        self,
        ctx: RunContext,
        name: str,
        arguments: Document,
        *,
        framework: str,
        agent: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.info = ToolInfo(name=name)
        self.attempt = ctx.recorder.next_attempt(name, hash_value(arguments))
        self.trace_id = trace_id
        self.span_id = span_id
        self.done = False
        data: Document = {"arguments": arguments, "attempt": self.attempt, "framework": framework}
        if agent:
            data["agent"] = agent
        ctx.recorder.emit(
            "tool.call",
            actor="runtime",
            event_class="decision",
            tool=self.info,
            data=data,
            trace_id=trace_id,
            span_id=span_id,
        )

    def finish(self, result: object = None, error: str | None = None) -> None:
        if self.done:
            return
        self.done = True
        self.ctx.recorder.tool_result(
            self.info, result, error, {"attempt": self.attempt}, trace_id=self.trace_id, span_id=self.span_id
        )


def note_agent(ctx: RunContext, agent: object, *, framework: str) -> None:
    """Agent metadata onto the run header's labels (``agent``, ``framework``; the outermost agent wins).

    Labels, not ``RunMeta.agent``: that one is the test's choice and is echoed into ``run.start``."""
    labels = ctx.recorder.run.labels
    if agent:
        labels.setdefault("agent", str(agent))
        labels.setdefault("framework", framework)


def in_current_run(handle: Callable[[RunContext], None]) -> None:
    """Call ``handle`` with the run active here, if any. A framework calls its span processors from the
    agent's own code path: a failure must not break the agent, so it fails the test instead (kept in the
    run's ``failures``)."""
    ctx = current_run()
    if ctx is None:
        return
    try:
        handle(ctx)
    except Exception as exc:
        ctx.failures.add(exc)
