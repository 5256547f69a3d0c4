"""Interception for grpcio: sync channels and ``grpc.aio`` channels, the four call shapes.

Patched at the multicallables' classes, not by a client interceptor on the channels made from now on: a
channel made before the run (in a fixture, at import, in a client's constructor) is reached too. The sync
patch sits below ``grpc.intercept_channel``, so the caller's interceptors still run over served calls; the
asyncio one sits above the channel's ``interceptors=`` (they run on live calls only). Each call is an
``HttpRequest`` (``POST grpc://<target>/<Service>/<Method>``, :mod:`..http.grpc_calls`) for
:func:`..replay.policy.decide`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from functools import partial
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from ..core.capture import current_run
from ..core.patching import Patches, genuine_function
from ..http.grpc_calls import Outcome, served_outcome
from ..replay.policy import Refuse, Serve, decide
from . import permitted
from .grpc_aio import aio_call
from .grpc_capture import Capture, fault_outcome, forwarding, metadata_of, site_of, teed, unsupported_route

if TYPE_CHECKING:
    from ..core.capture import RunContext

# (class name in grpc._channel, its shape, the methods patched)
_SYNC: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("_UnaryUnaryMultiCallable", "uu", ("__call__", "with_call", "future")),
    ("_UnaryStreamMultiCallable", "us", ("__call__",)),
    ("_SingleThreadedUnaryStreamMultiCallable", "us", ("__call__",)),
    ("_StreamUnaryMultiCallable", "su", ("__call__", "with_call", "future")),
    ("_StreamStreamMultiCallable", "ss", ("__call__",)),
)
_AIO: tuple[tuple[str, str], ...] = (
    ("UnaryUnaryMultiCallable", "uu"),
    ("UnaryStreamMultiCallable", "us"),
    ("StreamUnaryMultiCallable", "su"),
    ("StreamStreamMultiCallable", "ss"),
)

Method = Callable[..., Any]


# grpc.Call and grpc.Future, but for ``cancel`` (which records the call too).
_CALL_METHODS = (
    "code details initial_metadata trailing_metadata is_active time_remaining add_callback "
    "cancelled running done result exception traceback add_done_callback"
)


def _sync_call(grpc: ModuleType) -> Callable[..., Any]:
    """What a sync multicallable's patched method does in a run: ``call(ctx, multicallable, request, args,
    kwargs, shape=, name=, originals=)``, answering with a ``ServedCall`` or a live call (a
    ``RecordingStream`` for a response stream), both deriving from ``grpc``'s RpcError, Call and Future."""
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
                self._capture.finish_from(self._inner)
                raise

        next = __next__

        def cancel(self) -> bool:
            cancelled: bool = self._inner.cancel()
            self._capture.finish_from(self._inner)
            return cancelled

        def __del__(self) -> None:
            # Dropped before its end (``break`` out of the loop): grpc cancels it; record what was read.
            capture = self.__dict__.get("_capture")
            if capture is not None and not capture.done:
                with contextlib.suppress(Exception):
                    self._inner.cancel()
                    self._capture.finish_from(self._inner)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):  # never our own attributes (``__del__`` after a failed ``__init__``)
                raise AttributeError(name)
            return getattr(self._inner, name)

    # What a caller asks of the stream beyond its messages is the live call's answer.
    forwarding(RecordingStream, "_inner", _CALL_METHODS.split())

    def call(
        ctx: RunContext,
        mc: Any,
        request: Any,
        args: tuple[object, ...],
        kwargs: dict[str, Any],
        *,
        shape: str,
        name: str,
        originals: tuple[Method, Method | None],
    ) -> Any:
        site = site_of(mc, mc._target)
        metadata = metadata_of(args, kwargs)
        streamed_in = shape[0] == "s"
        if ctx.recording:
            # Sent as the caller yields them (a bidirectional stream may wait on the answers): the
            # request messages are known once grpc has serialized them.
            http = site.request(metadata, () if streamed_in else (request,))
        else:
            messages = list(request) if streamed_in else [request]
            request = iter(messages) if streamed_in else request
            http = site.request(metadata, messages)
        action = decide(ctx, http)
        if isinstance(action, Refuse):
            raise action.exception(lambda fault: ServedCall(fault_outcome(fault), [], unary=True))
        if isinstance(action, Serve):
            outcome = served_outcome(action.response)
            responses = [site.from_bytes(raw) for raw in outcome.messages]
            served = ServedCall(outcome, responses, unary=shape[1] == "u")
            if shape[1] == "s" or name == "future":
                return served
            result = served.result()
            return (result, served) if name == "with_call" else result
        if action.url is not None or action.fault is not None:
            raise unsupported_route(ctx, http, "re-routed to a sandbox service or given a fault")
        capture = Capture(ctx, site, metadata, action)
        clone = teed(mc, capture)
        original, with_call = originals
        with permitted(action.permit):
            if shape[1] == "s":
                return RecordingStream(original(clone, request, *args, **kwargs), capture)
            if name == "future":
                future = original(clone, request, *args, **kwargs)
                future.add_done_callback(capture.finish_from)
                return future
            assert with_call is not None
            try:
                response, call = with_call(clone, request, *args, **kwargs)
            except rpc_error as exc:
                capture.finish_from(exc)
                raise
            capture.finish_from(call)
            return (response, call) if name == "with_call" else response

    return call


def _patched(original: Method, handle: Callable[..., Any]) -> Method:
    """``original`` outside a run, else ``handle(ctx, self, request, args, kwargs)``."""

    def method(self: object, request: Any = None, *args: object, **kwargs: Any) -> Any:
        # The request passed by keyword (``stub.Method(request=...)``) is handled as the positional one.
        request = kwargs.pop("request", kwargs.pop("request_iterator", request))
        ctx = current_run()
        if ctx is None:
            return original(self, request, *args, **kwargs)
        return handle(ctx, self, request, args, kwargs)

    return method


def _submodule(package: ModuleType, name: str) -> ModuleType:
    """``package.name`` as ``package`` binds it (what ``grpc.insecure_channel`` uses), else imported: a copy
    of the module imported again after its entry left ``sys.modules`` would hold other classes."""
    found = getattr(package, name, None)
    if isinstance(found, ModuleType):
        return found
    return importlib.import_module(f"{package.__name__}.{name}")


def patch(patches: Patches, grpc: ModuleType) -> None:
    sync_call = _sync_call(grpc)
    channel = _submodule(grpc, "_channel")
    for class_name, shape, names in _SYNC:
        cls = getattr(channel, class_name, None)
        if cls is None:
            continue
        with_call = genuine_function(cls.__dict__["with_call"]) if "with_call" in names else None
        for name in names:
            original = genuine_function(cls.__dict__[name])
            handle = partial(sync_call, shape=shape, name=name, originals=(original, with_call))
            patches.set(cls, name, _patched(original, handle), original=original)
    aio_channel = _submodule(grpc.aio, "_channel")
    aio = aio_call(grpc)
    for class_name, shape in _AIO:
        cls = getattr(aio_channel, class_name)
        original = genuine_function(cls.__dict__["__call__"])
        handle = partial(aio, shape=shape, original=original)
        patches.set(cls, "__call__", _patched(original, handle), original=original)
