"""LangChain and LangGraph: a callback handler every runnable gets, through LangChain's public
``register_configure_hook``.

Tools become ``tool.call``/``tool.result``; each LangGraph node execution a ``state.update`` whose hash is
the graph state after that step, read from the inputs of the next step's nodes (or the graph's output), so
it is emitted when the next step starts. :func:`replay_tool_call` serves read-only tools in replay.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.tracers.context import register_configure_hook

from ..core.capture import RunContext, current_run, error_text, state_hash, to_jsonable
from ..core.documents import Document
from ..core.patching import Patches
from ..exceptions import RecordedToolError
from . import ToolExecution, as_arguments

if TYPE_CHECKING:
    # LangGraph's ToolNode types; LangChain without LangGraph never calls replay_tool_call.
    from langgraph.prebuilt.tool_node import ToolCallRequest, ToolCallWrapper
    from langgraph.types import Command

FRAMEWORK = "langgraph"


@dataclass
class _Node:
    name: str
    step: int | None
    graph: UUID | None
    updated: list[str] = field(default_factory=list)


@dataclass
class _RunState:
    tools: dict[UUID, ToolExecution] = field(default_factory=dict)
    nodes: dict[UUID, _Node] = field(default_factory=dict)
    graphs: set[UUID] = field(default_factory=set)
    # Finished nodes whose state-after-step is not known yet, per graph run.
    done: dict[UUID | None, list[_Node]] = field(default_factory=dict)


def _state(ctx: RunContext) -> _RunState:
    return ctx.rooms.of(_RunState, _RunState)


def canonical_state(value: object) -> object:
    """Graph state as plain JSON, messages reduced to what they say (their ids are random per run)."""
    if isinstance(value, dict):
        return {str(k): canonical_state(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_state(v) for v in value]
    kind = getattr(value, "type", None)
    if isinstance(kind, str) and hasattr(value, "content"):
        message: Document = {"type": kind, "content": to_jsonable(value.content)}
        name = getattr(value, "name", None)
        if name:
            message["name"] = name
        calls = getattr(value, "tool_calls", None)
        if calls:
            message["tool_calls"] = [
                {"name": c.get("name"), "args": to_jsonable(c.get("args"))} for c in calls
            ]
        return message
    return to_jsonable(value)


class AgentReplayCallbackHandler(BaseCallbackHandler):
    run_inline = True  # called in order, in the caller's thread and context, also from async runnables
    raise_error = False

    def on_tool_start(
        self,
        serialized: Mapping[str, object],
        input_str: str,
        *,
        run_id: UUID,
        inputs: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        ctx = current_run()
        if ctx is None:
            return
        name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        arguments = to_jsonable(inputs) if isinstance(inputs, dict) else as_arguments(input_str)
        _state(ctx).tools[run_id] = ToolExecution(ctx, name, arguments, framework=FRAMEWORK)

    def on_tool_end(self, output: object, *, run_id: UUID, **kwargs: object) -> None:
        self._tool_done(run_id, output, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: object) -> None:
        self._tool_done(run_id, None, error)

    def _tool_done(self, run_id: UUID, output: object, error: BaseException | None) -> None:
        ctx = current_run()
        execution = _state(ctx).tools.pop(run_id, None) if ctx is not None else None
        if execution is not None and error is not None:
            execution.finish(None, error_text(error))
        elif execution is not None:
            # A ToolMessage: its content, as the model sees it.
            content = getattr(output, "content", None)
            is_message = content is not None and hasattr(output, "tool_call_id")
            execution.finish(to_jsonable(content if is_message else output), None)

    def on_chain_start(
        self,
        serialized: Mapping[str, object],
        inputs: object,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        ctx = current_run()
        if ctx is None:
            return
        state = _state(ctx)
        node = (metadata or {}).get("langgraph_node")
        name = kwargs.get("name")
        if parent_run_id is None or (node is None and parent_run_id not in state.nodes):
            state.graphs.add(run_id)
            return
        if node is None or name != node or not any(t.startswith("graph:step:") for t in tags or ()):
            return
        step = (metadata or {}).get("langgraph_step")
        current = _Node(str(node), step if isinstance(step, int) else None, parent_run_id)
        # This node sees the state after the previous step: that closes the steps finished before it.
        self._flush(ctx, parent_run_id, inputs, before=current.step)
        state.nodes[run_id] = current

    def on_chain_end(self, outputs: object, *, run_id: UUID, **kwargs: object) -> None:
        ctx = current_run()
        if ctx is None:
            return
        state = _state(ctx)
        node = state.nodes.pop(run_id, None)
        if node is not None:
            node.updated = sorted(str(k) for k in outputs) if isinstance(outputs, dict) else []
            state.done.setdefault(node.graph, []).append(node)
        elif run_id in state.graphs:
            state.graphs.discard(run_id)
            self._flush(ctx, run_id, outputs, before=None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: object) -> None:
        ctx = current_run()
        if ctx is None:
            return
        state = _state(ctx)
        state.nodes.pop(run_id, None)
        if run_id in state.graphs:
            state.graphs.discard(run_id)
            state.done.pop(run_id, None)

    def _flush(self, ctx: RunContext, graph: UUID | None, graph_state: object, *, before: int | None) -> None:
        done = _state(ctx).done.get(graph)
        if not done:
            return
        ready = [n for n in done if before is None or n.step is None or n.step < before]
        if not ready:
            return
        done[:] = [n for n in done if n not in ready]
        digest = state_hash(canonical_state(graph_state))
        for node in sorted(ready, key=lambda n: (n.step or 0, n.name)):
            data: Document = {
                "label": node.name,
                "node": node.name,
                "framework": FRAMEWORK,
                "updated": node.updated,
            }
            if node.step is not None:
                data["step"] = node.step
            ctx.recorder.emit(
                "state.update", actor="runtime", event_class="decision", state_hash=digest, data=data
            )


_HANDLER = AgentReplayCallbackHandler()
# The default is the handler itself: every callback manager LangChain configures includes it, in every
# thread and task, with no per-run set/reset to get wrong. Outside a run each callback returns at once.
_HOOK: ContextVar[BaseCallbackHandler | None] = ContextVar("pytest_agentreplay_langchain", default=_HANDLER)


@functools.cache
def _register() -> None:
    register_configure_hook(_HOOK, True)


def install(_patches: Patches) -> None:
    # LangChain keeps its configure hooks for the life of the process (none can be removed) and every
    # callback manager it configures, in any thread, reads them: registered by the first run, kept.
    _register()


def end_run(ctx: RunContext) -> None:
    ctx.rooms.drop(_RunState)


def replay_tool_call(reads: Iterable[str]) -> ToolCallWrapper:
    """A ``ToolNode(wrap_tool_call=...)`` wrapper that serves the ``reads`` tools from the cassette in
    regression and model-comparison replay; everything else runs as usual."""
    names = frozenset(reads)

    def wrap(
        request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command[Hashable]]
    ) -> ToolMessage | Command[Hashable]:
        ctx = current_run()
        call = request.tool_call
        name = call.get("name")
        if ctx is None or name not in names or ctx.executes_tool() or ctx.tools is None:
            return execute(request)
        arguments = to_jsonable(call.get("args") or {})
        execution = ToolExecution(ctx, name, arguments, framework=FRAMEWORK)
        outcome = ctx.tools.serve(name, arguments, None, ctx=ctx)
        execution.finish(outcome.result, outcome.error)
        if outcome.error is not None:
            raise RecordedToolError(name, outcome.error)
        content = outcome.result if isinstance(outcome.result, str) else json.dumps(outcome.result)
        return ToolMessage(content=content, name=name, tool_call_id=call.get("id"))

    return wrap
