"""Framework adapters: the decision history of agents built on a framework, without decorating tools.

Each adapter uses the framework's own public extension point and is activated by :func:`activate` when a
run starts, only for frameworks already imported (``sys.modules`` is checked: nothing is imported eagerly,
so a project without any framework pays one dictionary lookup per framework):

- ``pydantic_ai``: its OpenTelemetry GenAI instrumentation (``Agent.instrument_all``) read by an
  in-process span processor (:mod:`.otel`); the :class:`~.pydantic_ai.ReplayTools` capability also
  serves read-only tools from the cassette in replay;
- ``langchain_core`` (LangChain, LangGraph): a callback handler registered with
  ``langchain_core.tracers.context.register_configure_hook`` (:mod:`.langchain`); ToolNode's
  ``wrap_tool_call`` can serve read-only tools (:func:`~.langchain.replay_tool_call`);
- ``agents`` (OpenAI Agents SDK): a tracing processor (``agents.add_trace_processor``);
- any other library emitting OpenTelemetry GenAI spans through the global SDK tracer provider: the
  generic bridge (:mod:`.otel`).

Hooks are installed once per process and dispatch to the active run (a no-op without one); per-run
bookkeeping lives in ``RunContext.frameworks`` (:class:`~pytest_agentreplay.core.run_state.FrameworkState`).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.capture import RunContext

# (module that tells the framework is in use, adapter module in this package)
ADAPTERS: tuple[tuple[str, str], ...] = (
    ("pydantic_ai", "pydantic_ai"),
    ("langchain_core", "langchain"),
    ("agents.tracing", "openai_agents"),
    ("opentelemetry.sdk.trace", "otel"),
)


def _noop() -> None:
    return None


def activate(ctx: RunContext) -> Callable[[], None]:
    """Hook every imported framework into ``ctx``; returns the callable that unhooks them (idempotent)."""
    modules = sys.modules
    present = [adapter for module, adapter in ADAPTERS if module in modules]
    if not present:
        return _noop
    undo: list[Callable[[], None]] = []
    for adapter in present:
        try:
            module = importlib.import_module(f"{__name__}.{adapter}")
            undo.append(module.activate(ctx))
        except Exception as exc:  # e.g. pydantic_ai without opentelemetry-sdk: run on, without its history
            warnings.warn(
                f"pytest-agentreplay: the {adapter} adapter could not hook in ({type(exc).__name__}: {exc}); "
                "this run's history lacks that framework's tool and state events",
                RuntimeWarning,
                stacklevel=2,
            )

    def deactivate() -> None:
        while undo:
            undo.pop()()

    return deactivate
