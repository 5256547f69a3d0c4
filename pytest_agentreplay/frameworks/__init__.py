"""Framework adapters: the decision history of agents built on a framework, without decorating tools.

Each adapter (a module of this package, named in :data:`ADAPTERS`) hooks its framework in through the
framework's own extension point and dispatches to the active run. They are libraries of one
:class:`~pytest_agentreplay.core.patching.Owner`, held by every active run: a framework imported already is
hooked in when the first run starts, one imported later (an agent importing its framework inside its
function) the moment it has been imported, in whichever thread; nothing is imported ahead of time.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from ..core.patching import Library, Owner, Patches

if TYPE_CHECKING:
    from ..core.capture import RunContext

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
    """Whether the framework's top-level package can be imported, found without importing anything."""
    try:
        return importlib.util.find_spec(marker.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _each_adapter(step: str, ctx: RunContext) -> None:
    """Call ``step(ctx)`` on every adapter that has been imported and defines it."""
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
