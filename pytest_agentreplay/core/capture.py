"""The recorder: appends events to the active run in a defined order, from any thread or task.

The active run lives in a context variable (concurrent async tests stay apart); a thread that did not
inherit it (a plain ``ThreadPoolExecutor``) falls back to the process's only active run, so its calls
never escape the run and its network guard."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from .canonical import hash_value, key_order
from .constants import Mode
from .documents import Document
from .events import Actor, DataClass, EffectInfo, Event, EventClass, EventType, PayloadRef, RunMeta, ToolInfo
from .failures import RunFailures
from .run_settings import RunSettings
from .run_state import ReplayState, RequestMemo, Rerecord, RunRedactor, RunRooms

# The last whole second stamped and its "YYYY-MM-DDTHH:MM:SS.%06dZ" template: one event per replayed call is
# stamped, and formatting a datetime costs more than the rest of recording it; only the microseconds change
# (a printf field: cheaper to fill than an f-string's format spec). Shared by every thread: one item swap,
# so threads racing both store a correct pair.
_STAMP: list[tuple[int, str]] = [(-1, "")]


def utc_now() -> str:
    """``2025-01-31T12:00:00.123456Z``."""
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _STAMP[0]
    if cached[0] != second:
        template = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.%%06dZ")
        cached = _STAMP[0] = (second, template)
    return cached[1] % micros


def state_hash(state: object) -> str:
    """sha256 of the canonical JSON of ``state`` (objects with ``model_dump``/``__dict__`` are converted)."""
    return hash_value(to_jsonable(state))


def to_jsonable(value: object) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((to_jsonable(v) for v in value), key=repr)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return to_jsonable(dump(mode="json"))
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if hasattr(value, "__dict__"):
        return to_jsonable(vars(value))
    return repr(value)


def error_text(exc: BaseException) -> str:
    """A failed call's ``data.error``."""
    return f"{type(exc).__name__}: {exc}"


def payload(value: object, data_class: DataClass = "internal", media_type: str | None = None) -> PayloadRef:
    return PayloadRef(inline=to_jsonable(value), data_class=data_class, media_type=media_type)


def served_payload(value: object) -> PayloadRef:
    """The payload of a value replay hands back to user code, with its objects' key order (files sort)."""
    inline = to_jsonable(value)
    return PayloadRef(inline=inline, key_order=key_order(inline))


class Recorder:
    """The ordered events of one run; ``seq`` is assigned under a lock (threads share a run)."""

    def __init__(self, run: RunMeta) -> None:
        self.run = run
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._attempts: dict[tuple[str, str], int] = {}

    def emit(
        self,
        type: EventType,
        *,
        actor: Actor,
        event_class: EventClass,
        data: Document | None = None,
        tool: ToolInfo | None = None,
        input: PayloadRef | None = None,
        output: PayloadRef | None = None,
        effect: EffectInfo | None = None,
        state_hash: str | None = None,
        policy_version: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
        trusted: bool = False,
    ) -> Event:
        """Append one event. ``trusted=True`` skips the JSON conversion of ``data`` (already plain JSON)."""
        values = {
            "run_id": self.run.run_id,
            "seq": 0,
            "ts": utc_now(),
            "type": type,
            "actor": actor,
            "event_class": event_class,
            "trace_id": trace_id,
            "span_id": span_id,
            "state_hash": state_hash,
            "policy_version": policy_version,
            "tool": tool,
            "input_ref": input,
            "output_ref": output,
            "effect": effect,
            "data": (data or {}) if trusted else to_jsonable(data or {}),
        }
        with self._lock:
            values["seq"] = len(self.events)
            # Built here, unchecked (one event per replayed call); frozen, so built once its seq is known.
            event = Event.construct_trusted(values)
            self.events.append(event)
        return event

    def tool_result(
        self,
        tool: ToolInfo,
        result: object,
        error: str | None,
        data: Document,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        keep_output: bool = False,
    ) -> Event:
        """The ``tool.result`` event: the result, or the error in ``data`` (``keep_output``: both)."""
        if error is not None:
            data = {**data, "error": error}
        return self.emit(
            "tool.result",
            actor="tool",
            event_class="input",
            tool=tool,
            output=served_payload(result) if error is None or keep_output else None,
            data=data,
            trace_id=trace_id,
            span_id=span_id,
        )

    def next_attempt(self, name: str, key: str) -> int:
        """1 for the first call of a tool with this idempotency key (or argument hash), 2 for its retry..."""
        with self._lock:
            attempt = self._attempts.get((name, key), 0) + 1
            self._attempts[(name, key)] = attempt
            return attempt


class ToolOutcome(NamedTuple):
    """What a recorded ``@tool`` call gave back, served in its place during replay."""

    result: object
    error: str | None
    recorded_seq: int
    # Events the tool body produced while it ran during recording (its HTTP exchanges, model calls).
    # A served tool does not run, so they are emitted again: the history then matches the recording.
    nested: tuple[Event, ...] = ()
    # A ``@tool`` error's type and arguments (``data.exception``, see ``tool_values.exception_doc``), when
    # they rebuild it: served as the tool's own exception.
    exception: object = None


class RecordedRun(Protocol):
    """The recorded run a replay reads (``cassette.read.LoadedCassette``): header, events, their payloads."""

    run: RunMeta
    events: list[Event]

    def payload(self, ref: PayloadRef | None) -> Any: ...


class ToolServer(Protocol):
    """Serves recorded ``@tool`` results (:class:`~pytest_agentreplay.replay.tools.ToolReplayer`)."""

    def recorded_group(
        self, name: str, arguments: Document, *, ctx: RunContext, idempotency_key: str | None = None
    ) -> tuple[bool, object]: ...

    def serve(
        self, name: str, arguments: Document, idempotency_key: str | None, *, ctx: RunContext
    ) -> ToolOutcome: ...


class ServesInstead(Protocol):
    """A source answering a run instead of its cassette (``interop.vcr_serving.VcrServing``), asked by
    ``replay.policy.decide`` for each request's action (types of layers above core: the policy checks it)."""

    def decide(self, ctx: RunContext, request: Any, cls: Any) -> object: ...


class RunContext:
    """One run: its recorder, its mode (``record``, ``capture`` outside pytest, or a replay mode), and the
    per-run state of the layers above core (typed in :mod:`.run_state`, one attribute per owner)."""

    def __init__(
        self,
        recorder: Recorder,
        *,
        mode: Mode | str = Mode.RECORD,
        cassette: str | None = None,
        tools: ToolServer | None = None,
        recorded: RecordedRun | None = None,
        settings: RunSettings | Mapping[str, object] | None = None,
    ) -> None:
        self.recorder = recorder
        self.mode = Mode(mode)
        self.cassette = cassette
        self.tools = tools
        # The recorded cassette being replayed (None while recording).
        self.recorded = recorded
        if not isinstance(settings, RunSettings):
            settings = RunSettings.from_mapping(settings or {})
        self.settings: RunSettings = settings
        # The redactor cassettes are written with: live values are redacted the same way before they are
        # matched or compared with recorded (already redacted) ones. Set by whoever starts the run.
        self.redactor: RunRedactor | None = None
        # The thread the run began on: tool calls from other threads are concurrent (api.py).
        self.origin_thread: int | None = None
        # The network guard's memory (``guard/runs.py``): the name the run's child processes report under
        # (made when the guard first needs it), and IP address -> the allowed host name it was resolved
        # from, so the connect that follows is recognised. Per run: what one test's allowed name resolved
        # to must not admit that IP for another.
        self.guard_token: str | None = None
        self.resolved_hosts: dict[str, str] = {}
        self.requests = RequestMemo()
        # The framework adapters' (``frameworks/``): what unhooks those activated for the run
        # (``replay/runs.py``), and the agent runs (``gen_ai.agent.call.id``) whose tools a framework
        # wrapper records itself.
        self.unhook_frameworks: Callable[[], None] | None = None
        self.claimed_agent_runs: set[str] = set()
        self.replay = ReplayState()
        # Per-run state of the owners above core, one typed room per owner type.
        self.rooms = RunRooms()
        # Set by interop before the run starts; replay.policy asks it instead of the cassette.
        self.served_instead: ServesInstead | None = None
        # ``--agentreplay-record=drifted``: where this replay turns live (run_state.Rerecord); None otherwise.
        self.rerecord: Rerecord | None = None
        # model-comparison: recorded versus live decisions, for the report (replay/comparison.py).
        self.comparison: Document | None = None
        # What a replay served instead of spending (model calls, tokens, cost): ``replay.modes.not_spent``.
        self.not_spent: Document | None = None
        # Problems found during the run that must fail the test even if the agent swallowed them.
        self.failures = RunFailures()
        self._releases: list[Callable[[], None]] = []

    @property
    def recording(self) -> bool:
        return self.mode in _RECORDING

    def go_live(self, what: str) -> None:
        """Re-recording (:mod:`.rerecord`): the call ``what`` has no recorded match; record from it on."""
        rerecord = self.rerecord
        assert rerecord is not None, "go_live() outside a re-recording run"
        if rerecord.turn(len(self.recorder.events), what):
            self.mode = Mode.RECORD

    def executes_tool(self) -> bool:
        """Whether a ``@tool`` body runs (else its recorded result is served)."""
        return self.recording or self.mode is Mode.SANDBOX

    def start(self) -> None:
        # Plain JSON already (the agent's name is a string or None): trusted, not converted again.
        agent = self.recorder.run.agent
        self.recorder.emit(
            "run.start", actor="runtime", event_class="input", data={"agent": agent}, trusted=True
        )

    def finish(self, status: str = "ok", error: str | None = None) -> None:
        data: Document = {"status": status}
        if error is not None:
            data["error"] = error
        self.recorder.emit("run.end", actor="runtime", event_class="decision", data=data, trusted=True)

    def on_release(self, release: Callable[[], None]) -> None:
        """Call ``release`` when the run stops being active, finished or not (idempotent callables: a
        process-wide patch the run installed must not outlive it)."""
        self._releases.append(release)

    def release(self) -> None:
        while self._releases:
            self._releases.pop()()


_RECORDING = frozenset({Mode.RECORD, Mode.CAPTURE})

_CURRENT: ContextVar[RunContext | None] = ContextVar("pytest_agentreplay_run", default=None)


# The runs active in this process, in activation order (pytester's inner runs included).
_RUNS: list[RunContext] = []
_RUNS_LOCK = threading.Lock()


def active_runs() -> list[RunContext]:
    """Every run active in this process (for process-wide guards)."""
    with _RUNS_LOCK:
        return list(_RUNS)


def current_run() -> RunContext | None:
    ctx = _CURRENT.get()
    if ctx is not None:
        return ctx
    with _RUNS_LOCK:
        return _RUNS[0] if len(_RUNS) == 1 else None


@contextmanager
def activate(ctx: RunContext) -> Iterator[RunContext]:
    """Make ``ctx`` the active run for this context and, as fallback, for threads of this process."""
    token = push_active(ctx)
    try:
        yield ctx
    finally:
        pop_active(ctx, token)


def push_active(ctx: RunContext) -> object:
    """Non-context-manager form of :func:`activate` for fixtures that span setup and teardown."""
    token = _CURRENT.set(ctx)
    with _RUNS_LOCK:
        _RUNS.append(ctx)
    return token


def pop_active(ctx: RunContext, token: object) -> None:
    ctx.release()  # a run that never finished must not leave the clock patched
    with _RUNS_LOCK:
        if ctx in _RUNS:
            _RUNS.remove(ctx)
    try:
        _CURRENT.reset(token)  # type: ignore[arg-type]
    except ValueError:
        # Reset from another context (pytest may tear down in a different context): clear instead.
        _CURRENT.set(None)
