"""The process-wide patches behind runtime values (:mod:`.values`): the clock (time-machine), the code of
the ``uuid`` functions and ``random``'s reseeding functions, each held while a run reads it; a read is
matched to its run by :func:`_state`."""

from __future__ import annotations

import functools
import random
import sys
import threading
import time
import types
import uuid as uuid_module
from collections.abc import Callable
from typing import Any, Final, Protocol

from ..core.capture import RunContext, current_run
from ..core.patching import Library, Owner, Patches, Undo, genuine_function, once

_UUID_FUNCTIONS: Final = ("uuid1", "uuid4", "uuid6", "uuid7")
_TRAMPOLINE_GLOBAL: Final = "__agentreplay_runtime_uuid__"
# The module functions that put the ``random`` generator in a new state (pytest-randomly calls ``seed``).
_RESEEDERS: Final = ("seed", "setstate")
# Callers whose clock and uuid reads are not the agent's (a package, with its submodules): they get the
# real values, unrecorded. ``http.cookiejar``: cookie expiry checks, read on every response the client
# itself received, not on replayed ones.
_EXCLUDED: Final = (
    "logging pytest _pytest pytest_agentreplay pluggy time_machine xdist execnet respx vcr http.cookiejar"
)
# Transports' own timing, for the clock only: deadlines, keep-alives, retries and token or cookie expiry
# computed from the wall clock and checked against the real one. grpcio turns a timeout into an absolute
# deadline from ``time.time()`` (``grpc._channel``, ``grpc.aio._utils``) that its C core compares with the
# real clock: served the recorded clock, every call made more than ``timeout`` after the recording fails
# at once with DEADLINE_EXCEEDED. Their ``uuid`` draws stay served (aiohttp's multipart boundary is one, and
# a request body must match its recording). ``time.monotonic`` (anyio, asyncio, websockets, httpx's pool
# timing) is never patched at all.
_TRANSPORTS: Final = (
    "grpc websockets mcp anyio httpx httpx2 httpcore h11 h2 hpack urllib3 requests aiohttp wsproto httpx_ws "
    "google.auth google.api_core"
)


class PatchedRun(Protocol):
    """What the patches ask of a run (:class:`.values.RuntimeValues`)."""

    # The run it belongs to (``RunContext``): a read from that run's code is its.
    ctx: RunContext
    sources: tuple[str, ...]
    clock: bool
    active: bool

    def clock_ns(self, real_ns: int, module: str) -> int: ...

    def uuid(self, kind: str, module: str, make: Callable[[], uuid_module.UUID]) -> uuid_module.UUID: ...

    def reseeding(self) -> None: ...


# Kept in the uuid module itself, not here: a second copy of this module (pytester re-imports modules a
# session imported first) must still find and restore what the first copy patched.
_UUID_STATE_GLOBAL: Final = "__agentreplay_runtime_uuid_state__"


class ClockPatch:
    """Our time-machine traveller while the clock is patched, and the clock it reads underneath.

    Process-wide (:data:`_CLOCK`): time-machine patches the C clock functions for every thread of the
    process. A second copy of this module pushes a traveller of its own on time-machine's stack, which reads
    the first copy's through :attr:`real_ns` (the read comes from this package, so it is not recorded).
    """

    __slots__ = ("real_ns", "travel", "traveller")

    def __init__(self) -> None:
        self.traveller: Any = None
        self.travel: Any = None
        # What our traveller reads underneath: the traveller below ours, else the unpatched clock.
        self.real_ns: Callable[[], int] | None = None

    def apply(self, patches: Patches, _module: object) -> None:
        patches.add(self.stop)
        if getattr(sys.modules.get("freezegun.api"), "freeze_factories", None):
            # The test froze the clock itself (freezegun, which time-machine refuses to run under): its frozen
            # clock is what the agent reads, the same while recording and in replay, so it is left alone.
            return
        import time_machine  # heavy (it imports pytest's machinery): paid only when a run patches the clock

        stack = getattr(time_machine, "traveller_stack", None)
        below = stack[-1] if stack else None
        self.travel = time_machine.travel(None, tick=True)
        self.traveller = self.travel.start()
        # Every patched read asks the top traveller for ``time_ns()``: ours answers from the run.
        self.traveller.time_ns = _read_clock_ns
        if below is not None:
            self.real_ns = below.time_ns
        else:
            # The C function behind time-machine's escape hatch (``escape_hatch.time.time_ns``) without the
            # Python method around it: this is read once per patched read.
            c_module = sys.modules.get("_time_machine")
            self.real_ns = (
                getattr(c_module, "original_time_ns", None) or time_machine.escape_hatch.time.time_ns
            )

    def stop(self) -> None:
        import time_machine  # heavy: as in apply()

        stack = getattr(time_machine, "traveller_stack", [])
        if self.travel is not None and stack and stack[-1] is self.traveller:
            self.travel.stop()
        elif self.travel is not None and self.traveller in stack:
            # A traveller the test started during the run is still on top: take ours out from under it.
            stack.remove(self.traveller)
        self.real_ns = None
        self.traveller = self.travel = None


class UuidPatch:
    """The ``uuid`` functions whose code is swapped for a trampoline, and their genuine versions.

    Process-wide (:data:`_UUID`): the code objects of ``uuid.uuid1/4/6/7`` themselves are swapped. What was
    swapped is kept in the ``uuid`` module (:data:`_UUID_STATE_GLOBAL`), so every copy of this module finds
    the same record; only the dispatcher the trampoline calls belongs to the copy that installed last.
    """

    __slots__ = ("codes", "originals")

    def __init__(self) -> None:
        state = uuid_module.__dict__.setdefault(_UUID_STATE_GLOBAL, ({}, {}))
        # name -> a copy of the genuine function (what the trampoline falls back to)
        self.originals: dict[str, types.FunctionType] = state[0]
        # name -> the genuine code object, put back on unpatch
        self.codes: dict[str, types.CodeType] = state[1]

    def apply(self, patches: Patches, _module: object) -> None:
        patches.add(self.unpatch)
        uuid_module.__dict__[_TRAMPOLINE_GLOBAL] = _dispatch_uuid
        if self.codes:
            # Already patched (by this copy or an earlier one): only the dispatcher changes hands.
            return
        for name in _UUID_FUNCTIONS:
            fn = getattr(uuid_module, name, None)
            if not isinstance(fn, types.FunctionType) or fn.__code__.co_freevars:
                continue
            original = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
            original.__kwdefaults__ = fn.__kwdefaults__
            self.originals[name] = original
            self.codes[name] = fn.__code__
            # Its globals are the uuid module's, where the dispatcher was put above.
            fn.__code__ = _trampoline_code(name)

    def unpatch(self) -> None:
        for name, code in self.codes.items():
            getattr(uuid_module, name).__code__ = code
        self.codes.clear()
        self.originals.clear()
        uuid_module.__dict__.pop(_TRAMPOLINE_GLOBAL, None)


@functools.cache
def _trampoline_code(name: str) -> types.CodeType:
    """The body a patched ``uuid.<name>`` runs, compiled once per process (a code object is immutable;
    compiling it was most of what patching cost each run). A fixed source: ``name`` is one of
    ``_UUID_FUNCTIONS``."""
    namespace: dict[str, Any] = {}
    exec(
        f"def {name}(*args, **kwargs):\n    return {_TRAMPOLINE_GLOBAL}({name!r}, args, kwargs)\n",
        namespace,
    )
    code: types.CodeType = namespace[name].__code__
    return code


def _patch_random(patches: Patches, _module: object) -> None:
    """``random.seed`` and ``random.setstate`` wrapped while a run serves ``random``: each run hears of a
    reseed before it happens (:meth:`PatchedRun.reseeding`), so one made by a plugin or a fixture between
    the run's start and the test body (pytest-randomly reseeds before every test phase) can be undone."""
    for name in _RESEEDERS:
        genuine = genuine_function(getattr(random, name))
        patches.set(random, name, _reseeder(genuine), original=genuine)


def random_call(name: str, *args: Any) -> Any:
    """The genuine ``random.<name>(*args)``: the runs' own reseeds are not news to them."""
    return genuine_function(getattr(random, name))(*args)


def _reseeder(genuine: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(genuine)
    def reseed(*args: Any, **kwargs: Any) -> Any:
        for run in list(INSTALLED.runs):
            if "random" in run.sources:
                run.reseeding()
        return genuine(*args, **kwargs)

    return reseed


class InstalledRuns:
    """The runs whose runtime values are recorded or served now (process-wide, like the patches); each
    source's patch stays while one of them reads it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[PatchedRun] = []

    def add(self, state: PatchedRun, chosen: tuple[str, ...]) -> Undo:
        """Patch what ``state`` reads (``chosen`` sources); returns its removal (idempotent)."""
        holds = [_PATCHES[source].acquire() for source in chosen]
        with self.lock:
            self.runs.append(state)

        def remove() -> None:
            with self.lock:
                self.runs.remove(state)
            while holds:
                holds.pop()()

        return once(remove)


_CLOCK = ClockPatch()
_UUID = UuidPatch()
INSTALLED = InstalledRuns()
_PATCHES: Final = {
    "clock": Owner(Library(_CLOCK.apply)),
    "uuid": Owner(Library(_UUID.apply)),
    "random": Owner(Library(_patch_random)),
}


def underlying_ns() -> int:
    """The clock under ours: a traveller the test started itself, else the real clock."""
    return (_CLOCK.real_ns or time.time_ns)()


@functools.cache
def _excluded(module: str, packages: str = _EXCLUDED) -> bool:
    """Whether ``module`` is one of ``packages`` (space-separated) or one of their submodules."""
    return any(module == package or module.startswith(f"{package}.") for package in packages.split())


@functools.cache
def _clock_excluded(module: str) -> bool:
    return _excluded(module) or _excluded(module, _TRANSPORTS)


def _state(source: str) -> PatchedRun | None:
    installed = INSTALLED.runs
    if len(installed) == 1:
        # The only run: the one the look-up below picks whoever reads, so the current run is not asked.
        state: PatchedRun | None = installed[0]
    elif not installed:
        return None
    else:
        # The run the reading code belongs to, when it has one: a run some caller started and never
        # finished must not take the reads of the run that is current now.
        ctx = current_run()
        state = next((run for run in installed if run.ctx is ctx), None) if ctx is not None else None
    return state if state is not None and source in state.sources and state.active else None


def _read_clock_ns() -> int:
    """time-machine calls this for every patched clock read (it replaces our traveller's ``time_ns``)."""
    real = (_CLOCK.real_ns or time.time_ns)()
    try:
        module = sys._getframe(1).f_globals.get("__name__") or ""
    except ValueError:  # called with no Python frame at all
        return real
    if _clock_excluded(module):
        return real
    installed = INSTALLED.runs
    state = installed[0] if len(installed) == 1 else _state("clock")
    if state is None or not state.clock or not state.active:
        return real
    return state.clock_ns(real, module)


def _dispatch_uuid(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    original = _UUID.originals[kind]
    state = _state("uuid")
    if state is None:
        return original(*args, **kwargs)
    try:
        module = sys._getframe(2).f_globals.get("__name__") or ""
    except ValueError:
        module = ""
    if _excluded(module):
        return original(*args, **kwargs)
    return state.uuid(kind, module or "?", functools.partial(original, *args, **kwargs))
