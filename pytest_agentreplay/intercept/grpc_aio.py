"""The call objects a ``grpc.aio`` multicallable returns in a run: a replayed call, which decides nothing
until its first ``await`` (or read, or status question) has the request messages (a request stream read to
its end, from its iterator or from ``write`` up to ``done_writing``), and a live call recorded once its
caller has seen it end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..http.grpc_calls import Outcome, served_outcome
from ..replay.policy import Refuse, Send, decide
from . import permitted
from .grpc_capture import (
    Capture,
    Metadata,
    Site,
    fault_outcome,
    forwarding,
    metadata_of,
    site_of,
    teed,
    unsupported_route,
)

if TYPE_CHECKING:
    from ..core.capture import RunContext

# grpc.aio's call methods, but for reading (which records the call at its end) and ``add_done_callback``.
_CALL_METHODS = (
    "write done_writing code details initial_metadata trailing_metadata wait_for_connection "
    "cancel cancelled done time_remaining"
)
# Starts the live call for a replayed one the policy sends: (action, the request or request messages).
GoLive = Callable[[Send, object], Any]
Method = Callable[..., Any]


def aio_call(grpc: ModuleType) -> Callable[..., Any]:
    """What a ``grpc.aio`` multicallable's ``__call__`` does in a run: ``call(ctx, multicallable, request,
    args, kwargs, shape=, original=)`` returns a ``ReplayCall`` or a ``RecordingCall``, both deriving from
    ``grpc.aio``'s four call ABCs."""
    aio: Any = grpc.aio
    status_code: Any = grpc.StatusCode
    error_cls: Any = aio.AioRpcError
    eof: Any = aio.EOF
    bases: Any = (aio.UnaryUnaryCall, aio.UnaryStreamCall, aio.StreamUnaryCall, aio.StreamStreamCall)

    def code_of(outcome: Outcome) -> Any:
        return status_code.__members__.get(outcome.code, status_code.UNKNOWN)

    def error(outcome: Outcome) -> BaseException:
        failed: BaseException = error_cls(
            code_of(outcome), aio.Metadata(*outcome.initial), aio.Metadata(*outcome.trailing), outcome.details
        )
        return failed

    class RecordingCall(*bases):  # type: ignore[misc]
        def __init__(self, real: Any, capture: Capture) -> None:
            self._real = real
            self._capture = capture

        async def _finish(self) -> None:
            if self._capture.done:
                return
            real = self._real
            code = await real.code()
            self._capture.finish(
                code.name, await real.details(), await real.initial_metadata(), await real.trailing_metadata()
            )

        async def _step(self, step: Awaitable[object], ends: bool) -> object:
            """``step``'s result; the call is recorded once it ends (``ends``, EOF read, or its error)."""
            try:
                result = await step
            except error_cls:
                await self._finish()
                raise
            if ends or result is eof:
                await self._finish()
            return result

        def __await__(self) -> Generator[Any, None, object]:
            return self._step(self._real, True).__await__()

        async def __aiter__(self) -> AsyncIterator[object]:
            messages = aiter(self._real)
            while (message := await self._step(anext(messages, eof), False)) is not eof:
                yield message

        async def read(self) -> object:
            return await self._step(self._real.read(), False)

        def add_done_callback(self, callback: Callable[[object], None]) -> None:
            self._real.add_done_callback(lambda _: callback(self))

        def __del__(self) -> None:
            # Dropped before its end (``break`` out of ``async for``): record what the caller read.
            capture = self.__dict__.get("_capture")
            if capture is not None and not capture.done:
                with contextlib.suppress(Exception):
                    self._real.cancel()
                    capture.finish("CANCELLED", "dropped by the caller before its end", (), ())

    # What a caller asks of the call beyond its messages is the live call's answer.
    forwarding(RecordingCall, "_real", _CALL_METHODS.split())

    class ReplayCall(*bases):  # type: ignore[misc]
        def __init__(
            self,
            ctx: RunContext,
            site: Site,
            metadata: Metadata | None,
            shape: str,
            request: object,
            go_live: GoLive,
        ) -> None:
            self._ctx = ctx
            self._site = site
            self._metadata = list(metadata or ())
            self._shape = shape
            self._request = request
            self._go_live = go_live
            self._writes: list[object] = []
            self._writes_done = asyncio.Event()
            self._lock = asyncio.Lock()
            self._resolved = False
            self._outcome = Outcome("OK", "")
            self._responses: list[object] = []
            self._pos = 0
            self._live: Any = None
            self._callbacks: list[Callable[[object], None]] = []

        async def _messages(self) -> list[object]:
            request = self._request
            if self._shape[0] == "u":
                return [request]
            if request is None:
                await self._writes_done.wait()
                return self._writes
            if hasattr(request, "__aiter__"):
                return [message async for message in request]
            return list(request)  # type: ignore[call-overload,no-any-return]

        async def _resolve(self) -> None:
            if self._resolved:
                return
            async with self._lock:
                if self._resolved:
                    return
                messages = await self._messages()
                http = self._site.request(self._metadata, messages)
                action = decide(self._ctx, http)
                self._resolved = True
                try:
                    if isinstance(action, Refuse):
                        raise action.exception(lambda fault: error(fault_outcome(fault)))
                    if isinstance(action, Send):
                        if action.url is not None or action.fault is not None:
                            raise unsupported_route(self._ctx, http, "re-routed or given a fault")
                        sent = messages[0] if self._shape[0] == "u" else iter(messages)
                        self._live = self._go_live(action, sent)
                        return
                    self._outcome = served_outcome(action.response)
                    self._responses = [self._site.from_bytes(raw) for raw in self._outcome.messages]
                finally:
                    for callback in self._callbacks:
                        callback(self)

        async def _result(self) -> object:
            await self._resolve()
            if self._live is not None:
                return await self._live
            if not self._outcome.ok:
                raise error(self._outcome)
            return self._responses[0] if self._responses else None

        def __await__(self) -> Generator[Any, None, object]:
            return self._result().__await__()

        async def __aiter__(self) -> AsyncIterator[object]:
            while (message := await self.read()) is not eof:
                yield message

        async def read(self) -> object:
            await self._resolve()
            if self._live is not None:
                return await self._live.read()
            if self._pos < len(self._responses):
                self._pos += 1
                return self._responses[self._pos - 1]
            if not self._outcome.ok:
                raise error(self._outcome)
            return eof

        async def write(self, request: object) -> None:
            self._writes.append(request)

        async def done_writing(self) -> None:
            self._writes_done.set()

        async def _status(self, name: str, served: Callable[[Outcome], object]) -> Any:
            await self._resolve()
            return await getattr(self._live, name)() if self._live is not None else served(self._outcome)

        async def code(self) -> Any:
            return await self._status("code", code_of)

        async def details(self) -> Any:
            return await self._status("details", lambda outcome: outcome.details)

        async def initial_metadata(self) -> Any:
            return await self._status("initial_metadata", lambda outcome: aio.Metadata(*outcome.initial))

        async def trailing_metadata(self) -> Any:
            return await self._status("trailing_metadata", lambda outcome: aio.Metadata(*outcome.trailing))

        async def wait_for_connection(self) -> None:
            await self._resolve()

        def cancel(self) -> bool:
            return bool(self._live.cancel()) if self._live is not None else False

        def cancelled(self) -> bool:
            return bool(self._live.cancelled()) if self._live is not None else False

        def done(self) -> bool:
            return bool(self._live.done()) if self._live is not None else self._resolved

        def time_remaining(self) -> float | None:
            return None

        def add_done_callback(self, callback: Callable[[object], None]) -> None:
            if self._resolved:
                callback(self)
            else:
                self._callbacks.append(callback)

    def call(
        ctx: RunContext,
        mc: Any,
        request: Any,
        args: tuple[object, ...],
        kwargs: dict[str, Any],
        *,
        shape: str,
        original: Method,
    ) -> Any:
        target = mc._channel.target
        site = site_of(mc, target() if callable(target) else target)
        metadata = metadata_of(args, kwargs)

        def go_live(action: Send, sent: object) -> Any:
            capture = Capture(ctx, site, metadata, action)
            with permitted(action.permit):
                return RecordingCall(original(teed(mc, capture), sent, *args, **kwargs), capture)

        if ctx.recording:
            action = decide(ctx, site.request(metadata, () if shape[0] == "s" else (request,)))
            assert isinstance(action, Send)  # recording sends every call
            return go_live(action, request)
        return ReplayCall(ctx, site, metadata, shape, request, go_live)

    return call
