"""Sandbox mode: the model is served from the cassette, but the tools really call a fresh backoffice
started for the test, with faults injected by the plugin: the first ticket POST times out after the
service committed it (the lost response), the second gets a 429 with ``Retry-After: 1``. The agent
must retry with the same idempotency key, wait as told, and the service must hold exactly one ticket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import BACKOFFICE_URL, SupportHarness
from services import BackofficeService

from pytest_agentreplay import AgentReplay

TICKETS_ROUTE = f"POST {BACKOFFICE_URL}/tickets"
FAULTS = [
    {"route": TICKETS_ROUTE, "nth": 1, "timeout": True, "delivered": True},
    {"route": TICKETS_ROUTE, "nth": 2, "status": 429, "retry_after": 1},
]


@pytest.fixture
def sandbox_backoffice() -> Iterator[BackofficeService]:
    service = BackofficeService(port=0)  # a free port: the sandbox is isolated from the recorded address
    service.start()
    yield service
    service.stop()


@pytest.fixture
def agentreplay_config(
    agentreplay_config: dict[str, Any], sandbox_backoffice: BackofficeService
) -> dict[str, Any]:
    return {**agentreplay_config, "sandbox": {BACKOFFICE_URL: sandbox_backoffice.url}, "faults": FAULTS}


@pytest.mark.agentreplay(mode="sandbox")
def test_ticket_retries_reuse_the_idempotency_key(
    support: SupportHarness,
    agent_replay: AgentReplay,
    sandbox_backoffice: BackofficeService,
    require_mode: Callable[[str], None],
) -> None:
    require_mode("sandbox")
    result = support.run("late_parcel")

    assert result.state.tickets == ["TCK-1001"]
    if agent_replay.mode != "sandbox":
        return  # recording: the clean run, no faults
    attempts = support.agents[0].backoffice.attempts
    assert [a.outcome for a in attempts] == ["timeout", "http 429", "created"]
    assert len({a.idempotency_key for a in attempts}) == 1
    assert support.sleeps[-1] == 1.0  # Retry-After honoured
    posts = sandbox_backoffice.requests_to("POST", "/tickets")
    # The timed-out attempt reached the service; the 429 was injected in front of it; the retry did too.
    assert len(posts) == 2
    assert {p.headers["idempotency-key"] for p in posts} == {attempts[0].idempotency_key}
    assert list(sandbox_backoffice.tickets) == ["TCK-1001"]  # never a second ticket
    assert sandbox_backoffice.requests_to("GET", "/orders/A1002") != []  # reads went to the sandbox too
