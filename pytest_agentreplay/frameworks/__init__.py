"""Framework adapters: the decision history of agents built on a framework, without decorating tools.

Each adapter (a module named in :data:`ADAPTERS`) hooks its framework in through the framework's own
extension point, as a library of one :class:`~pytest_agentreplay.core.patching.Owner` held by every active
run: hooked in when the first run starts, or the moment the framework is imported, in whichever thread.
Every adapter records tools as ``tool.call``/``tool.result`` pairs in the shape ``@tool`` does.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import sys
import warnings
from collections.abc import Callable
from types import ModuleType

from ..core.canonical import hash_value
from ..core.capture import RunContext, current_run, to_jsonable
from ..core.documents import Document
from ..core.events import ToolInfo
from ..core.patching import Library, Owner, Patches

# (module that tells the framework is in use, adapter module in this package). An adapter module has
# ``install(patches)`` and, when it must act at each run, ``start_run(ctx)`` (called once the frameworks are
# hooked in, even when an earlier run still holds them) and ``end_run(ctx)`` (called before ``run.end``).
ADAPTERS: tuple[tuple[str, str], ...] = (
    ("pydantic_ai", "pydantic_ai"),
    ("langchain_core", "langchain"),
    ("agents.tracing", "openai_agents"),
    ("opentelemetry.sdk.trace", "otel"),
    ("claude_agent_sdk", "claude_code"),
    ("openai_codex", "codex"),
    ("smolagents", "smolagents"),
    ("agno", "agno"),
)

# The module whose import hooks a framework in late (default: the module that tells). ``agents/__init__``
# imports ``agents.tracing`` half-way: the adapter, which imports from ``agents``, can only run once the
# whole package has.
LATE_TRIGGERS: dict[str, str] = {"agents.tracing": "agents"}


def _library(marker: str, adapter: str) -> Library:
    def apply(patches: Patches, _module: ModuleType | None) -> None:
        if marker not in sys.modules:  # e.g. another package named ``agents``
            return
        try:
            importlib.import_module(f"{__name__}.{adapter}").install(patches)
        except Exception as exc:  # e.g. pydantic_ai without opentelemetry-sdk: run on, without its history
            # Often inside the importing code's ``import`` statement: a warning, never an error there.
            warnings.warn(
                f"pytest-agentreplay: the {adapter} adapter could not hook in ({type(exc).__name__}: {exc}); "
                "this run's history lacks that framework's tool and state events",
                RuntimeWarning,
                stacklevel=2,
            )

    return Library(apply, (LATE_TRIGGERS.get(marker, marker),))


# Process-wide, like the frameworks' classes and registries the adapters hook into.
OWNER = Owner(*(_library(marker, adapter) for marker, adapter in ADAPTERS))


@functools.cache
def _installed(marker: str) -> bool:
    """Whether the framework's top-level package is installed (found without importing it)."""
    try:
        return importlib.util.find_spec(marker.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _each_adapter(step: str, ctx: RunContext) -> None:
    for _, adapter in ADAPTERS:
        call = getattr(sys.modules.get(f"{__name__}.{adapter}"), step, None)
        if call is not None:
            call(ctx)


def _noop() -> None:
    return None


def activate(ctx: RunContext) -> Callable[[], None]:
    """Hook every framework in use into ``ctx``, now or when it is imported during the run; returns the
    callable that unhooks them (idempotent)."""
    if not any(marker in sys.modules or _installed(marker) for marker, _ in ADAPTERS):
        return _noop
    release = OWNER.acquire()
    _each_adapter("start_run", ctx)

    def deactivate() -> None:
        _each_adapter("end_run", ctx)
        release()

    return deactivate


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
    """``agent`` and ``framework`` labels on the run header (the outermost agent wins); not ``RunMeta.agent``,
    the test's own choice, echoed into ``run.start``."""
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
