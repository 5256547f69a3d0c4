"""Agno: every tool execution (``FunctionCall.execute``/``aexecute``, what its agents and teams run for each
tool call the model makes) as ``tool.call``/``tool.result``. Agno emits no OpenTelemetry spans by itself, so
the two methods are wrapped; in replay the tools run again and their events are compared.
"""

from __future__ import annotations

from typing import Any, Final

from agno.tools.function import FunctionCall

from ..core.capture import RunContext, current_run, to_jsonable
from ..core.patching import Patches, genuine_function
from ._record import ToolExecution, as_arguments

FRAMEWORK: Final = "agno"


def _start(ctx: RunContext, call: Any) -> ToolExecution:
    name = str(getattr(getattr(call, "function", None), "name", "tool"))
    return ToolExecution(ctx, name, as_arguments(to_jsonable(call.arguments or {})), framework=FRAMEWORK)


def _finish(execution: ToolExecution, outcome: Any) -> None:
    if getattr(outcome, "status", None) == "success":
        execution.finish(to_jsonable(outcome.result))
    else:
        execution.finish(None, str(getattr(outcome, "error", None) or "failed"))


def install(patches: Patches) -> None:
    execute = genuine_function(FunctionCall.execute)
    aexecute = genuine_function(FunctionCall.aexecute)

    def patched_execute(self: Any) -> Any:
        ctx = current_run()
        if ctx is None:
            return execute(self)
        execution = _start(ctx, self)
        outcome = execute(self)
        _finish(execution, outcome)
        return outcome

    async def patched_aexecute(self: Any) -> Any:
        ctx = current_run()
        if ctx is None:
            return await aexecute(self)
        execution = _start(ctx, self)
        outcome = await aexecute(self)
        _finish(execution, outcome)
        return outcome

    patches.set(FunctionCall, "execute", patched_execute)
    patches.set(FunctionCall, "aexecute", patched_aexecute)
