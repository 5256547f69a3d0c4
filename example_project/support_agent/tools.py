"""The support agent's tools: knowledge-base search, order lookup, ticket creation and refunds.

- ``search_kb`` is an in-process function wrapped with ``@tool``: replay serves its recorded result.
  The retrieval (query, document ids, corpus version) is recorded outside the tool body, from the
  result, so the retrieval event exists in recording and replay alike.
- Orders, tickets and refunds are HTTP calls (httpx for orders and tickets, requests for refunds);
  the plugin intercepts them at the transport level, so they need no decorator.
- Writes carry a deterministic ``Idempotency-Key``; ticket creation retries on timeouts and on 429/503
  (honouring ``Retry-After``) with the same key.
- Refunds go through the approval policy (``refund-approval`` version 3); above the automatic limit a
  human approval checkpoint is requested and decided by the configured approver.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx
import requests

from pytest_agentreplay import record_approval, record_policy, record_retrieval, tool

from .kb import load_kb

REFUND_POLICY = "refund-approval"
REFUND_POLICY_VERSION = "3"
AUTO_REFUND_LIMIT = 50.0
# The queue new tickets land in. ``SUPPORT_AGENT_DRIFT=argument`` changes it: the documented drift demo.
TICKET_QUEUE = "carrier-claims"
DRIFTED_TICKET_QUEUE = "general"
RETRYABLE_STATUS = frozenset({429, 503})


class ToolFailure(Exception):
    """A tool could not complete; the agent reports it to the model as an error result."""


# -- knowledge base --------------------------------------------------------------------------------


@tool(name="search_kb", schema_version="1")
def search_kb(query: str, limit: int = 3) -> dict[str, Any]:
    """Search the local knowledge base (served from the cassette in replay)."""
    kb = load_kb()
    hits = kb.search(query, limit)
    return {
        "corpus_version": kb.version,
        "documents": [{"id": d.id, "title": d.title, "text": d.body, "score": s} for d, s in hits],
    }


def search_knowledge_base(query: str, limit: int = 3) -> dict[str, Any]:
    result = search_kb(query, limit)
    docs = result.get("documents", [])
    record_retrieval(
        query,
        document_ids=[d["id"] for d in docs],
        corpus_version=result.get("corpus_version"),
        scores=[d["score"] for d in docs],
    )
    return result


# -- approvals -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Approval:
    granted: bool
    by: str
    reason: str


class Approver(Protocol):
    def __call__(self, order_id: str, amount: float, reason: str) -> Approval: ...


@dataclass
class ScriptedApprover:
    """A stand-in for the human supervisor: decisions scripted per order id (default: deny)."""

    decisions: dict[str, bool] = field(default_factory=dict)
    name: str = "supervisor:dana"
    asked: list[tuple[str, float]] = field(default_factory=list)

    def __call__(self, order_id: str, amount: float, reason: str) -> Approval:
        self.asked.append((order_id, amount))
        granted = self.decisions.get(order_id, False)
        why = "defect confirmed from the photo" if granted else "needs a return before refunding"
        return Approval(granted, self.name, why)


def deny_all(order_id: str, amount: float, reason: str) -> Approval:
    return Approval(False, "policy:no-approver", "no approver configured")


# -- HTTP tools ------------------------------------------------------------------------------------


def idempotency_key(kind: str, *parts: object) -> str:
    """Deterministic per logical operation: a retry (or a replay) of the same operation reuses it."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return f"{kind}-{digest[:24]}"


def retry_after_seconds(value: str | None, default: float = 1.0) -> float:
    if not value:
        return default
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return default


@dataclass
class Attempt:
    """One try of a write, kept by the client for tests and logs."""

    tool: str
    idempotency_key: str
    attempt: int
    outcome: str


class Backoffice:
    """HTTP client of the orders, tickets and refunds services."""

    def __init__(
        self,
        *,
        orders_url: str,
        tickets_url: str,
        refunds_url: str,
        timeout: float = 10.0,
        ticket_timeout: float = 2.0,
        max_attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.orders_url = orders_url.rstrip("/")
        self.tickets_url = tickets_url.rstrip("/")
        self.refunds_url = refunds_url.rstrip("/")
        self.ticket_timeout = ticket_timeout
        self.max_attempts = max_attempts
        self.sleep = sleep
        self.attempts: list[Attempt] = []
        self._http = httpx.Client(timeout=timeout)
        self._session = requests.Session()
        self._timeout = timeout

    def close(self) -> None:
        self._http.close()
        self._session.close()

    def lookup_order(self, order_id: str) -> dict[str, Any]:
        response = self._http.get(f"{self.orders_url}/orders/{order_id}")
        if response.status_code == 404:
            return {"error": f"order {order_id} not found"}
        response.raise_for_status()
        order: dict[str, Any] = response.json()
        return order

    def create_ticket(
        self, *, order_id: str, summary: str, priority: str, customer_id: str, key: str
    ) -> dict[str, Any]:
        queue = DRIFTED_TICKET_QUEUE if os.environ.get("SUPPORT_AGENT_DRIFT") == "argument" else TICKET_QUEUE
        body = {
            "order_id": order_id,
            "customer_id": customer_id,
            "summary": summary,
            "priority": priority,
            "queue": queue,
            # A generated request id (uuid4), drawn once per ticket: retries resend it; replay serves it back.
            "request_id": str(uuid.uuid4()),
        }
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self._http.post(
                    f"{self.tickets_url}/tickets",
                    json=body,
                    headers={"Idempotency-Key": key},
                    timeout=self.ticket_timeout,
                )
            except httpx.TimeoutException:
                self._retrying("create_ticket", key, attempt, "timeout")
                self.sleep(0.2 * attempt)
                continue
            if response.status_code in RETRYABLE_STATUS:
                self._retrying("create_ticket", key, attempt, f"http {response.status_code}")
                self.sleep(retry_after_seconds(response.headers.get("retry-after")))
                continue
            response.raise_for_status()
            ticket = response.json()
            self.attempts.append(Attempt("create_ticket", key, attempt, "created"))
            return {"receipt": ticket["id"], "status": ticket["status"], "order_id": order_id}
        raise ToolFailure(f"ticket service unavailable after {self.max_attempts} attempts")

    def _retrying(self, name: str, key: str, attempt: int, outcome: str) -> None:
        # Each attempt is in the history already: the HTTP layer records every POST with its key and status.
        self.attempts.append(Attempt(name, key, attempt, outcome))
        if attempt == self.max_attempts:
            raise ToolFailure(f"{name} failed {attempt} times (last: {outcome})")

    def post_refund(
        self, *, order_id: str, amount: float, reason: str, approved_by: str, key: str
    ) -> dict[str, Any]:
        body = {"order_id": order_id, "amount": amount, "reason": reason, "approved_by": approved_by}
        response = self._session.post(
            f"{self.refunds_url}/refunds", json=body, headers={"Idempotency-Key": key}, timeout=self._timeout
        )
        response.raise_for_status()
        refund = response.json()
        return {"receipt": refund["id"], "status": refund["status"], "amount": amount}


def refund_verdict(
    amount: float, order_total: float | None, limit: float = AUTO_REFUND_LIMIT
) -> tuple[str, str]:
    """The refund-approval policy, version 3: (verdict, reason)."""
    if amount <= 0:
        return "rejected", "amount must be positive"
    if order_total is not None and amount > order_total:
        return "rejected", f"amount {amount:.2f} exceeds the order total {order_total:.2f}"
    if amount <= limit:
        return "auto_approved", f"{amount:.2f} is within the automatic limit of {limit:.2f}"
    return "needs_approval", f"{amount:.2f} is above the automatic limit of {limit:.2f}"


def issue_refund(
    backoffice: Backoffice,
    approver: Approver,
    *,
    order_id: str,
    amount: float,
    reason: str,
    order_total: float | None,
    key: str,
) -> dict[str, Any]:
    verdict, why = refund_verdict(amount, order_total)
    record_policy(REFUND_POLICY, verdict, version=REFUND_POLICY_VERSION, reason=why)
    if verdict == "rejected":
        return {"status": "rejected", "reason": why}
    approved_by = "policy:auto"
    if verdict == "needs_approval":
        subject = f"refund {amount:.2f} for order {order_id}"
        record_approval("requested", subject=subject, reason=why)
        decision = approver(order_id, amount, reason)
        record_approval(
            "granted" if decision.granted else "denied",
            by=decision.by,
            subject=subject,
            reason=decision.reason,
        )
        if not decision.granted:
            return {"status": "denied", "reason": decision.reason}
        approved_by = decision.by
    return backoffice.post_refund(
        order_id=order_id, amount=amount, reason=reason, approved_by=approved_by, key=key
    )
