"""Pydantic AI: its OpenTelemetry GenAI instrumentation with a private tracer provider, read by :mod:`.otel`
(left alone when the project instruments agents itself). The :class:`ReplayTools` capability records its
agent's tools itself and serves the read-only ones from the cassette in replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelRetry
from pydantic_core import to_json

from ..core.capture import current_run, error_text, to_jsonable
from ..core.patching import Patches
from ..exceptions import RecordedToolError
from . import ToolExecution
from .otel import private_provider

if TYPE_CHECKING:
    from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import ToolDefinition

FRAMEWORK = "pydantic_ai"


def install(patches: Patches) -> None:
    """``Agent.instrument_all`` sets a class-wide default, seen by every agent of the process: on with the
    first run, off with the last."""
    # The class default tells whether the project instruments agents itself (then: hands off).
    if getattr(Agent, "_instrument_default", False) is not False:
        return
    Agent.instrument_all(InstrumentationSettings(tracer_provider=private_provider(), include_content=True))
    patches.add(lambda: Agent.instrument_all(False))


@dataclass
class ReplayTools(AbstractCapability[Any]):
    """Records its agent's tool executions and, in regression and model-comparison replay, answers the
    ``reads`` tools (names) from the cassette without running them. Other tools run as usual (their HTTP
    writes are stubbed by the HTTP layer). A no-op outside a run."""

    reads: Iterable[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        self.reads = frozenset(self.reads)

    async def before_run(self, ctx: object) -> None:
        run = current_run()
        run_id = getattr(ctx, "run_id", None)
        if run is not None and run_id:
            run.claimed_agent_runs.add(run_id)

    async def wrap_tool_execute(
        self,
        ctx: object,
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> object:
        run = current_run()
        if run is None:
            return await handler(args)
        arguments = to_jsonable(args)
        if not isinstance(arguments, dict):
            arguments = {"input": arguments}
        agent = getattr(getattr(ctx, "agent", None), "name", None)
        execution = ToolExecution(run, call.tool_name, arguments, framework=FRAMEWORK, agent=agent)
        if call.tool_name in self.reads and not run.executes_tool() and run.tools is not None:
            outcome = run.tools.serve(call.tool_name, arguments, None, ctx=run)
            execution.finish(outcome.result, outcome.error)
            if outcome.error is not None:
                if outcome.error.startswith("ModelRetry: "):
                    raise ModelRetry(outcome.error.removeprefix("ModelRetry: "))
                raise RecordedToolError(call.tool_name, outcome.error)
            # The recorded text the model saw: sent back unchanged, so the next model request matches.
            return outcome.result
        try:
            result = await handler(args)
        except Exception as exc:
            execution.finish(None, _error(exc))
            raise
        execution.finish(_model_text(result), None)
        return result


def _error(exc: BaseException) -> str:
    """A retry the tool asked for reads ``ModelRetry: message`` however far pydantic-ai wrapped it."""
    return f"ModelRetry: {exc}" if type(exc).__name__ in ("ModelRetry", "ToolRetryError") else error_text(exc)


def _model_text(result: object) -> str:
    return result if isinstance(result, str) else to_json(result, fallback=repr).decode()
