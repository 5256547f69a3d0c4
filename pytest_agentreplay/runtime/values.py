"""Runtime values (docs/runtime-values.md): the wall clock, ``uuid`` and ``random`` values an agent reads,
recorded per *stream* (thread or asyncio task) into one ``runtime.values`` event before ``run.end`` and
served back in order in replay; :func:`record_value` for any other value. Past the recording the clock
advances in real time from the last recorded value; ``time.monotonic``/``perf_counter`` are never touched.

Stream names are stable across runs: ``main`` (the thread that started the run, outside a task),
``task:<coroutine qualname>#<n>`` and ``thread:<thread name, digits as N>#<n>``, numbered by first read.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
import uuid as uuid_module
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..core.capture import current_run, to_jsonable
from ..core.constants import DEFAULT_SOURCES, SOURCES
from ..core.json_copy import copy_json
from .data import EVENT_TYPE, recorded_streams, values_key_order
from .patches import INSTALLED, random_call, underlying_ns

if TYPE_CHECKING:
    from ..core.capture import RunContext

T = TypeVar("T")

MAIN: Final = "main"
_ISO_US: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_UUID_VERSIONS: Final = {"uuid1": 1, "uuid4": 4, "uuid6": 6, "uuid7": 7}
_SERVER_MODULES: Final = frozenset({"socketserver", "wsgiref", "uvicorn", "hypercorn", "werkzeug"})


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
        self._recorded_streams = recorded_streams(self.recorded) if self.recorded else {}
        clock = (self.recorded or {}).get("clock") or {}
        real_ns = underlying_ns()
        self.start_us: int = int(clock["start_us"]) if "start_us" in clock else real_ns // 1000
        # The latest served value of any stream: a stream the recording lacks continues from it.
        self.anchor: tuple[int, int] = (self.start_us, real_ns)
        self.seed: int | None = None
        self._random_saved: Any = None
        self._random_seeded: Any = None
        # Between the run's start and the test body (pytest only): reseeds by others are undone at the body.
        self.holding = False
        self._random_own: Any = None
        self.random_after: Any = None
        self.active = True
        # Takes the run's patches off again (set by :func:`start_run`).
        self.unpatch: Callable[[], None] | None = None
        if ctx.rerecord is not None:
            ctx.rerecord.on_live(self._go_live)

    def _go_live(self) -> None:
        """The run turned live at its first drift: values drawn from now on are live."""
        with self._lock:
            self.replaying = False
            self.recorded = None
            self._recorded_streams = {}
            for stream in self._by_name.values():
                stream.recorded = {}
                for table in (stream.clock, stream.uuid, stream.values):
                    for seq in table.values():
                        del seq.recorded[seq.pos :]

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
        thread = threading.current_thread()
        return self._streams.get((thread, task)) or self._new_stream(thread, task)

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
                label = "thread:" + re.sub("N+", "N", "".join("N" if c.isdigit() else c for c in thread.name))
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

    def uuid(self, kind: str, module: str, make: Callable[[], uuid_module.UUID]) -> uuid_module.UUID:
        stream = self.stream()
        if stream.suspended:
            return make()
        seq = stream.uuid.get(module) or stream.seq("uuid", module)
        if seq.pos < len(seq.recorded):
            served = uuid_module.UUID(seq.recorded[seq.pos])
            if served.version == _UUID_VERSIONS[kind]:
                seq.pos += 1
                seq.drawn.append(str(served))
                return served
        # uuid1/uuid6 draw their clock sequence from ``random``: generating one must not move the seeded
        # generator, or the draws after it would differ between the recording and the replay (served).
        seeded = self._random_saved is not None and kind in ("uuid1", "uuid6")
        state = random_call("getstate") if seeded else None
        stream.suspended = True
        try:
            value = make()
        finally:
            stream.suspended = False
            if state is not None:
                random_call("setstate", state)
        seq.drawn.append(str(value))
        return value

    def value(self, name: str, fn: Callable[[], T]) -> T:
        stream = self.stream()
        if stream.ignored:
            return fn()
        seq = stream.seq("values", name)
        served, value = seq.next_recorded()
        if served:
            seq.drawn.append(value)
            # The agent's own copy: what it does to the value must not reach the replayed event (drawn).
            return copy_json(value)  # type: ignore[no-any-return]
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

    def seed_random(self) -> bool:
        """Seed ``random`` for the run; False when a replay recorded no seed (the generator is left alone)."""
        recorded = (self.recorded or {}).get("random")
        if self.replaying and not recorded:
            return False
        self.seed = int(recorded["seed"]) if recorded else int.from_bytes(os.urandom(8), "big")
        self._random_saved = random_call("getstate")
        random_call("seed", self.seed)
        self._random_seeded = random_call("getstate")
        self.holding = True
        return True

    def reseeding(self) -> None:
        """``random.seed``/``setstate`` is about to be called: while the run holds the generator for its
        body, keep the run's state from before the first such reseed to take back when the body starts."""
        if self.holding and self._random_own is None and self._random_saved is not None:
            self._random_own = random_call("getstate")

    def body_starts(self) -> None:
        """The test body starts: the seeds of plugins and fixtures since the run began (pytest-randomly
        reseeds in setup and again just before the body) are undone, so the agent draws from the run's seed
        in the recording and in every replay, whatever was seeded; later reseeds are the agent's own."""
        if not self.holding:
            return
        self.holding = False
        if self._random_own is not None:
            random_call("setstate", self._random_own)
            self._random_own = None

    def restore_random(self) -> None:
        self.holding = False
        if self._random_saved is None:
            return
        after = random_call("getstate")
        if after != self._random_seeded:
            self.random_after = after
        random_call("setstate", self._random_saved)
        self._random_saved = None

    def stop(self) -> None:
        """Stop serving/recording (idempotent); each patch goes when the last run reading it does."""
        if not self.active:
            return
        self.active = False
        self.restore_random()
        if self.unpatch is not None:
            self.unpatch()

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
                    offsets = (v - prev for v, prev in zip(q.drawn, [self.start_us, *q.drawn], strict=False))
                    clock.setdefault(st.name, {})[module] = " ".join(map(str, offsets))
            for module, q in sorted(st.uuid.items()):
                if q.drawn:
                    uuids.setdefault(st.name, {})[module] = list(q.drawn)
            for name, q in sorted(st.values.items()):
                if q.drawn:
                    values.setdefault(name, {})[st.name] = list(q.drawn)
        if not (clock or uuids or values or self.random_after is not None):
            return None
        reads: dict[str, Any] = {}
        data: dict[str, Any] = {"sources": list(self.sources), "reads": reads}
        if clock:
            reads["clock"] = {k: {m: len(v.split()) for m, v in by.items()} for k, by in clock.items()}
            start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=self.start_us)
            data["clock"] = {"start": start.strftime(_ISO_US), "start_us": self.start_us, "streams": clock}
        if uuids:
            reads["uuid"] = {k: {m: len(v) for m, v in by.items()} for k, by in uuids.items()}
            data["uuid"] = uuids
        if self.random_after is not None:
            digest = hashlib.sha256(repr(self.random_after).encode()).hexdigest()[:16]
            data["random"] = {"seed": self.seed, "state_after": digest}
        if values:
            reads["values"] = {n: {k: len(v) for k, v in s.items()} for n, s in values.items()}
            data["values"] = values
            if orders := values_key_order(values):
                data["key_order"] = orders
        return data


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


def recorded_data(ctx: RunContext) -> dict[str, Any] | None:
    """The data of the recorded run's ``runtime.values`` event (replay), if it has one."""
    if ctx.recorded is None:
        return None
    for event in reversed(ctx.recorded.events):
        if event.type == EVENT_TYPE:
            return dict(event.data)
    return None


def start_run(ctx: RunContext) -> None:
    """Record or serve the sources the run's settings name (all three by default)."""
    sources = ctx.settings.runtime_values
    if ctx.mode == "audit" or ctx.rooms.existing(RuntimeValues) is not None:
        return
    chosen = DEFAULT_SOURCES if sources is None else tuple(s for s in SOURCES if s in sources)
    state = ctx.rooms.of(RuntimeValues, lambda: RuntimeValues(ctx, chosen, recorded_data(ctx)))
    # Reseeds are watched only for a run that seeded: one that leaves the generator alone has none to undo.
    if "random" in chosen and not state.seed_random():
        chosen = tuple(s for s in chosen if s != "random")
    state.unpatch = INSTALLED.add(state, chosen)
    ctx.on_release(state.stop)


def finish_run(ctx: RunContext) -> None:
    """Stop; add the ``runtime.values`` event if the run read any."""
    state = ctx.rooms.existing(RuntimeValues)
    if state is None or not state.active:
        return
    state.stop()
    data = state.event_data()
    if data is not None:
        ctx.recorder.emit(EVENT_TYPE, actor="runtime", event_class="input", data=data, trusted=True)


def record_value(name: str, fn: Callable[[], T]) -> T:
    """Record an app-specific nondeterministic value (a database sequence, a feature-flag draw) by name.

    Outside a run ``fn()`` is returned as is (production code can keep the call). While a run records,
    ``fn()``'s result is recorded (it must be plain JSON); in replay the recorded values of ``name`` are
    returned in order per thread/task (as JSON: a tuple comes back as a list) and ``fn`` is not called,
    until the run asks for more than was recorded.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("record_value needs a non-empty name")
    ctx = current_run()
    state = ctx.rooms.existing(RuntimeValues) if ctx is not None else None
    if state is None or not state.active:
        return fn()
    return state.value(name, fn)
