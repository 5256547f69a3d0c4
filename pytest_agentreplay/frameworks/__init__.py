"""Framework adapters: the decision history of agents built on a framework, without decorating tools.

Each adapter (:data:`ADAPTERS`, a module each, documented there) uses the framework's own extension point
(a tracing processor, a callback hook, OpenTelemetry GenAI spans, or a patch of its tool call) and is
activated by :func:`activate` for the frameworks the run uses.

Nothing is imported eagerly. A framework already imported when the run starts hooks in at once; one that
is installed but not imported yet hooks in the moment it has been imported, in whichever thread, while
the run lasts (an agent importing its framework inside its function): :class:`LateImports` keeps one
:class:`~pytest_agentreplay.core.after_import.AfterImport` finder in ``sys.meta_path`` while some run
waits for a framework. A project without any framework installed pays one cached look-up per framework.
Hooks are installed once per process and dispatch to the active run; per-run bookkeeping lives in the
run's rooms.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from ..core.after_import import AfterImport

if TYPE_CHECKING:
    from ..core.capture import RunContext

# (module that tells the framework is in use, adapter module in this package)
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

# The module whose import, once it has run, hooks a framework in late (default: the module that tells).
# ``agents/__init__`` imports ``agents.tracing`` half-way: the adapter, which imports from ``agents``, can
# only run once the whole package has.
LATE_TRIGGERS: dict[str, str] = {"agents.tracing": "agents"}


def _trigger(marker: str) -> str:
    return LATE_TRIGGERS.get(marker, marker)


@functools.cache
def _installed(marker: str) -> bool:
    """Whether the framework's top-level package can be imported; found without importing anything
    (a dotted name would import its parents)."""
    try:
        return importlib.util.find_spec(marker.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _noop() -> None:
    return None


def _hook(adapter: str, ctx: RunContext) -> Callable[[], None] | None:
    """Activate one adapter for ``ctx``; None (and a warning) when it cannot hook in."""
    try:
        module = importlib.import_module(f"{__name__}.{adapter}")
        # An adapter that only patches declares its OWNER; one with per-run state has activate(ctx).
        owner = getattr(module, "OWNER", None)
        undo: Callable[[], None] = owner.acquire() if owner is not None else module.activate(ctx)
    except Exception as exc:  # e.g. pydantic_ai without opentelemetry-sdk: run on, without its history
        warnings.warn(
            f"pytest-agentreplay: the {adapter} adapter could not hook in ({type(exc).__name__}: {exc}); "
            "this run's history lacks that framework's tool and state events",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return undo


class RunHooks:
    """One run's adapters: the undo callables of those hooked in, the names of those it still waits for."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        # Changed under LateImports.lock only.
        self.waiting: set[str] = set()
        self.lock = threading.Lock()
        self.undo: list[Callable[[], None]] = []
        self.closed = False

    def hook(self, adapter: str) -> None:
        undo = _hook(adapter, self.ctx)
        if undo is None:
            return
        with self.lock:
            if not self.closed:
                self.undo.append(undo)
                return
        undo()  # the run ended while its adapter was hooking in (an import in another thread)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            undo, self.undo = self.undo, []
        while undo:
            undo.pop()()


# Per thread: the adapters due to hook in while one already does. Hooking imports the adapter, which may
# import a module that triggers another adapter (``.pydantic_ai`` imports ``.otel``, which imports
# ``opentelemetry.sdk.trace``): that one waits until the adapter up the stack has been imported whole.
_HOOKING = threading.local()


def _hook_all(due: list[tuple[RunHooks, str]]) -> None:
    queue: list[tuple[RunHooks, str]] | None = getattr(_HOOKING, "queue", None)
    if queue is not None:
        queue.extend(due)
        return
    _HOOKING.queue = queue = list(due)
    try:
        while queue:
            run, adapter = queue.pop(0)
            run.hook(adapter)
    finally:
        _HOOKING.queue = None


class LateImports:
    """The runs waiting for a framework that is installed but not imported, and the finder that tells.

    Process-wide (:data:`_LATE`): a module is imported once for the whole process, by whichever thread or
    run gets there first (runs nest: a pytester inner session inside an outer test's run), and every run
    waiting for it then hooks in; pytester drops the modules an inner session imported, and the next
    session's import hooks its runs in again. One finder serves them all; it leaves ``sys.meta_path`` when
    no run waits any more. Adapters hook in outside :attr:`lock`: hooking imports (the adapter, the
    framework's submodules), and another thread holding the lock while it waits for a module this thread
    is importing would deadlock.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[RunHooks] = []
        self.finder: AfterImport | None = None

    def start(self, run: RunHooks, candidates: list[tuple[str, str]]) -> list[str]:
        """The adapters to hook in now; the run waits for the others (decided under the lock, so an
        import under way either finds the run waiting or was in ``sys.modules`` already)."""
        with self.lock:
            present = [adapter for marker, adapter in candidates if marker in sys.modules]
            run.waiting = {adapter for marker, adapter in candidates if marker not in sys.modules}
            if run.waiting:
                self.runs.append(run)
                if self.finder is None:
                    triggers = {_trigger(marker) for marker, _ in ADAPTERS}
                    self.finder = AfterImport(dict.fromkeys(triggers, self.imported))
                    self.finder.install()
        return present

    def leave(self, run: RunHooks) -> None:
        with self.lock:
            if run in self.runs:
                self.runs.remove(run)
            self._drop_idle_finder()

    def imported(self, module: ModuleType) -> None:
        """A trigger module has run: hook its framework into every run waiting for it. Called inside the
        importing code's ``import`` statement: a failure warns (in :func:`_hook`), never raises there."""
        adapters = {a for m, a in ADAPTERS if _trigger(m) == module.__name__ and m in sys.modules}
        due: list[tuple[RunHooks, str]] = []
        with self.lock:
            for run in self.runs:
                for adapter in sorted(adapters & run.waiting):
                    run.waiting.discard(adapter)
                    due.append((run, adapter))
            self.runs = [run for run in self.runs if run.waiting]
            self._drop_idle_finder()
        _hook_all(due)

    def _drop_idle_finder(self) -> None:
        if not self.runs and self.finder is not None:
            self.finder.remove()
            self.finder = None


_LATE = LateImports()


def activate(ctx: RunContext) -> Callable[[], None]:
    """Hook every framework in use into ``ctx``, now or when it is imported during the run; returns the
    callable that unhooks them (idempotent)."""
    candidates = [(m, a) for m, a in ADAPTERS if m in sys.modules or _installed(m)]
    if not candidates:
        return _noop
    run = RunHooks(ctx)
    _hook_all([(run, adapter) for adapter in _LATE.start(run, candidates)])

    def deactivate() -> None:
        _LATE.leave(run)  # first: an import from now on hooks nothing into this run
        run.close()

    return deactivate
