"""smolagents: every tool call (``Tool.__call__``, wrapped: smolagents emits no OpenTelemetry spans by
itself) as ``tool.call``/``tool.result``; in replay the tools run again and their events are compared.
"""

from __future__ import annotations

from typing import Any, Final

from smolagents.tools import Tool

from ..core.capture import current_run, error_text, to_jsonable
from ..core.documents import Document
from ..core.patching import Patches, genuine_function
from . import ToolExecution, as_arguments

FRAMEWORK: Final = "smolagents"


def _arguments(tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Document:
    if len(args) == 1 and not kwargs and isinstance(args[0], dict):
        return as_arguments(args[0])
    names = list(getattr(tool, "inputs", None) or {})
    named: Document = dict(zip(names, args, strict=False))
    named.update({k: v for k, v in kwargs.items() if k != "sanitize_inputs_outputs"})
    return as_arguments(to_jsonable(named))


def install(patches: Patches) -> None:
    call = genuine_function(Tool.__call__)

    def patched_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = current_run()
        if ctx is None:
            return call(self, *args, **kwargs)
        execution = ToolExecution(
            ctx,
            str(getattr(self, "name", type(self).__name__)),
            _arguments(self, args, kwargs),
            framework=FRAMEWORK,
        )
        try:
            result = call(self, *args, **kwargs)
        except Exception as exc:
            execution.finish(None, error_text(exc))
            raise
        execution.finish(to_jsonable(result))
        return result

    patches.set(Tool, "__call__", patched_call)
