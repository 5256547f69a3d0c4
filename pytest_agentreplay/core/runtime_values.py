"""Runtime values: the wall clock, ``uuid`` and ``random`` values an agent reads, recorded and served back.

While a run records, what the agent's code reads from the wall clock (``time.time``, ``time.time_ns``,
``datetime.now/utcnow/today``, ``date.today``, ``time.gmtime/localtime/strftime`` without an argument),
draws from ``uuid.uuid1/uuid4`` (``uuid6``/``uuid7`` where Python has them) and the seed of the
``random`` module are kept per *stream* (the thread or asyncio task that read them) and written as one
``runtime.values`` input event before ``run.end``. In replay the same values are served in the same
order per stream: the clock starts at the recorded start and advances by the recorded offsets, then
keeps advancing (in real time) from the last recorded value when the run reads more than was recorded.

How:

- clock: time-machine patches the C-level clock functions; this module pushes one traveller whose
  ``time_ns`` is the hook below (one Python call per read, values appended to a per-stream list).
  Reads made by pytest, pluggy, logging, time-machine and this package itself (event timestamps, the
  network guard, the HTTP replayer) are recognised by the caller's module and get the real clock
  (or the clock of a traveller the test started itself), unrecorded. ``time.monotonic`` and
  ``time.perf_counter`` are never touched: durations, timeouts and event-loop timing stay real.
- uuid: the code objects of ``uuid.uuid1/4/6/7`` are swapped for a trampoline while a run is active, so
  ``from uuid import uuid4`` bound before the run is covered too.
- random: the module-level ``random`` generator is seeded with a recorded seed for the run (and its
  previous state restored afterwards); ``random.sample``/``choice``/``random`` then repeat themselves.
  Draws racing between threads follow their interleaving. ``random.Random()`` instances, ``secrets``,
  ``random.SystemRandom`` and ``os.urandom`` stay outside.
- :func:`record_value` records any other nondeterministic value by name.

Stream names are stable across runs: ``main`` (the thread that started the run, outside a task),
``task:<coroutine qualname>#<n>`` and ``thread:<thread name, digits as N>#<n>``, numbered in order of
their first read.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..exceptions import ConfigError

if TYPE_CHECKING:
    import uuid as uuid_module

    from .capture import RunContext

T = TypeVar("T")

EVENT_TYPE: Final = "runtime.values"
SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES
EXTENSION: Final = "runtime_values"
MAIN: Final = "main"
_OFF_WORDS: Final = ("none", "off", "false", "0")
_UUID_FUNCTIONS: Final = ("uuid1", "uuid4", "uuid6", "uuid7")
_UUID_VERSIONS: Final = {"uuid1": 1, "uuid4": 4, "uuid6": 6, "uuid7": 7}
_TRAMPOLINE_GLOBAL: Final = "__agentreplay_runtime_uuid__"
_SERVER_MODULES: Final = frozenset({"socketserver", "wsgiref", "uvicorn", "hypercorn", "werkzeug"})
# Callers whose clock and uuid reads are not the agent's: they get the real values, unrecorded.
_EXCLUDED_MODULES: Final = frozenset({"logging", "pytest", "pluggy", "time_machine"})
_EXCLUDED_PREFIXES: Final = (
    "_pytest.",
    "pytest_agentreplay.",
    "pluggy.",
    "logging.",
    "time_machine.",
    "xdist.",
    "execnet.",
    "respx.",
    "vcr.",
    # Cookie expiry checks: read on every response the client itself received, not on replayed ones.
    "http.cookiejar",
)


# ------------------------------------------------------------------------------------------- settings


def parse_sources(value: Any, where: str) -> tuple[str, ...] | None:
    """The sources a setting names, ``()`` when it turns runtime values off, ``None`` when not given.

    Accepts ``"clock uuid random"`` (spaces or commas), a list, ``true`` (all), ``false``/``""``/``[]``/
    ``"none"``/``"off"`` (off). Raises ``ConfigError`` listing the valid values.
    """
    if value is None:
        return None
    if value is True:
        return DEFAULT_SOURCES
    if value is False:
        return ()
    if isinstance(value, str):
        parts = [p for p in value.replace(",", " ").split() if p]
    elif isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        parts = []
        for item in value:
            if not isinstance(item, str):
                raise _config_error(repr(value), where)
            parts.extend(p for p in item.replace(",", " ").split() if p)
    else:
        raise _config_error(repr(value), where)
    if len(parts) == 1 and parts[0].lower() in _OFF_WORDS:
        return ()
    unknown = [p for p in parts if p not in SOURCES]
    if unknown:
        raise _config_error(", ".join(map(repr, unknown)), where)
    return tuple(s for s in SOURCES if s in parts)


def _config_error(got: str, where: str) -> ConfigError:
    return ConfigError(
        f"invalid runtime_values {got} in {where}",
        evidence=[f"valid values: {', '.join(SOURCES)} (any of them, space-separated; empty turns it off)"],
        fixes=['use e.g. runtime_values = "clock uuid random", "clock", or "" to turn it off'],
    )


# ---------------------------------------------------------------------------------------- per stream


class _Seq:
    """One sequence of values (recorded ones to serve, and what this run read): per stream and source,
    keyed by the module that read them, so a library reading more or less often in replay than while
    recording (cookie expiry, retries) never shifts the values the agent's own code is served."""

    __slots__ = ("drawn", "pos", "recorded")

    def __init__(self, recorded: list[Any]) -> None:
        self.recorded = recorded
        self.pos = 0
        self.drawn: list[Any] = []

    def next_recorded(self) -> tuple[bool, Any]:
        if self.pos < len(self.recorded):
            self.pos += 1
            return True, self.recorded[self.pos - 1]
        return False, None


class _Stream:
    """What one thread or task read (the clock in absolute microseconds) and what it may be served."""

    __slots__ = (
        "anchor",
        "clock",
        "ignored",
        "last_us",
        "name",
        "owner",
        "recorded",
        "suspended",
        "uuid",
        "values",
    )

    def __init__(self, name: str, owner: Any, recorded: Mapping[str, Any]) -> None:
        self.name = name
        # Keeps the task/thread alive while the run lasts: its id must not be reused by another stream.
        self.owner = owner
        # source -> module (or value name) -> recorded values of this stream
        self.recorded = recorded
        self.clock: dict[str, _Seq] = {}
        self.uuid: dict[str, _Seq] = {}
        self.values: dict[str, _Seq] = {}
        # (served clock value in us, real ns when served): the clock advances from here past the recording.
        self.anchor: tuple[int, int] | None = None
        self.last_us = -1
        # True while this package generates a value itself (uuid1 reads the clock): reads pass through.
        self.suspended = False
        # A thread of an in-process server (the test's service double): not the agent, never recorded.
        self.ignored = False

    def seq(self, source: str, key: str) -> _Seq:
        table: dict[str, _Seq] = getattr(self, source)
        found = table.get(key)
        if found is None:
            found = table[key] = _Seq(list(self.recorded.get(source, {}).get(key, ())))
        return found


class RuntimeValues:
    """One run's runtime values: the recorder (recording) or the server (replay) of every stream."""

    def __init__(self, ctx: RunContext, sources: tuple[str, ...], recorded: Mapping[str, Any] | None) -> None:
        self.ctx = ctx
        self.sources = sources
        self.clock = "clock" in sources
        self.replaying = not ctx.recording
        self.recorded = recorded if self.replaying else None
        self.origin = threading.get_ident()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._streams: dict[tuple[Any, Any], _Stream] = {}
        self._labels: dict[str, int] = {}
        self._by_name: dict[str, _Stream] = {}
        self._recorded_streams = _recorded_streams(self.recorded) if self.recorded else {}
        clock = (self.recorded or {}).get("clock") or {}
        real_ns = _underlying_ns()
        self.start_us: int = int(clock["start_us"]) if "start_us" in clock else real_ns // 1000
        # The latest served value of any stream: a stream the recording lacks continues from it.
        self.anchor: tuple[int, int] = (self.start_us, real_ns)
        self.seed: int | None = None
        self._random_saved: Any = None
        self._random_seeded: Any = None
        self.random_after: Any = None
        self.active = True

    # streams -----------------------------------------------------------------------------------------
    def stream(self) -> _Stream:
        """The stream of the calling thread or task (a thread-local cache outside tasks: one per read)."""
        aio = sys.modules.get("asyncio")
        task = None
        if aio is not None and aio._get_running_loop() is not None:
            task = aio.current_task()
        if task is None:
            found: _Stream | None = getattr(self._local, "stream", None)
            if found is None:
                found = self._local.stream = self._new_stream(threading.current_thread(), None)
            return found
        found = self._streams.get((threading.current_thread(), task))
        if found is not None:
            return found
        return self._new_stream(threading.current_thread(), task)

    def _new_stream(self, thread: threading.Thread, task: Any) -> _Stream:
        with self._lock:
            found = self._streams.get((thread, task))
            if found is not None:
                return found
            if thread.ident != self.origin and _serves(thread):
                stream = _Stream("server", thread, {})
                stream.ignored = stream.suspended = True
                self._streams[(thread, task)] = stream
                return stream
            if task is not None:
                coro = task.get_coro()
                label = "task:" + str(getattr(coro, "__qualname__", None) or type(coro).__name__)
            elif thread.ident == self.origin:
                label = MAIN
            else:
                label = "thread:" + "".join("N" if c.isdigit() else c for c in thread.name)
                label = _squeeze_digits(label)
            if label == MAIN:
                name = MAIN
            else:
                n = self._labels.get(label, 0)
                self._labels[label] = n + 1
                name = f"{label}#{n}"
            stream = _Stream(name, task if task is not None else thread, self._recorded_streams.get(name, {}))
            self._streams[(thread, task)] = stream
            self._by_name[name] = stream
            return stream

    # clock -------------------------------------------------------------------------------------------
    def clock_ns(self, real_ns: int, module: str) -> int:
        stream = self.stream()
        if stream.suspended:
            return real_ns
        seq = stream.clock.get(module) or stream.seq("clock", module)
        served, value = seq.next_recorded()
        if served:
            stream.anchor = self.anchor = (value, real_ns)
        elif self.replaying:
            base_us, base_real = stream.anchor or self.anchor
            value = base_us + max(0, real_ns - base_real) // 1000
            value = max(value, stream.last_us)
        else:
            value = real_ns // 1000
        stream.last_us = value
        seq.drawn.append(value)
        return int(value) * 1000

    # uuid --------------------------------------------------------------------------------------------
    def uuid(self, kind: str, module: str, make: Callable[[], uuid_module.UUID]) -> uuid_module.UUID:
        import uuid as uuid_module

        stream = self.stream()
        if stream.suspended:
            return make()
        seq = stream.seq("uuid", module)
        if seq.pos < len(seq.recorded):
            served = uuid_module.UUID(seq.recorded[seq.pos])
            if served.version == _UUID_VERSIONS[kind]:
                seq.pos += 1
                seq.drawn.append(str(served))
                return served
        # uuid1/uuid6 draw their clock sequence from ``random``: generating one must not move the seeded
        # generator, or the draws after it would differ between the recording and the replay (served).
        state = _random_state() if self._random_saved is not None and kind in ("uuid1", "uuid6") else None
        stream.suspended = True
        try:
            value = make()
        finally:
            stream.suspended = False
            if state is not None:
                _random_state(state)
        seq.drawn.append(str(value))
        return value

    # named values ------------------------------------------------------------------------------------
    def value(self, name: str, fn: Callable[[], T]) -> T:
        from .capture import to_jsonable

        stream = self.stream()
        if stream.ignored:
            return fn()
        seq = stream.seq("values", name)
        served, value = seq.next_recorded()
        if served:
            seq.drawn.append(value)
            return value  # type: ignore[no-any-return]
        result = fn()
        plain = to_jsonable(result)
        if plain != result and self.ctx.mode == "record":
            raise TypeError(
                f"record_value({name!r}) got a {type(result).__name__}; a recorded value must be plain JSON "
                "(str, int, float, bool, None, lists and dicts of them), because replay returns it as JSON: "
                "convert it first, e.g. value.isoformat()"
            )
        seq.drawn.append(plain)
        return result

    # random ------------------------------------------------------------------------------------------
    def seed_random(self) -> None:
        import random

        recorded = (self.recorded or {}).get("random")
        if self.replaying and not recorded:
            return  # nothing recorded: leave the generator alone
        self.seed = int(recorded["seed"]) if recorded else int.from_bytes(os.urandom(8), "big")
        self._random_saved = random.getstate()
        random.seed(self.seed)
        self._random_seeded = random.getstate()

    def restore_random(self) -> None:
        import random

        if self._random_saved is None:
            return
        after = random.getstate()
        if after != self._random_seeded:
            self.random_after = after
        random.setstate(self._random_saved)
        self._random_saved = None

    # the event ---------------------------------------------------------------------------------------
    def event_data(self) -> dict[str, Any] | None:
        """The ``runtime.values`` event's data, or None when the run read nothing."""
        streams = sorted(self._by_name.values(), key=lambda s: (s.name != MAIN, s.name))
        clock: dict[str, dict[str, str]] = {}
        uuids: dict[str, dict[str, list[str]]] = {}
        values: dict[str, dict[str, list[Any]]] = {}
        for st in streams:
            # Clock offsets: microseconds from the previous read of the same stream and module (the first
            # from the run's start), as one space-separated string: a library reading thousands of times
            # costs a few bytes per read and one line in the (pretty-printed) cassette, not one per read.
            for module, q in sorted(st.clock.items()):
                if q.drawn:
                    offsets = _deltas(q.drawn, self.start_us)
                    clock.setdefault(st.name, {})[module] = " ".join(map(str, offsets))
            for module, q in sorted(st.uuid.items()):
                if q.drawn:
                    uuids.setdefault(st.name, {})[module] = list(q.drawn)
            for name, q in sorted(st.values.items()):
                if q.drawn:
                    values.setdefault(name, {})[st.name] = list(q.drawn)
        if not (clock or uuids or values or self.random_after is not None):
            return None
        data: dict[str, Any] = {"sources": list(self.sources), "reads": {}}
        if clock:
            data["reads"]["clock"] = {
                st.name: {m: len(q.drawn) for m, q in sorted(st.clock.items()) if q.drawn}
                for st in streams
                if st.name in clock
            }
            data["clock"] = {"start": _iso_us(self.start_us), "start_us": self.start_us, "streams": clock}
        if uuids:
            data["reads"]["uuid"] = {k: {m: len(v) for m, v in by.items()} for k, by in uuids.items()}
            data["uuid"] = uuids
        if self.random_after is not None:
            digest = hashlib.sha256(repr(self.random_after).encode()).hexdigest()[:16]
            data["random"] = {"seed": self.seed, "state_after": digest}
        if values:
            data["reads"]["values"] = {n: {k: len(v) for k, v in s.items()} for n, s in values.items()}
            data["values"] = values
        return data


def describe_data(data: Mapping[str, Any]) -> str:
    """One line for the timeline: ``clock 3 reads from 2026-11-30T14:57:28Z, uuid 5, random, values: seq``."""
    parts: list[str] = []
    reads = data.get("reads") or {}

    def total(source: str) -> int:
        return sum(sum(m.values()) for m in (reads.get(source) or {}).values() if isinstance(m, dict))

    clock = data.get("clock") or {}
    if clock:
        parts.append(f"clock {total('clock')} read(s) from {str(clock.get('start', '?'))[:19]}Z")
    if data.get("uuid"):
        parts.append(f"uuid {total('uuid')}")
    if data.get("random"):
        parts.append(f"random seed {data['random'].get('seed')}")
    if data.get("values"):
        parts.append("values " + ", ".join(sorted(data["values"])))
    streams = sorted({s for src in ("clock", "uuid") for s in (reads.get(src) or {})})
    where = f" in {', '.join(streams)}" if len(streams) > 1 else ""
    return (", ".join(parts) or "nothing read") + where


def _serves(thread: threading.Thread) -> bool:
    """Whether ``thread`` belongs to an in-process server (``socketserver``/``http.server``, uvicorn...):
    a service double the test runs next to the agent reads the clock for its own answers."""
    target = getattr(thread, "_target", None)
    if target is None:
        return False
    socketserver = sys.modules.get("socketserver")
    if socketserver is not None and isinstance(getattr(target, "__self__", None), socketserver.BaseServer):
        return True
    module = str(getattr(target, "__module__", None) or "")
    return module.split(".")[0] in _SERVER_MODULES


def _random_state(state: Any = None) -> Any:
    import random

    if state is None:
        return random.getstate()
    random.setstate(state)
    return state


def _iso_us(us: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _squeeze_digits(label: str) -> str:
    out: list[str] = []
    for c in label:
        if c == "N" and out and out[-1] == "N":
            continue
        out.append(c)
    return "".join(out)


def _deltas(values: list[int], start: int) -> list[int]:
    out: list[int] = []
    prev = start
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def _recorded_streams(recorded: Mapping[str, Any]) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """Per stream name, per source (``clock`` in absolute us, ``uuid``, ``values``), per module or value
    name: the recorded values."""
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    clock = recorded.get("clock") or {}
    start = int(clock.get("start_us", 0))
    for name, by_module in (clock.get("streams") or {}).items():
        for module, deltas in by_module.items():
            absolute: list[int] = []
            prev = start
            for d in deltas.split() if isinstance(deltas, str) else deltas:
                prev += int(d)
                absolute.append(prev)
            out.setdefault(name, {}).setdefault("clock", {})[module] = absolute
    for name, by_module in (recorded.get("uuid") or {}).items():
        for module, uuids in by_module.items():
            out.setdefault(name, {}).setdefault("uuid", {})[module] = [str(u) for u in uuids]
    for value_name, per_stream in (recorded.get("values") or {}).items():
        for name, drawn in per_stream.items():
            out.setdefault(name, {}).setdefault("values", {})[value_name] = list(drawn)
    return out


def recorded_data(ctx: RunContext) -> dict[str, Any] | None:
    """The data of the recorded run's ``runtime.values`` event (replay), if it has one."""
    if ctx.recorded is None:
        return None
    for event in reversed(ctx.recorded.events):
        if event.type == EVENT_TYPE:
            return dict(event.data)
    return None


# ------------------------------------------------------------------------------- process-wide patches

# Kept in the uuid module itself, not here: a second copy of this module (pytester re-imports modules a
# session imported first) must still find and restore what the first copy patched.
_UUID_STATE_GLOBAL: Final = "__agentreplay_runtime_uuid_state__"


class ClockPatch:
    """Our time-machine traveller while the clock is patched, and the clock it reads underneath.

    Process-wide (:data:`_CLOCK`): time-machine patches the C clock functions for every thread of the
    process. A second copy of this module pushes a traveller of its own on time-machine's stack, which reads
    the first copy's through :attr:`real_ns` (the read comes from this package, so it is not recorded).
    """

    __slots__ = ("below", "real_ns", "travel", "traveller")

    def __init__(self) -> None:
        self.traveller: Any = None
        self.travel: Any = None
        self.below: Any = None
        # What our traveller reads underneath: the traveller below ours, else the unpatched clock.
        self.real_ns: Callable[[], int] | None = None

    def start(self) -> None:
        import time_machine

        stack = getattr(time_machine, "traveller_stack", None)
        self.below = stack[-1] if stack else None
        self.travel = time_machine.travel(None, tick=True)
        self.traveller = self.travel.start()
        # Every patched read asks the top traveller for ``time_ns()``: ours answers from the run.
        self.traveller.time_ns = _read_clock_ns
        if self.below is not None:
            self.real_ns = self.below.time_ns
        else:
            # The C function behind time-machine's escape hatch (``escape_hatch.time.time_ns``) without the
            # Python method around it: this is read once per patched read.
            c_module = sys.modules.get("_time_machine")
            self.real_ns = (
                getattr(c_module, "original_time_ns", None) or time_machine.escape_hatch.time.time_ns
            )

    def stop(self) -> None:
        import time_machine

        stack = getattr(time_machine, "traveller_stack", [])
        if self.travel is not None and stack and stack[-1] is self.traveller:
            self.travel.stop()
        elif self.travel is not None and self.traveller in stack:
            # A traveller the test started during the run is still on top: take ours out from under it.
            stack.remove(self.traveller)
        self.real_ns = None
        self.traveller = self.travel = self.below = None


class UuidPatch:
    """The ``uuid`` functions whose code is swapped for a trampoline, and their genuine versions.

    Process-wide (:data:`_UUID`): the code objects of ``uuid.uuid1/4/6/7`` themselves are swapped. What was
    swapped is kept in the ``uuid`` module (:data:`_UUID_STATE_GLOBAL`), so every copy of this module finds
    the same record; only the dispatcher the trampoline calls belongs to the copy that installed last.
    """

    __slots__ = ("codes", "originals")

    def __init__(self) -> None:
        import uuid as uuid_module

        state = uuid_module.__dict__.setdefault(_UUID_STATE_GLOBAL, ({}, {}))
        # name -> a copy of the genuine function (what the trampoline falls back to)
        self.originals: dict[str, types.FunctionType] = state[0]
        # name -> the genuine code object, put back on unpatch
        self.codes: dict[str, types.CodeType] = state[1]

    def patch(self, dispatch: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> None:
        import uuid as uuid_module

        uuid_module.__dict__[_TRAMPOLINE_GLOBAL] = dispatch
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
            # A fixed source (the name is one of _UUID_FUNCTIONS): the body the patched function runs. Its
            # globals are the uuid module's, where the dispatcher was put above.
            namespace: dict[str, Any] = {}
            exec(
                f"def {name}(*args, **kwargs):\n    return {_TRAMPOLINE_GLOBAL}({name!r}, args, kwargs)\n",
                namespace,
            )
            fn.__code__ = namespace[name].__code__

    def unpatch(self) -> None:
        import uuid as uuid_module

        for name, code in self.codes.items():
            getattr(uuid_module, name).__code__ = code
        self.codes.clear()
        self.originals.clear()
        uuid_module.__dict__.pop(_TRAMPOLINE_GLOBAL, None)


class InstalledRuns:
    """The runs whose runtime values are recorded or served now; the clock and uuid patches stay while
    one of them needs them.

    Process-wide (:data:`_INSTALLED`), like the patches: concurrent runs (async tests, nested sessions)
    share them, and a read from any thread is matched to its run (:func:`_state`).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[RuntimeValues] = []

    def add(self, state: RuntimeValues, chosen: tuple[str, ...]) -> None:
        with self.lock:
            if "clock" in chosen and _CLOCK.traveller is None:
                _CLOCK.start()
            if "uuid" in chosen and (not self.runs or not _UUID.codes):
                _UUID.patch(_dispatch_uuid)
            self.runs.append(state)

    def remove(self, state: RuntimeValues) -> None:
        with self.lock:
            if state in self.runs:
                self.runs.remove(state)
            if not self.runs:
                if _CLOCK.traveller is not None:
                    _CLOCK.stop()
                if _UUID.codes:
                    _UUID.unpatch()


_CLOCK = ClockPatch()
_UUID = UuidPatch()
_INSTALLED = InstalledRuns()


def _underlying_ns() -> int:
    """The clock under ours: a traveller the test started itself, else the real clock."""
    real = _CLOCK.real_ns
    if real is not None:
        return real()
    import time

    return time.time_ns()


@functools.cache
def _excluded(module: str) -> bool:
    return module in _EXCLUDED_MODULES or module.startswith(_EXCLUDED_PREFIXES)


def _state(source: str) -> RuntimeValues | None:
    installed = _INSTALLED.runs
    state: RuntimeValues | None
    if not installed:
        return None
    from .capture import current_run

    # The run the reading code belongs to, when it has one: a run some caller started and never finished
    # must not take the reads of the run that is current now.
    ctx = current_run()
    found = ctx.extensions.get(EXTENSION) if ctx is not None else None
    if isinstance(found, RuntimeValues):
        state = found
    elif len(installed) == 1:
        state = installed[0]
    else:
        return None
    return state if source in state.sources and state.active else None


def _read_clock_ns() -> int:
    """time-machine calls this for every patched clock read (it replaces our traveller's ``time_ns``)."""
    real_ns = _CLOCK.real_ns
    real = real_ns() if real_ns is not None else _underlying_ns()
    try:
        module = sys._getframe(1).f_globals.get("__name__") or ""
    except ValueError:  # called with no Python frame at all
        return real
    if _excluded(module):
        return real
    installed = _INSTALLED.runs
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
    return state.uuid(kind, module or "?", lambda: original(*args, **kwargs))


def install(ctx: RunContext, sources: Iterable[str] | None = None) -> RuntimeValues:
    """Start recording (or serving) the runtime values of ``ctx``; ``sources`` default to all three."""
    chosen = DEFAULT_SOURCES if sources is None else tuple(s for s in SOURCES if s in tuple(sources))
    existing = ctx.extensions.get(EXTENSION)
    if isinstance(existing, RuntimeValues):
        return existing
    state = RuntimeValues(ctx, chosen, recorded_data(ctx))
    _INSTALLED.add(state, chosen)
    if "random" in chosen:
        state.seed_random()
    ctx.extensions[EXTENSION] = state
    ctx.on_release(lambda: _release(ctx))
    return state


def _release(ctx: RunContext) -> None:
    uninstall(ctx)


def uninstall(ctx: RunContext) -> RuntimeValues | None:
    """Stop serving/recording for ``ctx`` (idempotent); the patches go when the last run uninstalls."""
    state = ctx.extensions.get(EXTENSION)
    if not isinstance(state, RuntimeValues) or not state.active:
        return None
    state.active = False
    state.restore_random()
    _INSTALLED.remove(state)
    return state


def start_run(ctx: RunContext) -> None:
    """Called when a run starts (:func:`pytest_agentreplay.runs.start`): install the sources its settings
    name."""
    if ctx.mode == "audit":
        return
    sources = ctx.settings.get("runtime_values")
    install(ctx, DEFAULT_SOURCES if sources is None else sources)


def finish_run(ctx: RunContext) -> None:
    """Called when a run ends (:func:`pytest_agentreplay.runs.finish`): uninstall; add the ``runtime.values``
    event if the run read any."""
    state = uninstall(ctx)
    if state is None:
        return
    data = state.event_data()
    if data is not None:
        ctx.recorder.emit(EVENT_TYPE, actor="runtime", event_class="input", data=data, trusted=True)


# ------------------------------------------------------------------------------------------------ API


def record_value(name: str, fn: Callable[[], T]) -> T:
    """Record an app-specific nondeterministic value (a database sequence, a feature-flag draw) by name.

    Outside a run ``fn()`` is returned as is (production code can keep the call). While a run records,
    ``fn()``'s result is recorded (it must be plain JSON); in replay the recorded values of ``name`` are
    returned in order per thread/task (as JSON: a tuple comes back as a list) and ``fn`` is not called,
    until the run asks for more than was recorded.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("record_value needs a non-empty name")
    from .capture import current_run

    ctx = current_run()
    state = ctx.extensions.get(EXTENSION) if ctx is not None else None
    if not isinstance(state, RuntimeValues) or not state.active:
        return fn()
    return state.value(name, fn)
