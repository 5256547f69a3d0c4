"""The generic bridge: OpenTelemetry GenAI spans emitted in-process become events of the active run.

A span processor, on the global SDK ``TracerProvider`` when one is set and on the Pydantic AI adapter's
private one, reads spans by ``gen_ai.operation.name`` (docs/frameworks.md): tool executions, agent names,
and model calls the HTTP layer did not see.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import StatusCode

from ..core.capture import RunContext
from ..core.documents import Document
from ..core.patching import Patches
from . import ToolExecution, as_arguments, in_current_run, note_agent

ARGUMENT_ATTRIBUTES = ("gen_ai.tool.call.arguments", "tool_arguments")
RESULT_ATTRIBUTES = ("gen_ai.tool.call.result", "tool_response")
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
# A model call's data key, and the attributes it is read from (the first one present).
_MODEL_ATTRIBUTES = (
    ("provider", ("gen_ai.provider.name", "gen_ai.system")),
    ("model", ("gen_ai.request.model",)),
    ("response_model", ("gen_ai.response.model",)),
)
_USAGE = ("input_tokens", "output_tokens")


def _first(attributes: Mapping[str, object], names: tuple[str, ...]) -> object:
    for name in names:
        if name in attributes:
            return attributes[name]
    return None


class _OpenSpans(dict[int, ToolExecution | int]):
    """A run's open spans by span id: a tool's execution, or where a model span's events begin."""


def _pending(ctx: RunContext) -> _OpenSpans:
    return ctx.rooms.of(_OpenSpans, _OpenSpans)


def _framework(span: ReadableSpan) -> str:
    scope = span.instrumentation_scope
    return scope.name if scope is not None and scope.name else "opentelemetry"


def _error_of(span: ReadableSpan) -> str | None:
    for event in span.events:
        if event.name == "exception":
            attrs = event.attributes or {}
            kind = attrs.get("exception.type", "Exception")
            return f"{str(kind).rsplit('.', 1)[-1]}: {attrs.get('exception.message', '')}"
    return (span.status.description or "error") if span.status.status_code is StatusCode.ERROR else None


class GenAISpanProcessor(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        in_current_run(lambda ctx: self._start(ctx, span))

    def _start(self, ctx: RunContext, span: Span) -> None:
        attributes = span.attributes or {}
        operation = attributes.get("gen_ai.operation.name")
        if operation is None:
            return
        key = span.context.span_id
        if operation == "execute_tool":
            run_id = attributes.get("gen_ai.agent.call.id")
            # A framework wrapper records this agent run's tools itself: its span would duplicate them.
            if run_id is not None and run_id in ctx.claimed_agent_runs:
                return
            name = str(attributes.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool "))
            agent = attributes.get("gen_ai.agent.name")
            _pending(ctx)[key] = ToolExecution(
                ctx,
                name,
                as_arguments(_first(attributes, ARGUMENT_ATTRIBUTES)),
                framework=_framework(span),
                agent=str(agent) if agent else None,
                trace_id=f"{span.context.trace_id:032x}",
                span_id=f"{key:016x}",
            )
        elif operation in MODEL_OPERATIONS:
            _pending(ctx)[key] = len(ctx.recorder.events)
        elif operation in AGENT_OPERATIONS:
            note_agent(ctx, attributes.get("gen_ai.agent.name"), framework=_framework(span))

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None:
            in_current_run(lambda ctx: self._end(ctx, span))

    def _end(self, ctx: RunContext, span: ReadableSpan) -> None:
        assert span.context is not None
        attributes = span.attributes or {}
        pending = _pending(ctx).pop(span.context.span_id, None)
        if isinstance(pending, ToolExecution):
            error = _error_of(span)
            # The result as the model sees it (text), so a served read gives it back byte for byte.
            pending.finish(_first(attributes, RESULT_ATTRIBUTES) if error is None else None, error)
        elif isinstance(pending, int):
            # Only when the HTTP layer recorded no model call during the span.
            if not any(event.type == "model.call" for event in ctx.recorder.events[pending:]):
                _model_call(ctx, span, attributes)
        elif attributes.get("gen_ai.operation.name") in AGENT_OPERATIONS:
            note_agent(ctx, attributes.get("gen_ai.agent.name"), framework=_framework(span))


def _model_call(ctx: RunContext, span: ReadableSpan, attributes: Mapping[str, Any]) -> None:
    data: Document = {"source": "otel"}
    for key, names in _MODEL_ATTRIBUTES:
        if (value := _first(attributes, names)) is not None:
            data[key] = value
    reasons = attributes.get("gen_ai.response.finish_reasons")
    if reasons is not None:
        data["decision"] = {"stop_reason": list(reasons)}
    usage = {key: attributes[f"gen_ai.usage.{key}"] for key in _USAGE if f"gen_ai.usage.{key}" in attributes}
    if usage:
        data["usage"] = usage
    ctx.recorder.emit(
        "model.call",
        actor="model",
        event_class="decision",
        data=data,
        trace_id=f"{span.context.trace_id:032x}" if span.context else None,
        span_id=f"{span.context.span_id:016x}" if span.context else None,
    )


_PROCESSOR = GenAISpanProcessor()
# A span processor cannot be taken off a provider again: each provider gets ours once and keeps it (ids of
# those that have it).
_HOOKED: set[int] = set()
_LOCK = threading.Lock()


def _hook(provider: TracerProvider) -> None:
    with _LOCK:
        if id(provider) not in _HOOKED:
            provider.add_span_processor(_PROCESSOR)
            _HOOKED.add(id(provider))


def processor() -> GenAISpanProcessor:
    return _PROCESSOR


@functools.cache
def private_provider() -> TracerProvider:
    provider = TracerProvider()
    _hook(provider)
    return provider


def install(_patches: Patches) -> None:
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):  # the global SDK provider, when one is set
        _hook(provider)


def end_run(ctx: RunContext) -> None:
    # Spans still open at the end of the run (a tool that never returned) end it with an error.
    for pending in list(_pending(ctx).values()):
        if isinstance(pending, ToolExecution):
            pending.finish(None, "unfinished: the span had not ended when the run finished")
    ctx.rooms.drop(_OpenSpans)
