"""The explicit event API agent code calls. Every function is a no-op when no run is active, so agent
code can keep these calls in production.
"""

from __future__ import annotations

import functools
import inspect
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, overload

from .core.capture import (
    Recorder,
    RunContext,
    activate,
    current_run,
    payload,
    state_hash,
    to_jsonable,
    utc_now,
)
from .core.constants import Mode
from .core.documents import Document
from .core.events import Actor, DataClass, RunMeta
from .core.tool_calls import EffectKind, tool_arguments
from .core.tool_calls import ToolCall as _ToolCall
from .exceptions import RecordedToolError as RecordedToolError  # importable from here as before

P = ParamSpec("P")
R = TypeVar("R")


def _bound_arguments(
    fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object]
) -> dict[str, object]:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return {"args": list(args), **kwargs}
    bound.apply_defaults()
    # A method's receiver is not an argument the model chose.
    return {name: value for name, value in bound.arguments.items() if name not in ("self", "cls")}


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    schema_version: str | None = None,
    effect: EffectKind = "read",
    idempotency_key: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    schema_version: str | None = None,
    effect: EffectKind = "read",
    idempotency_key: str | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a function as an agent tool.

    Recording runs it and records the call and its result (a ``write`` tool: an ``effect`` with a receipt);
    regression and model-comparison replay serve the recorded result without running it; sandbox runs it.
    ``idempotency_key`` names the parameter carrying the call's idempotency key. Results and exceptions
    come back with their type (``core/tool_values.py``), else as ``RecordedToolError``; a result that
    cannot be rebuilt is refused while recording (``ToolValueError``).
    """
    if effect not in ("read", "write"):
        raise ValueError(f"@tool effect must be 'read' or 'write', not {effect!r}")

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        tool_name = name or func.__name__

        def start(args: tuple[object, ...], kwargs: dict[str, object]) -> _ToolCall | None:
            ctx = current_run()
            if ctx is None:
                return None
            # Typed values are stored tagged (see core/tool_values.py); ``legacy``: their earlier form,
            # which a cassette recorded before typed values holds.
            arguments, legacy = tool_arguments(_bound_arguments(func, args, kwargs))
            plain = legacy if legacy is not None else arguments
            key = plain.get(idempotency_key) if idempotency_key else None
            return _ToolCall(
                ctx,
                tool_name,
                schema_version,
                effect,
                arguments,
                None if key is None else str(key),
                typed=True,
                legacy_arguments=legacy,
            )

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                call = start(args, kwargs)
                if call is None:
                    return await func(*args, **kwargs)
                if not call.executes:
                    return call.served()
                try:
                    result = await func(*args, **kwargs)
                except Exception as exc:
                    call.failed(exc)
                    raise
                return call.returned(result)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            call = start(args, kwargs)
            if call is None:
                return func(*args, **kwargs)
            if not call.executes:
                return call.served()  # type: ignore[return-value]
            try:
                result = func(*args, **kwargs)
            except Exception as exc:
                call.failed(exc)
                raise
            # A generator (or async generator) is recorded item by item as its caller consumes it.
            return call.returned(result)  # type: ignore[return-value]

        return wrapper

    return decorate(fn) if fn is not None else decorate


def record_state(
    state: object, *, snapshot: bool = False, label: str | None = None, data_class: DataClass = "internal"
) -> str | None:
    """Record a state transition; returns the state hash (sha256 of canonical JSON), or None when inactive."""
    ctx = current_run()
    if ctx is None:
        return None
    digest = _state_digest(ctx, state)
    data: Document = {"label": label} if label is not None else {}
    ctx.recorder.emit(
        "state.update",
        actor="runtime",
        event_class="decision",
        state_hash=digest,
        output=payload(state, data_class) if snapshot else None,
        data=data,
    )
    return digest


def _state_digest(ctx: RunContext, state: object) -> str:
    try:
        return state_hash(state)
    except ValueError as exc:  # a NaN or an infinity, or text no UTF-8 can hold (UnicodeEncodeError)
        from .core.unencodable import UNENCODABLE_FIXES, unencodable_evidence  # only on this error
        from .exceptions import UnencodableValueError

        evidence = [f"record_state: the state holds NaN or Infinity ({exc}), which JSON has no form for"]
        fixes = ["convert the float before recording the state (str() it or drop it)", UNENCODABLE_FIXES[-1]]
        if isinstance(exc, UnicodeEncodeError):
            evidence = unencodable_evidence("record_state", {"the state": to_jsonable(state)})
            fixes = list(UNENCODABLE_FIXES)
        raise UnencodableValueError(
            "record_state: the state has no canonical JSON form, so it has no state hash",
            evidence=evidence,
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=fixes,
        ) from None


def record_retrieval(
    query: str,
    *,
    document_ids: Sequence[str],
    corpus_version: str | None = None,
    scores: Sequence[float] | None = None,
    data_class: DataClass = "internal",
) -> None:
    """Record what a retrieval step returned: the query, the corpus version and the document IDs."""
    ctx = current_run()
    if ctx is None:
        return
    data: Document = {
        "query": query,
        "document_ids": list(document_ids),
        "corpus_version": corpus_version,
    }
    if scores is not None:
        data["scores"] = [float(s) for s in scores]
    ctx.recorder.emit("retrieval", actor="tool", event_class="input", data=data)


def record_policy(
    policy: str, verdict: str, *, version: str | None = None, reason: str | None = None
) -> None:
    """Record a policy decision (e.g. ``record_policy("refund-limit", "needs_approval", version="3")``)."""
    ctx = current_run()
    if ctx is None:
        return
    data: Document = {"policy": policy, "verdict": verdict}
    if reason is not None:
        data["reason"] = reason
    ctx.recorder.emit(
        "policy.decision", actor="policy", event_class="decision", policy_version=version, data=data
    )


def record_approval(
    status: Literal["requested", "granted", "denied"],
    *,
    by: str | None = None,
    subject: str | None = None,
    reason: str | None = None,
) -> None:
    """Record a human approval checkpoint."""
    if status not in ("requested", "granted", "denied"):
        raise ValueError(f"approval status must be requested, granted or denied, not {status!r}")
    ctx = current_run()
    if ctx is None:
        return
    given = {"status": status, "by": by, "subject": subject, "reason": reason}
    data: Document = {key: value for key, value in given.items() if value is not None}
    actor: Actor = "human" if status != "requested" else "runtime"
    ctx.recorder.emit("approval", actor=actor, event_class="decision", data=data)


@contextmanager
def capture_run(
    path: str | Path,
    *,
    agent: str | None = None,
    run_id: str | None = None,
    metadata: Document | None = None,
    blob_dir: str | Path | None = None,
    intercept_http: bool = True,
) -> Iterator[RunContext]:
    """Capture a run outside pytest (production or staging) into a cassette at ``path``, written
    atomically when the block exits, also after an exception (the run then ends with status ``error``).

    Inside a replaying test it captures nothing and writes no file: it yields the test's run.
    """
    replaying = _replaying_run()
    if replaying is not None:
        yield replaying
        return
    # heavy: production code importing ``@tool`` does not load the capture machinery (the runtime-values
    # patcher and framework adapters, the cassette writer, the redaction rules) until a run is captured.
    from .cassette.write import save_cassette
    from .redaction import Redactor
    from .replay import runs

    meta = RunMeta(run_id=run_id or uuid.uuid4().hex, agent=agent, recorded_at=utc_now(), **(metadata or {}))
    ctx = RunContext(Recorder(meta), mode=Mode.CAPTURE, cassette=str(path))
    uninstall: Callable[[], None] | None = None
    if intercept_http:
        from .intercept import install  # heavy: the interceptors load only when a capture intercepts HTTP

        uninstall = install()
    try:
        with activate(ctx):
            runs.start(ctx)
            try:
                yield ctx
            except BaseException as exc:
                runs.finish(ctx, "error", f"{type(exc).__name__}: {exc}")
                raise
            else:
                runs.finish(ctx, "ok")
    finally:
        if uninstall is not None:
            uninstall()
        # The built-in rules, in a redactor of this save's own: it remembers the messages a conversation's
        # requests share and redacts each once (the process-wide default forgets them, to hold nothing).
        save_cassette(
            Path(path),
            meta,
            ctx.recorder.events,
            blob_dir=Path(blob_dir) if blob_dir else None,
            redactor=Redactor(),
            keep_headers={ctx.settings.idempotency_header},
        )


def _replaying_run() -> RunContext | None:
    current = current_run()
    if current is not None and not current.recording:
        return current
    guard = sys.modules.get("pytest_agentreplay.guard")
    if guard is None:
        # Never imported: no replay run can be active in this process.
        return None
    runs: list[RunContext] = guard.guarding_runs()
    return runs[0] if runs else None
