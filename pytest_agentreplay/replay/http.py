"""Serving recorded HTTP exchanges in replay: one index per run, built once, O(1) per call.

Matching (live call on the left, cassette on the right); among equal candidates the first unplayed wins:

- model calls: per provider endpoint, the recorded call whose request equals the live one (see
  :mod:`.model_calls`); a call none equals (its prompt drifted) gets the first unplayed call to its
  endpoint, so its drift is reported against the call in its place.
- reads (GET/HEAD/OPTIONS): method + normalised URL + normalised body; once all are played, the last one
  is served again (reads have no side effects).
- writes: method + URL + idempotency key, then method + URL in order; a retry reusing a served key gets
  the same receipt again. model-comparison skips the "in order" step (a write the live model decided
  otherwise has no receipt). Writes are never sent.

Headers are never matched (SDKs add ``x-stainless-*``, retry counters, user agents). A served exchange
keeps the recorded ``data.group``, so grouping does not depend on which thread replays it.
"""

from __future__ import annotations

import difflib
import threading
import time
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Final

from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, Mode
from ..core.documents import Document
from ..core.events import Event
from ..exceptions import UnmatchedRequestError
from ..http import bodies
from ..http.classify import Classification, classify_exchange
from ..http.exchange import HttpRequest, HttpResponse, normalise_url
from ..http.recording import PreparedModelRequest, emit_exchange, prepare_model_request
from ..http.unmatched import unmatched_refusal
from .model_calls import ModelCalls, ignored_names, mentions, normalised_key
from .recorded import KeyedQueues, RecordedExchange

if TYPE_CHECKING:
    from ..core.capture import RecordedRun, RunContext
    from ..core.run_settings import RunSettings


# The kind of the exchange each event type that carries a request records.
_RECORDED_KINDS: Final = {"model.call": "model", "http": "read", "effect": "write"}


def _recorded_kind(event: Event) -> str | None:
    ref = event.input_ref
    if ref is None or ref.media_type != HTTP_REQUEST_MEDIA_TYPE:
        return None
    return _RECORDED_KINDS.get(event.type)


class HttpReplayIndex:
    """The recorded exchanges of one cassette, indexed for the three matching rules."""

    def __init__(self, recorded: RecordedRun | None, settings: RunSettings) -> None:
        self.recorded = recorded
        self.idem_header = settings.idempotency_header
        self.allow_read_repeats = settings.allow_read_repeats
        self._lock = threading.Lock()
        self.model = ModelCalls()
        # Per (method, URL, body key), the reads in recorded order.
        self.reads = KeyedQueues()
        self.last_read: dict[tuple[str, str, str], RecordedExchange] = {}
        self.writes_exact: dict[tuple[str, str, str], deque[RecordedExchange]] = defaultdict(deque)
        self.writes_any: dict[tuple[str, str], deque[RecordedExchange]] = defaultdict(deque)
        self.served_keys: dict[tuple[str, str, str], RecordedExchange] = {}
        # Reads and writes in recorded order, for the error message of a call none answers.
        self._exchanges: list[RecordedExchange] = []
        # Each recorded URL normalised, by its text: a live call's redacted URL is most often one of them.
        self.normalised: dict[str, str] = {}
        if recorded is None:  # a run with no cassette: every lookup finds nothing
            return
        idem_header = self.idem_header
        for event in recorded.events:
            kind = _recorded_kind(event)
            if kind is None:
                continue
            if kind == "model":
                # The request payload is read only if the hash cannot match (see ``model_calls``).
                endpoint = f"{event.data.get('provider')}:{event.data.get('endpoint')}"
                self.model.add(endpoint, RecordedExchange(event, kind, "POST", "", "", None, None))
                continue
            # Read straight from the payload (what ``HttpRequest.from_payload`` would hold): the
            # index is built inside every replayed run; requests are built only for error messages.
            payload = recorded.payload(event.input_ref) or {}
            method = str(payload.get("method", "GET")).upper()
            raw_url = str(payload.get("url", ""))
            url = self.normalised[raw_url] = normalise_url(raw_url)
            headers = payload.get("headers") or {}
            if not isinstance(headers, dict):
                headers = dict(headers)
            rec = RecordedExchange(
                event,
                kind,
                method,
                url,
                bodies.normalise_for_match(payload.get("body")),
                headers.get(idem_header),
                payload,
            )
            self._exchanges.append(rec)
            if kind == "read":
                self.reads.add((method, url, rec.body_key), rec)
            else:
                if rec.idem_key is not None:
                    self.writes_exact[(method, url, rec.idem_key)].append(rec)
                self.writes_any[(method, url)].append(rec)
        self.model.built()
        self.reads.built()

    # -- lookups (callers hold no lock; each takes it once) -----------------------------------------

    def take_model(
        self, ctx: RunContext, request: HttpRequest, endpoint: str, digest: str | None, in_order: bool
    ) -> RecordedExchange | None:
        """The recorded call the live one equals, else the first unplayed call to its endpoint (see
        :mod:`.model_calls`). The normalised body is computed outside the lock: it redacts."""
        model = self.model
        if digest is not None:
            with self._lock:
                rec = model.take_exact(endpoint, digest)
            if rec is not None:
                return rec
        names = ignored_names(ctx.mode)
        if model.total(endpoint) and (digest is None or not in_order or mentions(request, names)):
            # The hash cannot tell: no JSON body, or one holding what the comparison ignores.
            key = normalised_key(_redacted_view(ctx, request)[1], names)
            with self._lock:
                rec = model.take_normalised(endpoint, key, names, self._request_body)
            if rec is not None:
                return rec
        if not in_order:
            return None
        with self._lock:
            return model.take_in_order(endpoint)

    def _request_body(self, rec: RecordedExchange) -> Document | None:
        assert self.recorded is not None  # rec was recorded in it
        payload = self.recorded.payload(rec.event.input_ref)
        body = payload.get("body") if isinstance(payload, dict) else None
        return body if isinstance(body, dict) else None

    def take_read(self, method: str, url: str, body_key: str) -> RecordedExchange | None:
        key = (method, url, body_key)
        with self._lock:
            rec = self.reads.take(key)
            if rec is not None:
                self.last_read[key] = rec
                return rec
            return self.last_read.get(key) if self.allow_read_repeats else None

    def take_write(
        self, method: str, url: str, idem_key: str | None, body_key: str, *, strict: bool = False
    ) -> RecordedExchange | None:
        """The recorded write to serve; ``strict``: only one with the same key or body (model-comparison: a
        write the live model decided otherwise has no receipt, whatever was recorded to that URL)."""
        with self._lock:
            if idem_key is not None:
                exact = self.writes_exact.get((method, url, idem_key))
                while exact:
                    rec = exact.popleft()
                    if not rec.played:
                        return self._mark(rec, method, url, idem_key)
                again = self.served_keys.get((method, url, idem_key))
                if again is not None:
                    return again
            queue = self.writes_any.get((method, url))
            if not queue:
                return None
            # Prefer an unplayed write with the same body; else the first unplayed one (keys that
            # are random per run, e.g. uuid4, cannot match exactly).
            chosen = next((rec for rec in queue if not rec.played and rec.body_key == body_key), None)
            if chosen is None and not strict:
                while queue and queue[0].played:
                    queue.popleft()
                chosen = queue[0] if queue else None
            return None if chosen is None else self._mark(chosen, method, url, idem_key)

    def _mark(self, rec: RecordedExchange, method: str, url: str, idem_key: str | None) -> RecordedExchange:
        rec.played = True
        if idem_key is not None:
            self.served_keys[(method, url, idem_key)] = rec
        return rec

    def closest(self, request: HttpRequest, cls: Classification, limit: int = 3) -> list[str]:
        """Nearest recorded calls for the error message: only the same endpoint or host is scanned."""
        if cls.kind == "model":
            total = self.model.total(cls.endpoint_key)
            if total:
                return [f"the cassette holds {total} call(s) to {cls.endpoint_key}; all were already served"]
            others = sorted(k for k, v in self.model.by_endpoint.items() if v)
            return [f"recorded model endpoints: {', '.join(others) or 'none'}"]
        candidates = [rec for rec in self._exchanges if rec.host == request.host]
        if not candidates:
            hosts = sorted({rec.host for rec in self._exchanges})
            return [f"nothing recorded for host {request.host}; recorded hosts: {', '.join(hosts) or 'none'}"]
        live = f"{request.method} {normalise_url(request.url)} {request.excerpt(80)}"
        scored = []
        for rec in candidates:
            # Excerpts are rendered only here, on the error path, never while building the index.
            excerpt = rec.request.excerpt(80) if rec.request is not None else ""
            text = f"{rec.method} {rec.url} {excerpt}"
            matcher = difflib.SequenceMatcher(None, live, text, autojunk=False)
            scored.append((matcher.quick_ratio(), text, rec.played))
        scored.sort(key=lambda item: -item[0])
        return [
            f"{ratio:.0%} similar: {text}{' (already served)' if played else ''}"
            for ratio, text, played in scored[:limit]
        ]


def index_for(ctx: RunContext) -> HttpReplayIndex:
    """The run's index, built on first use and kept in ``ctx.replay.index``."""
    index = ctx.replay.index
    if isinstance(index, HttpReplayIndex):
        return index
    with _BUILD_LOCK:
        index = ctx.replay.index
        if not isinstance(index, HttpReplayIndex):
            index = ctx.replay.index = HttpReplayIndex(ctx.recorded, ctx.settings)
    return index


_BUILD_LOCK = threading.Lock()


def serve(
    ctx: RunContext, request: HttpRequest, cls: Classification | None = None, *, exact: bool = False
) -> HttpResponse | None:
    """Answer ``request`` from the cassette and record the exchange on ``ctx.recorder``.

    None when no recorded exchange matches: :func:`unmatched` builds the refusal. ``exact``: a model call
    is answered only by a recorded call its request equals (apart from what the comparison ignores), not
    by the next one in order (re-recording from the first drift).
    """
    started = time.perf_counter()
    if cls is None:
        cls = classify_exchange(request, None, ctx.settings)
    index = index_for(ctx)
    prepared: PreparedModelRequest | None = None
    if cls.kind == "model":
        prepared = prepare_model_request(ctx, request)
        rec = index.take_model(ctx, request, cls.endpoint_key, prepared.request_hash, not exact)
    else:
        # Recorded requests were redacted when saved: match on the live request redacted the same way.
        raw_url, stored = _redacted_view(ctx, request)
        url = index.normalised.get(raw_url) or normalise_url(raw_url)
        body_key = bodies.normalise_for_match(stored)
        if cls.kind == "read":
            rec = index.take_read(request.method, url, body_key)
        else:
            key = request.headers.get(index.idem_header)
            strict = ctx.mode is Mode.MODEL_COMPARISON
            rec = index.take_write(request.method, url, key, body_key, strict=strict)
    if rec is None:
        return None
    recorded = index.recorded
    assert recorded is not None  # rec was recorded in it
    payload = rec.response_payload(recorded)
    response = rec.response(recorded)
    emit_exchange(
        ctx,
        request,
        response,
        cls,
        (time.perf_counter() - started) * 1000.0,
        response_data=rec.event.data if cls.kind == "model" else None,
        response_payload=payload,
        group=rec.event.data.get("group"),
        prepared=prepared,
        recorded=rec.event,
    )
    return response


def _redacted_view(ctx: RunContext, request: HttpRequest) -> tuple[str, Document | None]:
    """The live request's URL and stored body as the cassette would hold them (redacted): the body's
    redaction is the one its event's view holds (``Redactor.redact_body`` remembers it by identity)."""
    stored = request.stored_body()
    redactor = ctx.redactor
    if redactor is None:
        return request.url, stored
    url = redactor.redact_url(request.url)
    if stored is not None:
        stored = redactor.redact_body(stored)
    return url, stored


def unmatched(ctx: RunContext, request: HttpRequest, cls: Classification) -> UnmatchedRequestError:
    """The refusal of a call the cassette cannot answer; also kept in ``ctx.failures``."""
    index = index_for(ctx)
    what = f"model call to {cls.endpoint_key}" if cls.kind == "model" else f"{cls.kind}"
    # Error text reaches terminals, reports and JUnit files: show the live call redacted, never raw.
    url, stored = _redacted_view(ctx, request)
    shown = HttpRequest(request.method, url, request.headers, b"", _stored_body=stored, _body_ready=True)
    return unmatched_refusal(
        ctx,
        request,
        url,
        "HTTP exchange",
        [f"body: {shown.excerpt(160) or '(empty)'}", f"classified as: {what}"],
        ["closest recorded:", *(f"  {line}" for line in index.closest(shown, cls))],
        [
            "if it is not, find what changed it (prompt, tool arguments, base URL, agent code)",
            "if it is a local test service, let it through: "
            f'@pytest.mark.agentreplay(allow_hosts=["{request.host}"])',
        ],
    )
