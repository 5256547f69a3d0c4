"""What the gRPC adapter (:mod:`.grpc`) knows of one call, and the recording of a call that goes out (shared
by the sync and asyncio halves: grpc's objects arrive as plain values, status codes by name)."""

from __future__ import annotations

import abc
import copy
import importlib
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.documents import Document
from ..exceptions import ConfigError
from ..http import bodies, grpc_calls
from ..http.exchange import HttpRequest, HttpResponse, stored_response_headers
from ..http.recording import emit_exchange

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..replay.faults import Fault
    from ..replay.policy import Send

Metadata = Iterable[tuple[str, str | bytes]]
Serializer = Callable[[object], bytes]
Deserializer = Callable[[bytes], object]


@dataclass(frozen=True, slots=True)
class Site:
    """The method a multicallable calls: where, which, and how its messages become bytes and back."""

    target: str
    method: str
    serializer: Serializer | None
    deserializer: Deserializer | None

    def to_bytes(self, message: object) -> bytes:
        if self.serializer is None:
            return message if isinstance(message, bytes) else bytes(message)  # type: ignore[call-overload]
        return self.serializer(message)

    def from_bytes(self, raw: bytes) -> object:
        return raw if self.deserializer is None else self.deserializer(raw)

    def request(self, metadata: Metadata | None, messages: Iterable[object]) -> HttpRequest:
        entries = [grpc_calls.message_entry(self.to_bytes(m), view(m), keep_bytes=False) for m in messages]
        return grpc_calls.request(self.target, self.method, metadata, entries)


def view(message: object) -> object | None:
    """The readable JSON view of a protobuf message (None for anything else)."""
    proto = sys.modules.get("google.protobuf.message")
    if proto is None or not isinstance(message, proto.Message):
        return None
    # optional: only protobuf messages have a view (imported by name: protobuf ships no type stubs)
    json_format = importlib.import_module("google.protobuf.json_format")
    found: object = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return found


def fault_outcome(fault: Fault) -> grpc_calls.Outcome:
    """The status a client sees for an injected timeout or reset (sync and asyncio alike)."""
    code = "DEADLINE_EXCEEDED" if fault.kind == "timeout" else "UNAVAILABLE"
    return grpc_calls.Outcome(code, fault.message())


def unsupported_route(ctx: RunContext, request: HttpRequest, why: str) -> ConfigError:
    error = ConfigError(
        f"the gRPC call {request.url} cannot be {why}",
        evidence=[f"live call: POST {request.url}", f"mode: {ctx.mode}"],
        cassette=ctx.cassette,
        mode=ctx.mode,
        fixes=[
            "serve the call from the cassette: remove its host from the sandbox mapping or fault settings",
            "or let it reach the service as addressed: "
            f'@pytest.mark.agentreplay(allow_hosts=["{request.host}"])',
        ],
    )
    ctx.failures.add(error)
    return error


class Capture:
    """One call sent live: the messages each way as grpc (de)serializes them, then one event, emitted once
    from the caller's side (its place in the history does not depend on grpc's threads): when the caller
    has seen the call end, or when an abandoned stream is dropped."""

    __slots__ = ("_lock", "action", "ctx", "done", "metadata", "requests", "responses", "site", "started")

    def __init__(self, ctx: RunContext, site: Site, metadata: Metadata | None, action: Send) -> None:
        self.ctx = ctx
        self.site = site
        self.metadata = list(metadata or ())
        self.action = action
        self.requests: list[Document] = []
        self.responses: list[Document] = []
        self.started = time.perf_counter()
        self.done = False
        self._lock = threading.Lock()

    def serializer(self) -> Serializer:
        site, requests = self.site, self.requests

        def tee(message: object) -> bytes:
            raw = site.to_bytes(message)
            requests.append(grpc_calls.message_entry(raw, view(message), keep_bytes=False))
            return raw

        return tee

    def deserializer(self) -> Deserializer:
        site, responses, redactor = self.site, self.responses, self.ctx.redactor

        def tee(raw: bytes) -> object:
            message = site.from_bytes(raw)
            shown = view(message)
            if shown is not None and redactor is not None:
                # The view and the bytes are stored side by side: what the view holds under a secret
                # name (an ``access_token`` field) is a known secret of the run from now on, masked in
                # the bytes too (and wherever else it appears), whichever of the two is redacted first.
                redactor.redact(shown)
            responses.append(grpc_calls.message_entry(raw, shown, keep_bytes=True))
            return message

        return tee

    def finish(
        self, code: str, details: str | None, initial: Metadata | None, trailing: Metadata | None
    ) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        request = grpc_calls.request(self.site.target, self.site.method, self.metadata, self.requests)
        raw = grpc_calls.response_body(code, details, self.responses, grpc_calls.metadata_pairs(trailing))
        headers = stored_response_headers(grpc_calls.metadata_headers(initial), False)
        response = HttpResponse(
            grpc_calls.http_status(code), headers, bodies.encode_body(raw, "application/json", exact=True)
        )
        latency_ms = (time.perf_counter() - self.started) * 1000.0
        emit_exchange(self.ctx, request, response, self.action.capture.cls, latency_ms)

    def finish_from(self, call: Any) -> None:
        """Record the live call ``call`` (a finished sync ``grpc.Call``: its status is in)."""
        if not self.done:
            name = getattr(call.code(), "name", None)
            code = name if isinstance(name, str) else "UNKNOWN"
            self.finish(code, call.details(), call.initial_metadata(), call.trailing_metadata())


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def metadata_of(args: tuple[object, ...], kwargs: dict[str, Any]) -> Metadata | None:
    # Every multicallable takes (request, timeout, metadata, ...): metadata is second after the request.
    found = kwargs.get("metadata", args[1] if len(args) > 1 else None)
    return found  # type: ignore[no-any-return]


def site_of(multicallable: Any, target: object) -> Site:
    return Site(
        _text(target),
        _text(multicallable._method),
        multicallable._request_serializer,
        multicallable._response_deserializer,
    )


def teed(multicallable: Any, capture: Capture) -> Any:
    """A copy of ``multicallable`` whose (de)serializers also hand each message to ``capture``."""
    clone = copy.copy(multicallable)
    clone._request_serializer = capture.serializer()
    clone._response_deserializer = capture.deserializer()
    return clone


def forwarding(cls: type, to: str, names: Iterable[str]) -> None:
    """Give ``cls`` each method of ``names`` as a call of the same method of its ``to`` attribute (the live
    call it wraps); grpc's ABCs declare them abstract, so the class is instantiable only once they exist."""

    def forward(name: str) -> Callable[..., Any]:
        def method(self: object, *args: object, **kwargs: object) -> Any:
            return getattr(getattr(self, to), name)(*args, **kwargs)

        method.__name__ = name
        return method

    for name in names:
        setattr(cls, name, forward(name))
    abc.update_abstractmethods(cls)
