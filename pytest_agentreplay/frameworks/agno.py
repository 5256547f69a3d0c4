"""Agno: every tool execution (``FunctionCall.execute``/``aexecute``, wrapped: Agno emits no OpenTelemetry
spans by itself) as ``tool.call``/``tool.result``; in replay the tools run again and their events compared.
"""

from __future__ import annotations

from typing import Any, Final

from agno.tools.function import FunctionCall

from ..core.capture import current_run, to_jsonable
from ..core.patching import Patches, genuine_function
from . import ToolExecution, as_arguments

FRAMEWORK: Final = "agno"


def _start(call: Any) -> ToolExecution | None:
    ctx = current_run()
    if ctx is None:
        return None
    name = str(getattr(getattr(call, "function", None), "name", "tool"))
    return ToolExecution(ctx, name, as_arguments(to_jsonable(call.arguments or {})), framework=FRAMEWORK)


def _finish(execution: ToolExecution | None, outcome: Any) -> Any:
    if execution is not None and getattr(outcome, "status", None) == "success":
        execution.finish(to_jsonable(outcome.result))
    elif execution is not None:
        execution.finish(None, str(getattr(outcome, "error", None) or "failed"))
    return outcome


def install(patches: Patches) -> None:
    execute = genuine_function(FunctionCall.execute)
    aexecute = genuine_function(FunctionCall.aexecute)

    def patched_execute(self: Any) -> Any:
        execution = _start(self)
        return _finish(execution, execute(self))

    async def patched_aexecute(self: Any) -> Any:
        execution = _start(self)
        return _finish(execution, await aexecute(self))

    patches.set(FunctionCall, "execute", patched_execute)
    patches.set(FunctionCall, "aexecute", patched_aexecute)
