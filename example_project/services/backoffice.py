"""The orders, tickets and refunds service the support agent calls (JSON over HTTP).

- ``GET /orders/<id>``: the order, or 404.
- ``POST /tickets`` and ``POST /refunds``: require an ``Idempotency-Key`` header. The first request with a
  key creates the record (201) and returns its receipt; a repeated key returns the same receipt (200,
  ``Idempotent-Replayed: true``) and never creates a second record.
- Faults (for sandbox runs) are queued per route and consumed in order: a ``delay`` answers late after
  doing the work (the lost-response case idempotency keys exist for), a ``status`` answers with that
  status (e.g. 429 with ``Retry-After``) without doing the work.

Ids are deterministic (counters from fixed bases), so two recordings produce identical bytes.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .base import Exchange, LocalService

ORDERS: dict[str, dict[str, Any]] = {
    "A1001": {
        "id": "A1001",
        "customer_id": "C-42",
        "status": "shipped",
        "carrier": "DHL",
        "tracking": "JD014600003828",
        "promised_delivery": "2024-05-03",
        "items": [{"sku": "KB-200", "name": "Mechanical keyboard", "price": 89.0}],
        "total": 89.0,
    },
    "A1002": {
        "id": "A1002",
        "customer_id": "C-42",
        "status": "delayed",
        "carrier": "Colissimo",
        "tracking": "6A18421913205",
        "promised_delivery": "2024-04-20",
        "days_late": 9,
        "last_scan": "2024-04-18 sorting hub Lyon",
        "items": [{"sku": "LMP-7", "name": "Desk lamp", "price": 42.0}],
        "total": 42.0,
    },
    "A1003": {
        "id": "A1003",
        "customer_id": "C-7",
        "status": "delivered",
        "carrier": "UPS",
        "delivered_on": "2024-04-22",
        "items": [{"sku": "MUG-01", "name": "Ceramic mug", "price": 18.5}],
        "total": 18.5,
    },
    "A1004": {
        "id": "A1004",
        "customer_id": "C-9",
        "status": "delivered",
        "carrier": "UPS",
        "delivered_on": "2024-04-19",
        "items": [{"sku": "STD-9", "name": "Laptop stand", "price": 240.0}],
        "total": 240.0,
    },
}


@dataclass(frozen=True)
class Fault:
    """One injected fault for ``route`` (e.g. ``"POST /tickets"``)."""

    route: str
    delay: float = 0.0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


class BackofficeService(LocalService):
    name: ClassVar[str] = "backoffice"

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.orders = copy.deepcopy(ORDERS)
        self.tickets: dict[str, dict[str, Any]] = {}
        self.refunds: dict[str, dict[str, Any]] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        self._counters = {"tickets": 1000, "refunds": 2000}
        self._faults: dict[str, deque[Fault]] = defaultdict(deque)

    def inject(self, *faults: Fault) -> None:
        with self.lock:
            for fault in faults:
                self._faults[fault.route].append(fault)

    def requests_to(self, method: str, path: str) -> list[Any]:
        return [r for r in self.log if r.method == method and r.path == path]

    def handle(self, exchange: Exchange) -> None:
        path = exchange.path.split("?", 1)[0].rstrip("/")
        route = f"{exchange.method} {path}"
        with self.lock:
            queue = self._faults.get(route)
            fault = queue.popleft() if queue else None
        if fault is not None and fault.status is not None:
            exchange.json(fault.status, {"error": "injected fault", "status": fault.status}, fault.headers)
            return
        status, body, headers = self._route(exchange, path)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        exchange.json(status, body, headers)

    def _route(self, exchange: Exchange, path: str) -> tuple[int, Any, dict[str, str]]:
        parts = path.strip("/").split("/")
        if exchange.method == "GET" and len(parts) == 2 and parts[0] == "orders":
            order = self.orders.get(parts[1])
            if order is None:
                return 404, {"error": "order not found", "order_id": parts[1]}, {}
            return 200, order, {}
        if exchange.method == "POST" and path in ("/tickets", "/refunds"):
            return self._create(parts[0], exchange)
        return 404, {"error": "no such route", "path": path}, {}

    def _create(self, kind: str, exchange: Exchange) -> tuple[int, Any, dict[str, str]]:
        key = exchange.headers.get("idempotency-key")
        if not key:
            return 400, {"error": "Idempotency-Key header required"}, {}
        payload = exchange.json_body()
        if not isinstance(payload, dict) or "order_id" not in payload:
            return 422, {"error": "order_id required"}, {}
        store = self.tickets if kind == "tickets" else self.refunds
        with self.lock:
            existing = self._by_key.get((kind, key))
            if existing is not None:
                return 200, store[existing], {"Idempotent-Replayed": "true"}
            self._counters[kind] += 1
            prefix = "TCK" if kind == "tickets" else "RF"
            record_id = f"{prefix}-{self._counters[kind]}"
            record = {"id": record_id, "status": "open" if kind == "tickets" else "issued", **payload}
            store[record_id] = record
            self._by_key[(kind, key)] = record_id
        return 201, record, {"Location": f"/{kind}/{record_id}"}
