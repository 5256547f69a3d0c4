"""Which recorded model call answers a live one: the one whose request it equals, found in three steps:

1. the request hash (``data.request_hash``, over the JSON body): one dict lookup;
2. the body as the comparison sees it: redacted like the cassette, without the keys the mode's diff rules
   ignore at any depth (``created``, ``latency_ms``...), canonical. Asked only when the live body holds
   such a key or is not JSON (no hash); the recorded side is keyed the first time it is asked;
3. none equals (its prompt drifted): the first unplayed call to its endpoint, in recorded order.
"""

from __future__ import annotations

import functools
from collections import defaultdict, deque
from collections.abc import Callable

from ..core.constants import REPLAY_MODES
from ..core.documents import Document
from ..diff.rules import compiled
from ..http import bodies
from ..http.exchange import HttpRequest
from .recorded import KeyedQueues, RecordedExchange


@functools.cache
def ignored_names(mode: str) -> frozenset[str]:
    """The keys the mode's default diff rules ignore at any depth of a model call's request body (a run
    that is no replay mode is matched as a regression replay would be)."""
    mode = str(mode) if mode in REPLAY_MODES else "regression"
    return compiled(mode).ignored_anywhere("model.call")


def mentions(request: HttpRequest, names: frozenset[str]) -> bool:
    """Whether the live body may hold one of ``names`` as a key (a byte search, no parse). A content-coded
    body cannot be searched: it may."""
    if request.headers.get("content-encoding"):
        return True
    raw = request.body
    return any(b'"' + name.encode("utf-8") + b'"' in raw for name in names)


def _without(value: object, names: frozenset[str]) -> object:
    """``value`` without the object keys in ``names``, at any depth (the containers that hold none are the
    very objects given)."""
    if isinstance(value, dict):
        out = {k: _without(v, names) for k, v in value.items() if k not in names}
        if len(out) == len(value) and all(out[k] is value[k] for k in out):
            return value
        return out
    if isinstance(value, list):
        items = [_without(v, names) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def normalised_key(body: Document | None, names: frozenset[str]) -> str:
    """The matching key of a stored request body as the comparison sees it (step 2)."""
    if body is not None and "json" in body and names:
        body = {**body, "json": _without(body["json"], names)}
    return bodies.normalise_for_match(body)


class ModelCalls:
    """The recorded model calls of one cassette, per endpoint key (``openai:chat.completions``)."""

    def __init__(self) -> None:
        self.by_endpoint: dict[str, list[RecordedExchange]] = defaultdict(list)
        # Per endpoint, where the first unplayed call may be (every call before it was played).
        self._first: dict[str, int] = {}
        self._exact = KeyedQueues()
        # (endpoint, normalised body) -> calls, built when first asked.
        self._normalised: dict[tuple[str, str], deque[RecordedExchange]] | None = None

    def add(self, endpoint: str, rec: RecordedExchange) -> None:
        self.by_endpoint[endpoint].append(rec)
        digest = rec.event.data.get("request_hash")
        if isinstance(digest, str):
            self._exact.add((endpoint, digest), rec)

    def built(self) -> None:
        self._exact.built()

    def total(self, endpoint: str) -> int:
        return len(self.by_endpoint.get(endpoint, ()))

    def take_exact(self, endpoint: str, digest: str) -> RecordedExchange | None:
        return self._exact.take((endpoint, digest))

    def take_normalised(
        self,
        endpoint: str,
        key: str,
        names: frozenset[str],
        request_body: Callable[[RecordedExchange], Document | None],
    ) -> RecordedExchange | None:
        """The first unplayed call whose stored request body (``request_body``) has ``key`` under
        :func:`normalised_key`; the recorded calls are keyed so on the first call."""
        table = self._normalised
        if table is None:
            table = self._normalised = defaultdict(deque)
            for name, calls in self.by_endpoint.items():
                for rec in calls:
                    table[(name, normalised_key(request_body(rec), names))].append(rec)
        queue = table.get((endpoint, key))
        while queue:
            rec = queue.popleft()
            if not rec.played:
                rec.played = True
                return rec
        return None

    def take_in_order(self, endpoint: str) -> RecordedExchange | None:
        """The first call to ``endpoint`` not yet played, in recorded order."""
        calls = self.by_endpoint.get(endpoint, [])
        index = self._first.get(endpoint, 0)
        while index < len(calls) and calls[index].played:
            index += 1
        self._first[endpoint] = index
        if index == len(calls):
            return None
        rec = calls[index]
        rec.played = True
        return rec
