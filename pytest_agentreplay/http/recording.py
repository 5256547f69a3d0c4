"""Turn an exchange into one event on the run's recorder; tee live responses while the client reads.

Recording never buffers a stream before handing it on: interceptors pass every chunk to the client
as it arrives and also feed it to :class:`LiveCapture`, which decodes and parses incrementally and
emits the event once the body ends (or the client closes it early).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterable, Mapping
from operator import is_
from typing import TYPE_CHECKING, NamedTuple, TypeGuard, TypeVar

from ..core.canonical import DigestMemo, request_digest, same_json
from ..core.concurrency import concurrent_group
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
from ..core.documents import Document
from ..core.events import Actor, EffectInfo, Event, EventClass, EventType, PayloadRef, ToolInfo
from ..exceptions import ContentCodingError, EventStreamError, UnencodableValueError
from . import bodies, resend
from .bodies import Decoder, format_for
from .classify import Classification, extract_receipt
from .eventstream import EventStreamParser
from .exchange import (
    HttpRequest,
    HttpResponse,
    StoredHeaders,
    lower_headers,
    stored_response_headers,
)
from .providers import Provider, providers_of, request_fields_of
from .sse import StreamParser

if TYPE_CHECKING:
    from ..core.capture import RunContext

_Located = TypeVar("_Located", ContentCodingError, EventStreamError)
_Record = TypeVar("_Record", ToolInfo, PayloadRef)
_ABSENT = object()

# Fields of a model.call event that depend only on the response: replay copies them from the
# recorded event instead of re-parsing the served body (the served body *is* the recorded one).
RESPONSE_FIELDS = ("decision", "usage", "response_id", "response_model")


def payload_ref(value: object, data_class: str, media_type: str) -> PayloadRef:
    """An inline payload reference, every field given: checking them again for each call would be waste."""
    return PayloadRef.construct_trusted(_payload_fields(value, data_class, media_type))


def _payload_fields(value: object, data_class: str, media_type: str) -> dict[str, object]:
    return {
        "sha256": None,
        "inline": value,
        "data_class": data_class,
        "media_type": media_type,
        "size": None,
        "key_order": None,
    }


def tool_info(name: str, key: str | None) -> ToolInfo:
    """The tool of an exchange: its name (host and path) and idempotency key."""
    return ToolInfo.construct_trusted(_tool_fields(name, key))


def _tool_fields(name: str, key: str | None) -> dict[str, object]:
    return {"name": name, "schema_version": None, "idempotency_key": key}


def share_repeats(ctx: RunContext, request: HttpRequest) -> resend.Sent | None:
    """Make a request body's repeated parts the very objects of the previous request to the same endpoint;
    what the body was read as (``resend``), kept for the next request to the endpoint.

    A conversation resends its history on every call: parsed afresh, each call would hold its own copy of
    every earlier message (memory quadratic in the conversation). Shared, the history is held once, and the
    redaction and comparison of a message already seen are identity lookups. The usual case, a request
    that extends the previous one's bytes, is parsed from where it is new only (``resend``).
    """
    key = (request.method, request.url)
    last = ctx.rooms.of(resend.LastSent, resend.LastSent)
    sent = last[key] = request.resend_body(last.get(key))
    memo = ctx.requests
    body = request.json()
    if not isinstance(body, dict):
        return sent
    previous = memo.shared.get(key)
    memo.shared[key] = body
    # Not when the body was read as the previous one's members, its list extended: all shared already.
    if previous is not None and not (sent is not None and sent.base is previous and sent.value is body):
        share_parts(previous, body)
    return sent


def share_parts(previous: Mapping[str, object], body: dict[str, object]) -> None:
    """Make the parts of ``body`` equal to the same parts of ``previous`` (a JSON request body sent before to
    the same endpoint) the very objects of ``previous``: a list's equal items from its start, or a whole
    value. ``body`` is changed in place (only to equal values: what was sent stays what is stored);
    ``previous`` is read only."""
    for name, value in body.items():
        old = previous.get(name)
        if old is None or old is value:
            continue
        if isinstance(value, list) and isinstance(old, list):
            kept = min(len(value), len(old))
            if all(map(is_, value, old)):  # (up to the end of the shorter list)
                continue  # already shared (parsed as an extension of the previous request)
            if kept and same_json(value[:kept], old[:kept]):
                value[:kept] = old[:kept]  # settled in two C-level passes
                continue
            for index in range(kept):
                item, before = value[index], old[index]
                if item is before:
                    continue
                if not same_json(item, before):
                    break
                value[index] = before
        elif isinstance(value, (dict, list)) and same_json(value, old):
            body[name] = old


class PreparedModelRequest(NamedTuple):
    """A model call's request made ready once (:func:`prepare_model_request`): replay matches it by its
    hash before it emits the exchange, which then neither shares nor hashes it again."""

    request_hash: str | None


def prepare_model_request(ctx: RunContext, request: HttpRequest) -> PreparedModelRequest:
    """The request's repeats shared with the previous request to its endpoint (:func:`share_repeats`), and
    the hash of its body (``data.request_hash``; None for a body that is not JSON)."""
    sent = share_repeats(ctx, request)
    body = request.json()
    if body is None:
        return PreparedModelRequest(None)
    memo = ctx.requests.digests
    if memo is None:
        memo = ctx.requests.digests = DigestMemo()
    if sent is not None and sent.built is not None:
        memo.built[sent.key] = sent.built  # the proof that its list extends the previous one's
    return PreparedModelRequest(request_digest(body, memo))


def model_request_fields(
    request: HttpRequest,
    cls: Classification,
    *,
    adapter: Provider,
    request_hash: str | None,
    digests: DigestMemo | None = None,
) -> Document:
    fields = request_fields_of(adapter, str(cls.endpoint), request.json(), digests)
    # The optional members: what the URL names (Gemini's model, Azure's deployment and API version).
    if fields.get("model") is None:
        from_request = getattr(adapter, "model_from_request", None)
        found = from_request(request) if from_request is not None else None
        fields["model"] = str(found) if found is not None else None
    from_url = getattr(adapter, "url_fields", None)
    named = from_url(request) if from_url is not None else None
    if isinstance(named, dict):
        fields.update(named)
    # One hash of the whole request body: the cheap "did the prompt change?" signal for diffs.
    fields["request_hash"] = request_hash
    return fields


def emit_exchange(
    ctx: RunContext,
    request: HttpRequest,
    response: HttpResponse,
    cls: Classification,
    latency_ms: float,
    *,
    response_data: Mapping[str, object] | None = None,
    response_payload: Document | None = None,
    extra: Mapping[str, object] | None = None,
    group: object = None,
    prepared: PreparedModelRequest | None = None,
    recorded: Event | None = None,
) -> None:
    """Emit the event for one exchange. ``response_data`` reuses recorded response-side fields, and
    ``response_payload`` the recorded response: the replayed event holds the recorded one's values, which
    neither event changes (the user reads copies of events, a hook a copy of its own). ``group``: the
    order-insensitive group of a call made concurrently (``data.group``, as ``@tool`` calls have it).
    ``prepared``: a model call's request already made ready (:func:`prepare_model_request`). ``recorded``:
    the event the exchange was served from; a record of it equal field for field to the one this event
    would hold (its response by identity) is held itself (:func:`served`)."""
    settings = ctx.settings
    # The fields of the records: built into records only when the recorded event's are not these (served).
    tool: dict[str, object] | None = None
    effect: EffectInfo | None = None
    try:
        if cls.kind == "model":
            data = _model_data(ctx, request, response, cls, response_data, prepared)
            type_: EventType = "model.call"
            actor: Actor = "model"
            event_class: EventClass = "decision"
            data_class = settings.model_data_class
        else:
            data = {
                "method": request.method,
                "url": request.url,
                "status": response.status,
                "classification": cls.flavour or cls.kind,
            }
            actor, data_class = "tool", settings.http_data_class
            name = cls.tool_name or (request.host + request.path)
            if cls.kind == "read":
                type_, event_class, tool = "http", "input", _tool_fields(name, None)
            else:
                type_ = event_class = "effect"
                tool = _tool_fields(name, request.headers.get(settings.idempotency_header))
                effect = EffectInfo.construct_trusted(
                    {
                        "kind": "http." + request.method.lower(),
                        "target": request.url,
                        "receipt": extract_receipt(request, response, settings),
                        "committed": 200 <= response.status < 300,
                    },
                )
        data["latency_ms"] = round(latency_ms, 3)
        if extra:
            data.update(extra)
        if group is not None:
            data["group"] = group
        out_payload = response_payload if response_payload is not None else response.to_payload()
        known = ctx.rooms.of(StoredHeaders, StoredHeaders)
        output = _payload_fields(out_payload, data_class, HTTP_RESPONSE_MEDIA_TYPE)
        ctx.recorder.emit(
            type_,
            trusted=True,
            actor=actor,
            event_class=event_class,
            data=data,
            tool=None if tool is None else served(ToolInfo, tool, recorded.tool if recorded else None),
            effect=effect,
            input=payload_ref(request.to_payload(known), data_class, HTTP_REQUEST_MEDIA_TYPE),
            output=served(PayloadRef, output, recorded.output_ref if recorded else None),
        )
    except UnicodeEncodeError:
        from ..core.unencodable import UNENCODABLE_FIXES, unencodable_evidence  # only on this error

        raise UnencodableValueError(
            f"the {request.method} {request.url} exchange cannot be recorded: it holds text that is not "
            "valid UTF-8",
            evidence=unencodable_evidence(
                f"{cls.kind} call {request.method} {request.url}",
                {"the request body": request.to_payload(), "the response body": response.to_payload()},
            ),
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=UNENCODABLE_FIXES,
        ) from None


def served(kind: type[_Record], fields: dict[str, object], recorded: _Record | None) -> _Record:
    """``recorded`` (a record of the event an exchange was served from) in place of the ``kind`` record of
    ``fields`` (the record the replayed event would hold) when they are equal field for field, each
    container the same object: records are frozen, so the replayed event holds what was saved (already
    redacted), and its redaction and comparison meet the recorded record by identity. Else the record of
    ``fields``, built only then."""
    return recorded if _same_fields(recorded, kind, fields) else kind.construct_trusted(fields)


def _same_fields(
    recorded: _Record | None, kind: type[_Record], fields: Mapping[str, object]
) -> TypeGuard[_Record]:
    """Whether ``recorded`` is a ``kind`` record of ``fields``, field for field (see :func:`served`)."""
    if recorded is None or type(recorded) is not kind:
        return False
    theirs = recorded.__dict__
    for name, value in fields.items():
        twin = theirs.get(name, _ABSENT)
        if value is twin:
            continue
        if type(value) is not str or type(twin) is not str or value != twin:
            return False  # (a scalar equal only across types, ``true`` and ``1``, is no match)
    return len(fields) == len(theirs)


def _model_data(
    ctx: RunContext,
    request: HttpRequest,
    response: HttpResponse,
    cls: Classification,
    response_data: Mapping[str, object] | None,
    prepared: PreparedModelRequest | None,
) -> Document:
    if prepared is None:
        prepared = prepare_model_request(ctx, request)
    data: Document = {"provider": cls.provider, "endpoint": cls.endpoint}
    adapter = providers_of(ctx.settings)[cls.provider]
    digests = ctx.requests.digests
    fields = model_request_fields(
        request, cls, adapter=adapter, request_hash=prepared.request_hash, digests=digests
    )
    data.update(fields)
    if response.is_sse:
        data["streamed"] = True
    if response_data is not None:
        for field_name in RESPONSE_FIELDS:
            data[field_name] = response_data.get(field_name)
    else:
        data.update(adapter.response_fields(str(cls.endpoint), response.body))
    data["status"] = response.status
    return data


class LiveCapture:
    """Collects one live response as the client consumes it; emits its event exactly once."""

    __slots__ = (
        "_chunks",
        "_coding",
        "_decoder",
        "_done",
        "_events",
        "_headers",
        "_lock",
        "_parser",
        "_status",
        "_t0",
        "cls",
        "ctx",
        "group",
        "request",
        "started",
    )

    def __init__(self, ctx: RunContext, request: HttpRequest, cls: Classification) -> None:
        self.ctx = ctx
        self.request = request
        self.cls = cls
        # Decided where the call is made (the body may be read to its end elsewhere): a call from a worker
        # thread or beside sibling tasks is concurrent, its order among the others a scheduling accident.
        self.group = concurrent_group(ctx)
        self.started = time.perf_counter()
        self._t0 = self.started
        self._status = 0
        self._headers: dict[str, str] = {}
        self._decoder: Decoder | None = None
        # The content coding the body arrived in (noted on the stored body), when it was undone.
        self._coding: str | None = None
        self._parser: StreamParser | None = None
        self._chunks: list[bytes] = []
        self._events: list[Document] = []
        self._done = False
        self._lock = threading.Lock()

    def start_response(
        self,
        status: int,
        headers: Mapping[str, object] | Iterable[tuple[str | bytes, object]],
        *,
        decoded: bool = False,
    ) -> None:
        """Headers are in. ``decoded``: the client hands us bytes it already decompressed (aiohttp).

        Raises :class:`ContentCodingError` (also kept in ``ctx.failures``: the agent may swallow it) for a
        coding this installation cannot undo, before the client reads a byte of it.
        """
        self._t0 = time.perf_counter()
        self._status = status
        self._headers = lower_headers(headers)
        header = self._headers.get("content-encoding")
        try:
            self._decoder = Decoder(None if decoded else header)
        except ContentCodingError as exc:
            self._done = True
            raise self._located(exc) from exc
        self._coding = header.strip().lower() if decoded and header else self._decoder.coding
        content_type = self._headers.get("content-type")
        fmt = format_for(content_type)
        if fmt is not None:
            self._parser = fmt.parser()

    def feed(self, chunk: bytes) -> None:
        if not chunk or self._done:
            return
        assert self._decoder is not None
        data = self._decoder.feed(chunk)
        if self._parser is not None:
            if data:
                t = round(time.perf_counter() - self._t0, 4)
                for ev in self._parser.feed(data):
                    ev["t"] = t
                    self._events.append(ev)
        else:
            self._chunks.append(data)

    def finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        decoder = self._decoder or Decoder(None)
        try:
            tail = decoder.flush()
        except Exception:
            tail = b""
        content_type = self._headers.get("content-type")
        if self._parser is not None:
            t = round(time.perf_counter() - self._t0, 4)
            for ev in self._parser.feed(tail) + self._parser.finish():
                ev["t"] = t
                self._events.append(ev)
            stream: Document = {"sse": self._events}
            if isinstance(self._parser, EventStreamParser) and self._parser.error is not None:
                # Kept as the bytes that came (the client saw them), and the test fails with the reason
                # (not raised here: the client reading it must not get our exception).
                self._located(self._parser.error)
                stream = {"base64": base64.b64encode(self._parser.received()).decode("ascii")}
            stream["content_type"] = content_type
            if self._coding:
                stream["coding"] = self._coding
            body: Document | None = stream
        else:
            raw = b"".join(self._chunks) + tail
            body = bodies.encode_body(raw, content_type, exact=True, coding=self._coding)
        decoded = bool(self._headers.get("content-encoding"))
        response = HttpResponse(self._status, stored_response_headers(self._headers, decoded), body)
        latency_ms = (time.perf_counter() - self.started) * 1000.0
        extra = {"incomplete": True} if error is not None else None
        emit_exchange(self.ctx, self.request, response, self.cls, latency_ms, extra=extra, group=self.group)

    def _located(self, exc: _Located) -> _Located:
        """``exc`` naming this response, the cassette and the mode, kept in the run's failures."""
        located = type(exc)(
            exc.headline,
            evidence=[*exc.evidence, f"response of {self.request.method} {self.request.url}"],
            cassette=self.ctx.cassette,
            mode=self.ctx.mode,
            place=exc.place,
            fixes=exc.fixes,
        )
        self.ctx.failures.add(located)
        return located
