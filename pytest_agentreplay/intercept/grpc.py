"""Interception for grpcio: sync channels and ``grpc.aio`` channels, the four call shapes.

Patched at the multicallables' classes, not by a client interceptor on the channels made from now on: a
channel made before the run (in a fixture, at import, in a client's constructor) is reached too. The sync
patch sits below ``grpc.intercept_channel``, so the caller's interceptors still run over served calls; the
asyncio one sits above the channel's ``interceptors=`` (they run on live calls only). Each call is an
``HttpRequest`` (``POST grpc://<target>/<Service>/<Method>``, :mod:`..http.grpc_calls`) for
:func:`..replay.policy.decide`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.capture import current_run
from ..core.patching import Patches, genuine_function
from ..http.grpc_calls import Outcome, served_outcome
from ..replay.policy import Refuse, Serve, decide
from .grpc_aio import AioSide
from .grpc_capture import Capture, metadata_of, site_of, teed, unsupported_route
from .grpc_sync import fault_status, finish_from, sync_classes
from .internal import permitted

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


class SyncSide:
    """The sync side for one grpc module: its served and recording classes."""

    def __init__(self, grpc: ModuleType) -> None:
        self.rpc_error: Any = grpc.RpcError
        self.served, self.recording = sync_classes(grpc)

    def call(
        self,
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
            raise action.exception(lambda fault: self.served(Outcome(*fault_status(fault)), [], unary=True))
        if isinstance(action, Serve):
            outcome = served_outcome(action.response)
            responses = [site.from_bytes(raw) for raw in outcome.messages]
            served = self.served(outcome, responses, unary=shape[1] == "u")
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
                return self.recording(original(clone, request, *args, **kwargs), capture)
            if name == "future":
                future = original(clone, request, *args, **kwargs)
                future.add_done_callback(lambda done: finish_from(capture, done))
                return future
            assert with_call is not None
            try:
                response, call = with_call(clone, request, *args, **kwargs)
            except self.rpc_error as exc:
                finish_from(capture, exc)
                raise
            finish_from(capture, call)
            return (response, call) if name == "with_call" else response


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
    sync = SyncSide(grpc)
    channel = _submodule(grpc, "_channel")
    for class_name, shape, names in _SYNC:
        cls = getattr(channel, class_name, None)
        if cls is None:
            continue
        with_call = genuine_function(cls.__dict__["with_call"]) if "with_call" in names else None
        for name in names:
            original = genuine_function(cls.__dict__[name])
            handle = partial(sync.call, shape=shape, name=name, originals=(original, with_call))
            patches.set(cls, name, _patched(original, handle), original=original)
    aio_channel = _submodule(grpc.aio, "_channel")
    aio = AioSide(grpc)
    for class_name, shape in _AIO:
        cls = getattr(aio_channel, class_name)
        original = genuine_function(cls.__dict__["__call__"])
        handle = partial(aio.call, shape=shape, original=original)
        patches.set(cls, "__call__", _patched(original, handle), original=original)
