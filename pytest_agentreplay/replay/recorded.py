"""The recorded exchanges of a cassette as replay serves them, and the queues that hold them per key.

A :class:`RecordedExchange` is one recorded HTTP exchange, its response rendered on first serve. Exchanges
matched by their request (model calls, reads) wait in :class:`KeyedQueues`: per key, in recorded order, the
first one not yet played is served next.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..core.capture import RecordedRun
from ..core.documents import Document
from ..core.events import Event
from ..http.exchange import HttpRequest, HttpResponse


# A plain class, not a dataclass: far cheaper to create at start-up; never compared (identity) nor printed.
class RecordedExchange:
    __slots__ = (
        "_content",
        "_payload",
        "_request",
        "_wire",
        "body_key",
        "event",
        "idem_key",
        "kind",
        "method",
        "next_same",
        "played",
        "request_payload",
        "url",
    )

    def __init__(
        self,
        event: Event,
        kind: str,
        method: str,
        url: str,
        body_key: str,
        idem_key: str | None,
        request_payload: Document | None,  # turned into an ``HttpRequest`` only on the error path
    ) -> None:
        self.event, self.kind, self.method, self.url = event, kind, method, url
        self.body_key, self.idem_key, self.request_payload = body_key, idem_key, request_payload
        self.played = False
        # The next recorded exchange with the same key (:class:`KeyedQueues`).
        self.next_same: RecordedExchange | None = None
        self._payload: Document | None = None
        # The served bytes and wire headers, rendered on first serve: bytes and tuples of strings, which
        # the garbage collector stops tracking (a cached response object would outlive every call).
        self._content: bytes | None = None
        self._wire: tuple[tuple[str, str], ...] | None = None
        self._request: HttpRequest | None = None

    def response_payload(self, recorded: RecordedRun) -> Document:
        # Resolved on first use only: a blob that is never served is never read.
        payload = self._payload
        if payload is None:
            payload = self._payload = recorded.payload(self.event.output_ref) or {
                "status": 200,
                "headers": {},
                "body": None,
            }
        return payload

    def response(self, recorded: RecordedRun) -> HttpResponse:
        """The response to serve; a read served again (the last one repeats) is not rendered again."""
        response = HttpResponse.from_payload(self.response_payload(recorded))
        if self._wire is None:
            # Renders a plain body too (its length is a header); SSE bodies render when pulled.
            self._wire = response.wire_tuple()
            self._content = response._content
        else:
            response._wire = self._wire
            response._content = self._content
        return response

    @property
    def request(self) -> HttpRequest | None:
        if self._request is None and self.request_payload is not None:
            self._request = HttpRequest.from_payload(self.request_payload)
        return self._request

    @property
    def host(self) -> str:
        request = self.request
        return request.host if request is not None else ""


class KeyedQueues:
    """Recorded exchanges queued per key in recorded order; :meth:`take` serves the first one not yet played.

    A key's queue is a chain through the exchanges themselves (``next_same``), as most keys hold one
    exchange and a queue object per key would outlive the call. An exchange played by another rule (a
    model call no recorded request equals is served in order) is passed over when its key is asked for.
    Not locked: the index that owns the queues holds its lock around every call.
    """

    __slots__ = ("_tails", "heads")

    def __init__(self) -> None:
        self.heads: dict[Hashable, RecordedExchange] = {}
        self._tails: dict[Hashable, RecordedExchange] = {}

    def add(self, key: Hashable, rec: RecordedExchange) -> None:
        tail = self._tails.get(key)
        if tail is None:
            self.heads[key] = rec
        else:
            tail.next_same = rec
        self._tails[key] = rec

    def built(self) -> None:
        """Every exchange is in: the tails were only needed to append."""
        self._tails = {}

    def take(self, key: Hashable) -> RecordedExchange | None:
        """The first unplayed exchange of ``key``, marked played; None when the key has none left."""
        rec = self.heads.get(key)
        while rec is not None and rec.played:
            rec = rec.next_same
        if rec is None:
            self.heads.pop(key, None)
            return None
        following = rec.next_same
        if following is None:
            del self.heads[key]
        else:
            self.heads[key] = following
        rec.played = True
        return rec
