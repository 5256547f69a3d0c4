"""OpenAI Agents SDK: a tracing processor (``agents.add_trace_processor``, see docs/frameworks.md).

``function`` spans become ``tool.call``/``tool.result``, both emitted when the span ends (the SDK fills the
input in late); ``handoff`` spans a ``state.update`` whose hash is the pair, so a changed hand-off fails
like a changed graph transition. Model calls are left to the HTTP layer.
"""

from __future__ import annotations

from typing import Any

from agents import add_trace_processor
from agents.tracing import Span, Trace, TracingProcessor, get_trace_provider

from ..core.capture import RunContext, current_run, state_hash, to_jsonable
from ..core.patching import Patches
from . import ToolExecution, as_arguments, in_current_run, note_agent

FRAMEWORK = "openai_agents"


def _span_error(span: Span[Any]) -> str | None:
    error = span.error
    if not error:
        return None
    message = error.get("message") if isinstance(error, dict) else str(error)
    data = error.get("data") if isinstance(error, dict) else None
    detail = data.get("error") if isinstance(data, dict) else None
    return f"{message}: {detail}" if detail else str(message)


class AgentReplayTracingProcessor(TracingProcessor):
    def on_trace_start(self, trace: Trace) -> None:
        return None

    def on_trace_end(self, trace: Trace) -> None:
        return None

    def on_span_start(self, span: Span[Any]) -> None:
        ctx = current_run()
        if ctx is None:
            return
        data = span.span_data
        if data.type == "agent":
            note_agent(ctx, getattr(data, "name", None), framework=FRAMEWORK)

    def on_span_end(self, span: Span[Any]) -> None:
        in_current_run(lambda ctx: self._end(ctx, span))

    def _end(self, ctx: RunContext, span: Span[Any]) -> None:
        data = span.span_data
        if data.type == "function":
            execution = ToolExecution(
                ctx,
                str(data.name),
                as_arguments(data.input),
                framework=FRAMEWORK,
                trace_id=span.trace_id,
                span_id=span.span_id,
            )
            error = _span_error(span)
            execution.finish(None if error else to_jsonable(data.output), error)
        elif data.type == "handoff":
            source, target = data.from_agent, data.to_agent
            pair = {"from": source, "to": target}
            label = f"handoff {source} -> {target}"
            ctx.recorder.emit(
                "state.update",
                actor="runtime",
                event_class="decision",
                state_hash=state_hash(pair),
                data={"label": label, "node": target, "handoff": pair, "framework": FRAMEWORK},
            )

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


_PROCESSOR = AgentReplayTracingProcessor()


# Whether the processor was ever added: what tells, when this SDK version does not list its processors.
_ADDED: list[bool] = []


def _registered() -> bool:
    """Whether our processor is still among the SDK's (``set_trace_processors`` replaces the list)."""
    processors = getattr(getattr(get_trace_provider(), "_multi_processor", None), "_processors", None)
    return any(p is _PROCESSOR for p in processors) if isinstance(processors, tuple | list) else bool(_ADDED)


def _register() -> None:
    """The SDK has one trace provider per process, whose processors see every span of every thread (none
    can be removed): the processor is added once, and again when the project replaced the SDK's list."""
    if not _registered():
        add_trace_processor(_PROCESSOR)
        _ADDED.append(True)


def install(_patches: Patches) -> None:
    _register()  # through the SDK's own API: nothing to patch or restore


def start_run(_ctx: RunContext) -> None:
    # A run that shares the hooks an earlier run installed still needs the processor, which a
    # ``set_trace_processors`` call of the project may have dropped since.
    _register()
