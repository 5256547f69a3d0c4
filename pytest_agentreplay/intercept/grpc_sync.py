"""What a sync grpcio call returns when this adapter answers it: a served call (result, ``with_call``'s call,
a future, a response iterator, or the ``grpc.RpcError`` raised) and a recording response stream. Built per
grpc module: their bases are grpc's own ABCs, which client interceptors and ``isinstance`` checks rely on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from ..http.grpc_calls import Outcome
from .grpc_capture import Capture, forwarding

if TYPE_CHECKING:
    from ..replay.faults import Fault


# grpc.Call and grpc.Future, but for ``cancel`` (which records the call too).
_CALL_METHODS = (
    "code details initial_metadata trailing_metadata is_active time_remaining add_callback "
    "cancelled running done result exception traceback add_done_callback"
)


def fault_status(fault: Fault) -> tuple[str, str]:
    """The status a client sees for an injected timeout or reset (sync and asyncio alike)."""
    return ("DEADLINE_EXCEEDED" if fault.kind == "timeout" else "UNAVAILABLE"), fault.message()


def finish_from(capture: Capture, call: Any) -> None:
    """Record the live call ``call`` (a finished ``grpc.Call``: its status is in) through ``capture``."""
    if capture.done:
        return
    code = call.code()
    name = getattr(code, "name", None)
    capture.finish(
        name if isinstance(name, str) else "UNKNOWN",
        call.details(),
        call.initial_metadata(),
        call.trailing_metadata(),
    )


def sync_classes(grpc: ModuleType) -> tuple[type, type]:
    """``(ServedCall, RecordingStream)`` deriving from ``grpc``'s RpcError, Call and Future."""
    rpc_error: Any = grpc.RpcError
    call_base: Any = grpc.Call
    future_base: Any = grpc.Future
    status_code: Any = grpc.StatusCode

    class ServedCall(rpc_error, call_base, future_base):  # type: ignore[misc]
        """A finished call answered from the cassette: raised as the error when its status is not OK."""

        def __init__(self, outcome: Outcome, responses: list[object], *, unary: bool) -> None:
            super().__init__(f"{outcome.code}: {outcome.details}")
            self._outcome = outcome
            self._responses = responses
            self._unary = unary
            self._pos = 0

        def __repr__(self) -> str:
            return f"<ServedCall (from the cassette) code={self.code()} details={self._outcome.details!r}>"

        __str__ = __repr__

        # grpc.Call / grpc.RpcContext
        def code(self) -> Any:
            return status_code.__members__.get(self._outcome.code, status_code.UNKNOWN)

        def details(self) -> str:
            return self._outcome.details

        def initial_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
            return self._outcome.initial

        def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
            return self._outcome.trailing

        def debug_error_string(self) -> str:
            return f"served from the cassette: {self._outcome.code} {self._outcome.details}"

        def _ended(self, *_: object) -> bool:
            return False

        # The call has ended: not active, nothing to cancel, no callback taken (grpc says so the same way).
        is_active = add_callback = cancel = cancelled = running = _ended

        def time_remaining(self) -> float | None:
            return None

        def done(self) -> bool:
            return True

        def result(self, timeout: float | None = None) -> object:
            if not self._outcome.ok:
                raise self
            return self._responses[0] if self._unary and self._responses else None

        def exception(self, timeout: float | None = None) -> BaseException | None:
            return None if self._outcome.ok else self

        def traceback(self, timeout: float | None = None) -> TracebackType | None:
            if self._outcome.ok:
                return None
            try:
                raise self
            except rpc_error as exc:
                tb: TracebackType | None = exc.__traceback__
                return tb

        def add_done_callback(self, fn: Callable[[object], None]) -> None:
            fn(self)

        # a response stream
        def __iter__(self) -> ServedCall:
            return self

        def __next__(self) -> object:
            if self._pos < len(self._responses):
                self._pos += 1
                return self._responses[self._pos - 1]
            if self._outcome.ok:
                raise StopIteration
            raise self

        next = __next__

    class RecordingStream(rpc_error, call_base, future_base):  # type: ignore[misc]
        """A live response stream: each message is handed on as it arrives; the call is recorded when the
        caller has seen its end (or cancels it, or drops it)."""

        def __init__(self, inner: Any, capture: Capture) -> None:
            super().__init__()
            self._inner = inner
            self._capture = capture

        def __repr__(self) -> str:
            return repr(self._inner)

        __str__ = __repr__

        def __iter__(self) -> RecordingStream:
            return self

        def __next__(self) -> object:
            try:
                return next(self._inner)
            except (StopIteration, rpc_error):
                finish_from(self._capture, self._inner)
                raise

        next = __next__

        def cancel(self) -> bool:
            cancelled: bool = self._inner.cancel()
            finish_from(self._capture, self._inner)
            return cancelled

        def __del__(self) -> None:
            # Dropped before its end (``break`` out of the loop): grpc cancels it; record what was read.
            capture = self.__dict__.get("_capture")
            if capture is not None and not capture.done:
                with contextlib.suppress(Exception):
                    self._inner.cancel()
                    finish_from(self._capture, self._inner)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):  # never our own attributes (``__del__`` after a failed ``__init__``)
                raise AttributeError(name)
            return getattr(self._inner, name)

    # What a caller asks of the stream beyond its messages is the live call's answer.
    forwarding(RecordingStream, "_inner", _CALL_METHODS.split())
    return ServedCall, RecordingStream
