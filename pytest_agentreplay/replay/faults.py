"""Fault injection for sandbox mode: fail the nth call to a route with a status, a timeout or a reset
(the ``faults`` setting: docs/modes.md, Fault injection). Each interceptor raises its client's own
exception type from the :class:`Fault`, so retry logic sees what it would in production.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.constants import Mode
from ..core.documents import Document
from ..exceptions import ConfigError
from ..http.exchange import HttpRequest, HttpResponse

FAULT_KEYS = ("route", "nth", "status", "timeout", "reset", "retry_after", "delivered", "body")
FAULT_KINDS = ("status", "timeout", "reset")


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure, resolved for one call."""

    kind: str  # status | timeout | reset
    route: str
    nth: int
    status: int | None = None
    retry_after: float | None = None
    delivered: bool = False
    body: Any = None

    def describe(self) -> str:
        if self.kind == "status":
            extra = f" (Retry-After {self.retry_after:g})" if self.retry_after is not None else ""
            return f"status {self.status}{extra} on call {self.nth} to {self.route}"
        where = "after the request was delivered" if self.delivered else "before sending"
        return f"{self.kind} {where} on call {self.nth} to {self.route}"

    def message(self) -> str:
        """What the client's exception says, after the client's own wording."""
        return f"agentreplay sandbox: injected {self.describe()}"

    def to_data(self) -> Document:
        """What the emitted event carries in ``data.fault``."""
        out: Document = {"kind": self.kind, "route": self.route, "nth": self.nth}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        if self.kind != "status":
            out["delivered"] = self.delivered
        return out

    def response(self) -> HttpResponse:
        """The response a status fault answers with (never sent to the service)."""
        assert self.status is not None
        headers = {"content-type": "application/json"}
        if self.retry_after is not None:
            value = self.retry_after
            headers["retry-after"] = str(int(value)) if float(value).is_integer() else str(value)
        body = self.body if self.body is not None else {"error": "injected fault", "status": self.status}
        return HttpResponse(self.status, headers, {"json": body, "content_type": "application/json"})


@dataclass(frozen=True, slots=True)
class _Spec:
    method: str
    url_glob: str
    nths: frozenset[int]
    # What a hit call gets, with the call's number as ``nth``.
    fault: Fault


def _error(problem: str, index: int, spec: object) -> ConfigError:
    return ConfigError(
        f"invalid agentreplay fault #{index + 1}: {problem}",
        evidence=[
            f"given: {spec!r}",
            f"valid keys: {', '.join(FAULT_KEYS)}",
            f"one of: {', '.join(FAULT_KINDS)} (status with an HTTP status code, timeout/reset true)",
        ],
        mode=Mode.SANDBOX,
        place="faults= on @pytest.mark.agentreplay or in agentreplay_config",
        fixes=['e.g. faults=[{"route": "POST https://tickets.example/tickets", "nth": 1, "status": 503}]'],
    )


def _strip_query(url: str) -> str:
    return url.partition("?")[0].partition("#")[0].rstrip("/")


def parse_faults(raw: object) -> list[_Spec]:
    """Validate the ``faults`` setting; raises ``ConfigError`` naming the bad entry."""
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise _error("faults must be a list of dicts", 0, raw)
    specs: list[_Spec] = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise _error("each fault must be a dict", index, item)
        unknown = sorted(str(k) for k in item if k not in FAULT_KEYS)
        if unknown:
            raise _error(f"unknown key(s) {', '.join(unknown)}", index, item)
        route = item.get("route")
        if not isinstance(route, str) or " " not in route.strip():
            raise _error(
                'route must be "METHOD URL", e.g. "POST https://tickets.example/tickets"', index, item
            )
        method, _, url = route.strip().partition(" ")
        kinds = [k for k in FAULT_KINDS if item.get(k) not in (None, False)]
        if len(kinds) != 1:
            raise _error("give exactly one of status, timeout, reset", index, item)
        kind = kinds[0]
        status = item.get("status")
        if kind == "status" and (
            isinstance(status, bool) or not isinstance(status, int) or not 100 <= status < 600
        ):
            raise _error(f"status must be an HTTP status code, not {status!r}", index, item)
        nth_raw = item.get("nth", 1)
        nths = nth_raw if isinstance(nth_raw, list | tuple) else [nth_raw]
        if not nths or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in nths):
            raise _error(f"nth must be a call number >= 1 or a list of them, not {nth_raw!r}", index, item)
        retry_after = item.get("retry_after")
        if retry_after is not None and (
            isinstance(retry_after, bool) or not isinstance(retry_after, int | float)
        ):
            raise _error(f"retry_after must be seconds, not {retry_after!r}", index, item)
        specs.append(
            _Spec(
                method=method.upper(),
                url_glob=_strip_query(url.strip()),
                nths=frozenset(nths),
                fault=Fault(
                    kind,
                    f"{method.upper()} {url.strip()}",
                    0,
                    status=int(status) if kind == "status" and status is not None else None,
                    retry_after=float(retry_after) if retry_after is not None else None,
                    delivered=bool(item.get("delivered", True)) if kind != "status" else False,
                    body=item.get("body"),
                ),
            )
        )
    return specs


class FaultPlan:
    """Counts calls per fault route and says which call fails how. Thread-safe (agents call in parallel)."""

    def __init__(self, specs: list[_Spec]) -> None:
        self.specs = specs
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()
        self.injected: list[Fault] = []

    def next_fault(self, request: HttpRequest, *alternative_urls: str) -> Fault | None:
        """Count this call against every matching route; the first spec whose nth is hit applies."""
        if not self.specs:
            return None
        urls = [_strip_query(request.url), *(_strip_query(u) for u in alternative_urls)]
        chosen: Fault | None = None
        with self._lock:
            for i, spec in enumerate(self.specs):
                if spec.method not in ("*", request.method):
                    continue
                if not any(u == spec.url_glob or fnmatch.fnmatchcase(u, spec.url_glob) for u in urls):
                    continue
                count = self._counts.get(i, 0) + 1
                self._counts[i] = count
                if chosen is None and count in spec.nths:
                    chosen = replace(spec.fault, nth=count)
            if chosen is not None:
                self.injected.append(chosen)
        return chosen
