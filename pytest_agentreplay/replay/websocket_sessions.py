"""WebSocket connections of a run, library-neutral (the adapters under ``intercept/`` translate).

The opening handshake goes through :func:`.policy.decide` as the HTTP read it is, then the connection is
a :class:`LiveConnection` (real, reported through ``events``) or a :class:`ServedConversation`: the nth
live connection to a URL gets the nth conversation recorded with it; received messages are served in
order and each sent message is compared with the recorded one at its index. A difference is a
:class:`~..exceptions.DriftError` kept in ``ctx.failures`` while the conversation goes on, so the whole
drift shows. A sent message is compared redacted by the very call that redacted the recorded one, so a
message holding a secret equals its recording; failures show URLs and messages redacted.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.commands import new_call_fix, rerecord_fix
from ..core.documents import Document
from ..exceptions import DriftError, ReplayError, UnmatchedRequestError
from ..http import bodies
from ..http.exchange import HttpRequest, HttpResponse, normalise_url
from ..http.recording import LiveCapture
from ..http.websocket_messages import ConversationEvents, Message, decode_message, encode_message, excerpt
from .policy import Refuse, Send, decide

if TYPE_CHECKING:
    from ..core.capture import RunContext


@dataclass(slots=True)
class Received:
    """One step of what the recording received: a message, a timed-out receive or the server's close."""

    kind: str  # "message" | "timeout" | "close"
    stored: Document | None = None
    code: int | None = None
    reason: str = ""


@dataclass(slots=True)
class RecordedConversation:
    url: str
    connection: int
    sent: list[Document] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)


class _RunConnections:
    """Per run: the connection counter and the recorded conversations not served yet, by URL."""

    def __init__(self, ctx: RunContext) -> None:
        self.lock = threading.Lock()
        self.opened = 0
        self.by_url: dict[str, deque[RecordedConversation]] = {}
        recorded = ctx.recorded
        if recorded is None:
            return
        found: dict[int, RecordedConversation] = {}
        for event in recorded.events:
            data = event.data
            if event.type != "http" or data.get("transport") != "websocket":
                continue
            number = data.get("connection")
            if not isinstance(number, int):
                continue
            conv = found.get(number)
            if conv is None:
                conv = found[number] = RecordedConversation(str(data.get("url", "")), number)
            method = data.get("method")
            if method == "SEND" and data.get("direction") == "sent":
                conv.sent.append(recorded.payload(event.input_ref) or {})
            elif method == "RECEIVE" and data.get("timeout"):
                conv.received.append(Received("timeout"))
            elif method == "RECEIVE":
                conv.received.append(Received("message", recorded.payload(event.output_ref) or {}))
            elif method == "CLOSE" and data.get("direction") == "received":
                close = data.get("close") or {}
                conv.received.append(
                    Received("close", None, close.get("code"), str(close.get("reason") or ""))
                )
        for _, conv in sorted(found.items()):
            self.by_url.setdefault(normalise_url(conv.url), deque()).append(conv)

    def next_number(self) -> int:
        with self.lock:
            number = self.opened
            self.opened += 1
            return number

    def take(self, url: str) -> RecordedConversation | None:
        with self.lock:
            queue = self.by_url.get(normalise_url(url))
            return queue.popleft() if queue else None


def _redacted(ctx: RunContext, url: str) -> str:
    redactor = ctx.redactor
    return redactor.redact_url(url) if redactor is not None else url


def _as_stored(ctx: RunContext, message: Message) -> Document:
    """A message as the cassette stores it: encoded, then redacted as the recorder's write redacts it."""
    stored = encode_message(message)
    return stored if ctx.redactor is None else ctx.redactor.redact(stored)


@dataclass(slots=True)
class LiveConnection:
    """Connect for real; report the handshake's answer, then the conversation through ``events``."""

    url: str
    permit: str | None
    capture: LiveCapture
    events: ConversationEvents

    def answered(self, status: int, headers: Mapping[str, str], body: bytes = b"") -> None:
        """The handshake's answer (101, or the refusal): its ``http`` event is emitted now."""
        self.capture.start_response(status, headers)
        self.capture.feed(body)
        self.capture.finish()

    def failed(self, error: BaseException) -> None:
        """No answer at all (refused connection, timeout): the handshake is recorded as incomplete."""
        self.capture.finish(error)


class ServedConversation:
    """A connection served from the cassette; the adapter turns its outcomes into its library's behaviour."""

    def __init__(
        self,
        ctx: RunContext,
        response: HttpResponse,
        recorded: RecordedConversation | None,
        events: ConversationEvents | None,
    ) -> None:
        self.ctx = ctx
        self.status = response.status
        self.headers = response.headers
        self.subprotocol = response.headers.get("sec-websocket-protocol")
        self.url = events.url if events is not None else ""
        self.recorded = recorded
        self.events = events
        self._lock = threading.Lock()
        self._next = 0
        # (code, reason, closed by the server first)
        self.closed: tuple[int | None, str, bool] | None = None
        self._checked = False

    @property
    def shown_url(self) -> str:
        """The URL as messages show it: redacted (an ``access_token`` parameter never reaches a terminal)."""
        return _redacted(self.ctx, self.url)

    def receive(self) -> Message | Received:
        """The next received message (``str``/``bytes``), or the :class:`Received` step ``timeout``/``close``.

        When the recording holds nothing more, raises :class:`ReplayError` (kept in ``ctx.failures``):
        waiting for a message the recorded server never sent would hang the test.
        """
        if self.closed is not None:
            return Received("close", None, self.closed[0], self.closed[1])
        assert self.recorded is not None and self.events is not None
        with self._lock:
            index = self._next
            if index >= len(self.recorded.received):
                step = None
            else:
                step = self.recorded.received[index]
                self._next = index + 1
        if step is None:
            raise self._fail(
                ReplayError,
                f"the agent waits for a WebSocket message from {self.shown_url} that the recording does not "
                "hold",
                [f"received so far on this connection: {self.events.counts['received']} message(s)"],
            )
        if step.kind == "message":
            self.events.message("received", step.stored or {})
            return decode_message(step.stored)
        if step.kind == "timeout":
            self.events.timeout()
            return step
        self.closed = (step.code, step.reason, True)
        self.events.close("received", step.code, step.reason)
        self._check_complete()
        return step

    def send(self, message: Message) -> None:
        """Record the client's message and compare it with the recorded one at its index."""
        assert self.recorded is not None and self.events is not None
        index = self.events.message("sent", encode_message(message))
        live = _as_stored(self.ctx, message)
        recorded = self.recorded.sent
        if index >= len(recorded):
            self._fail(
                DriftError,
                f"WebSocket message {index} sent to {self.shown_url} is not in the recording",
                [
                    f"sent now: {excerpt(decode_message(live))}",
                    f"the recording sent {len(recorded)} message(s) here",
                ],
            )
            return
        if bodies.normalise_for_match(live) != bodies.normalise_for_match(recorded[index]):
            self._fail(
                DriftError,
                f"WebSocket message {index} sent to {self.shown_url} differs from the recording",
                [
                    f"sent now:  {excerpt(decode_message(live))}",
                    f"recorded:  {excerpt(decode_message(recorded[index]))}",
                ],
            )

    def close(self, code: int | None, reason: str) -> None:
        """The client closes (a no-op once closed)."""
        if self.closed is not None:
            return
        self.closed = (code, reason, False)
        if self.events is not None:
            self.events.close("sent", code, reason)
        self._check_complete()

    def _check_complete(self) -> None:
        if self._checked or self.recorded is None or self.events is None:
            return
        self._checked = True
        sent, expected = self.events.counts["sent"], len(self.recorded.sent)
        if sent < expected:
            self._fail(
                DriftError,
                f"WebSocket messages {sent} to {expected - 1} sent to {self.shown_url} when recorded were "
                "not sent",
                [f"first missing: {excerpt(decode_message(self.recorded.sent[sent]))}"],
            )

    def _fail(
        self, kind: type[ReplayError] | type[DriftError], headline: str, evidence: list[str]
    ) -> BaseException:
        error = kind(
            headline,
            evidence=[
                *evidence,
                f"connection: {self.events.connection if self.events else '?'} ({self.shown_url})",
            ],
            cassette=self.ctx.cassette,
            mode=self.ctx.mode,
            fixes=[
                rerecord_fix(
                    self.ctx.settings.nodeid, self.ctx.cassette, lead="if the change is intended, re-record"
                )
                + " (the recorded conversation is replaced)",
                "if it is not, find what changed the agent's messages (prompt, tool arguments, agent code)",
            ],
        )
        # The agent may swallow the exception (a reconnect loop): the test must still fail.
        self.ctx.failures.add(error)
        return error


Opening = LiveConnection | ServedConversation


def open_connection(ctx: RunContext, request: HttpRequest) -> Opening:
    """Decide one connection: live (and recorded) or served. Raises the refusal of an unmatched one."""
    action = decide(ctx, request)
    state = ctx.rooms.of(_RunConnections, lambda: _RunConnections(ctx))
    if isinstance(action, Refuse):
        raise action.exception(lambda fault: ConnectionResetError(fault.message()))
    url = _redacted(ctx, request.url)
    if isinstance(action, Send):
        events = ConversationEvents(ctx, request.url, state.next_number())
        live_url = action.url if action.url is not None else request.url
        return LiveConnection(live_url, action.permit, action.capture, events)
    response = action.response
    if response.status != 101:
        # The recorded handshake was refused: served as the same refusal, no conversation follows.
        return ServedConversation(ctx, response, None, None)
    recorded = state.take(url)
    if recorded is None:
        error = UnmatchedRequestError(
            f"no recorded WebSocket conversation matches {url}",
            evidence=[
                f"live connection: GET {url}",
                "the cassette's WebSocket conversations with this URL were all served already",
                f"recorded WebSocket URLs: {', '.join(sorted(state.by_url)) or 'none'}",
            ],
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=[new_call_fix(ctx.settings.nodeid, ctx.cassette)],
        )
        ctx.failures.add(error)
        raise error
    events = ConversationEvents(ctx, request.url, state.next_number())
    return ServedConversation(ctx, response, recorded, events)
