"""Sandbox mode end to end: model calls served from the cassette, tool HTTP calls only to sandbox
services the test supplies (a base-URL mapping to a local server, or respx routes), ``@tool``
functions executed, injected faults (status, timeout, reset, 429 + Retry-After), and the end-of-run
idempotency checks: an agent that retries correctly passes, one that double-writes or drops its
idempotency key fails with a message saying so. The recorded hosts never receive anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_modes_regression import KIT, Lab, make_lab

CONFTEST = """
import json, os
import pytest

@pytest.fixture
def agentreplay_config():
    return json.loads(os.environ.get("AGENT_CONFIG") or "{}")
"""


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    pytester.makeconftest(CONFTEST)
    yield from make_lab(pytester, monkeypatch, flaky=False)


@pytest.fixture
def sandbox(lab: Lab) -> Iterator[Any]:
    """The recording is made against ``lab.tools``; the sandbox service is a fresh tools server."""
    lab.record()
    service = lab.kit.ToolsServer()
    try:
        yield service
    finally:
        service.stop()


def run_sandbox(
    lab: Lab, service: Any, *, faults: Any = None, variant: str = "", **extra: Any
) -> pytest.RunResult:
    config: dict[str, Any] = {"sandbox": {lab.tools.url: service.url}, **extra}
    if faults is not None:
        config["faults"] = faults
    lab.monkeypatch.setenv("AGENT_CONFIG", json.dumps(config))
    lab.kit.CALLED.clear()
    return lab.run("--agentreplay-mode=sandbox", variant=variant)


def tickets_route(lab: Lab) -> str:
    return f"POST {lab.tools.url}/tickets"


def posts(service: Any, path: str) -> list[Any]:
    return [entry for entry in service.log if entry[0] == "POST" and entry[1] == path]


# -- routing ----------------------------------------------------------------------------------------


def test_sandbox_sends_tool_calls_to_the_sandbox_service_only(lab: Lab, sandbox: Any) -> None:
    before = lab.seen()
    result = run_sandbox(lab, sandbox)
    result.assert_outcomes(passed=1)
    assert lab.seen() == before, "sandbox reached the recorded host or the model server"
    assert [e[:2] for e in sandbox.log] == [("GET", "/orders/A1"), ("POST", "/tickets"), ("POST", "/notify")]
    assert len(sandbox.commits) == 1
    # @tool functions execute in sandbox (the read tool and the write tool).
    assert [c[0] for c in lab.kit.CALLED] == ["get_policy", "notify_customer"]


def test_unmapped_tool_host_is_refused_with_a_clear_error(lab: Lab, sandbox: Any) -> None:
    before = lab.seen()
    lab.monkeypatch.setenv("AGENT_CONFIG", "{}")
    result = lab.run("--agentreplay-mode=sandbox")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sandbox: tool call to GET http://127.0.0.1:*/orders/A1 has no sandbox service; "
            "it was not sent*",
            "*sandbox services: none configured*",
            '*map it to a local service: @pytest.mark.agentreplay(sandbox={"http://127.0.0.1:*',
        ]
    )
    assert lab.seen() == before
    assert sandbox.log == []


def test_sandbox_mapping_and_faults_from_the_marker(lab: Lab, sandbox: Any) -> None:
    lab.pytester.makepyfile(
        test_agent="""
import os
import pytest
import agentkit

@pytest.mark.agentreplay(
    mode="sandbox",
    sandbox={os.environ["TOOLS_URL"]: os.environ["SANDBOX_URL"]},
    faults=[{"route": "POST " + os.environ["TOOLS_URL"] + "/tickets", "nth": 1, "status": 503}],
)
def test_support(agent_replay):
    answer = agentkit.run_agent("Where is my order A1? It is late.")
    assert "A1" in answer
"""
    )
    lab.monkeypatch.setenv("SANDBOX_URL", sandbox.url)
    before = lab.seen()
    result = lab.run()
    result.assert_outcomes(passed=1)
    assert lab.seen() == before
    # The 503 was injected (never reached the service); the retry with the same key was delivered.
    assert len(posts(sandbox, "/tickets")) == 1 and len(sandbox.commits) == 1


def test_respx_routes_serve_httpx_tool_calls(lab: Lab, sandbox: Any) -> None:
    lab.pytester.makepyfile(
        test_agent="""
import os
import httpx
import respx
import agentkit

def test_support(agent_replay):
    with respx.mock(assert_all_called=True) as router:
        route = router.get(os.environ["TOOLS_URL"] + "/orders/A1").mock(
            return_value=httpx.Response(200, json={"id": "A1", "status": "delayed", "carrier": "UPS"})
        )
        answer = agentkit.run_agent("Where is my order A1? It is late.")
    assert route.call_count == 1
    assert "A1" in answer
"""
    )
    before = lab.seen()
    result = run_sandbox(lab, sandbox)
    result.assert_outcomes(passed=1)
    assert lab.seen() == before
    # respx answered the read (httpx); the writes (requests) went to the mapped sandbox service.
    assert [e[:2] for e in sandbox.log] == [("POST", "/tickets"), ("POST", "/notify")]


# -- faults: the client sees its own exception types ------------------------------------------------

CLIENTS_TEST = """
import asyncio, os
import aiohttp, httpx, pytest, requests

def test_clients(agent_replay):
    url = os.environ["TOOLS_URL"] + "/orders/A1"
    if agent_replay.recording:
        for _ in range(4):
            httpx.get(url)
        for _ in range(2):
            requests.get(url)
        return
    with pytest.raises(httpx.ReadTimeout, match="injected timeout"):
        httpx.get(url)
    with pytest.raises(httpx.ReadError, match="Connection reset by peer"):
        httpx.get(url)
    r = httpx.get(url)
    assert r.status_code == 429 and r.headers["retry-after"] == "2"
    assert httpx.get(url).json()["id"] == "A1"
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(url, timeout=5)
    with pytest.raises(requests.exceptions.ConnectionError, match="reset"):
        requests.get(url, timeout=5)

    async def aio():
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ServerTimeoutError):
                await session.get(url)
            with pytest.raises(aiohttp.ClientOSError):
                await session.get(url)
            async with session.get(url) as r:
                assert r.status == 503
    asyncio.run(aio())
"""


def test_each_fault_raises_the_clients_own_exception(lab: Lab, sandbox: Any) -> None:
    lab.pytester.makepyfile(test_agent=CLIENTS_TEST)
    lab.record()
    route = f"GET {lab.tools.url}/orders/A1"
    faults = [
        {"route": route, "nth": 1, "timeout": True, "delivered": False},
        {"route": route, "nth": 2, "reset": True, "delivered": False},
        {"route": route, "nth": 3, "status": 429, "retry_after": 2},
        {"route": route, "nth": 5, "timeout": True},
        {"route": route, "nth": 6, "reset": True},
        {"route": route, "nth": 7, "timeout": True, "delivered": False},
        {"route": route, "nth": 8, "reset": True, "delivered": False},
        {"route": route, "nth": 9, "status": 503},
    ]
    sandbox.log.clear()
    before = lab.seen()
    result = run_sandbox(lab, sandbox, faults=faults)
    result.assert_outcomes(passed=1)
    assert lab.seen() == before
    # Delivered faults reached the sandbox service (the answer was lost), the others did not.
    assert len([e for e in sandbox.log if e[0] == "GET"]) == 3


def test_invalid_faults_are_reported_with_the_valid_keys(lab: Lab, sandbox: Any) -> None:
    result = run_sandbox(lab, sandbox, faults=[{"route": "POST /x", "status": 503, "when": 1}])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*invalid agentreplay fault #1: unknown key(s) when*",
            "*valid keys: route, nth, status, timeout, reset*",
        ]
    )


def test_invalid_faults_still_count_what_replay_did_not_spend(lab: Lab, sandbox: Any) -> None:
    result = run_sandbox(lab, sandbox, faults=[{"when": 1}])
    result.assert_outcomes(failed=1)
    # The first model call was served before the first tool call parsed the faults and failed the test.
    result.stdout.fnmatch_lines(["*not spent: 1 model call(s) served from cassettes*"])


# -- faults against an agent with retry logic -------------------------------------------------------

FAULTS: dict[str, dict[str, Any]] = {
    "status-503": {"nth": 1, "status": 503},
    "timeout": {"nth": 1, "timeout": True},
    "reset": {"nth": 1, "reset": True},
    "429-retry-after": {"nth": 1, "status": 429, "retry_after": 1},
    "timeout-before-send": {"nth": 1, "timeout": True, "delivered": False},
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_agent_that_retries_correctly_passes(lab: Lab, sandbox: Any, fault: str) -> None:
    before = lab.seen()
    result = run_sandbox(lab, sandbox, faults=[{"route": tickets_route(lab), **FAULTS[fault]}])
    result.assert_outcomes(passed=1)
    assert lab.seen() == before
    # Exactly one ticket exists, whatever was lost on the way.
    assert len(sandbox.commits) == 1
    keys = {entry[2] for entry in posts(sandbox, "/tickets")}
    assert len(keys) == 1 and next(iter(keys)).startswith("tk-")


@pytest.mark.parametrize("fault", ["timeout", "reset"])
def test_agent_without_idempotency_keys_double_writes_and_fails(lab: Lab, sandbox: Any, fault: str) -> None:
    """No key at all: the lost answer makes the agent send the same ticket twice; two tickets exist."""
    result = run_sandbox(
        lab, sandbox, faults=[{"route": tickets_route(lab), **FAULTS[fault]}], variant="no_key"
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "sandbox: the agent broke idempotency" in out
    assert "effect committed twice: POST http://127.0.0.1:" in out
    assert "without an idempotency key, identical body" in out
    assert f"injected {fault}" in out
    assert len(sandbox.commits) == 2


def test_agent_that_drops_its_key_on_retry_fails(lab: Lab, sandbox: Any) -> None:
    result = run_sandbox(
        lab, sandbox, faults=[{"route": tickets_route(lab), "nth": 1, "status": 503}], variant="retry_no_key"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sandbox: the agent broke idempotency: 1 violation(s)*",
            "*retry of POST http://127.0.0.1:*/tickets (seq *) was sent without its idempotency key; "
            "the failed attempt (seq *, injected status 503) used 'tk-*'*",
        ]
    )


def test_agent_that_changes_its_key_on_retry_double_writes_and_fails(lab: Lab, sandbox: Any) -> None:
    result = run_sandbox(
        lab,
        sandbox,
        faults=[{"route": tickets_route(lab), "nth": 1, "timeout": True}],
        variant="retry_new_key",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*retry of POST http://127.0.0.1:*/tickets (seq *) was sent with a new idempotency key 'tk-*-1'*"]
    )
    # The timeout was injected after delivery: the sandbox service now holds two tickets.
    assert len(sandbox.commits) == 2


def test_write_tool_retried_with_a_new_key_is_reported(lab: Lab, sandbox: Any) -> None:
    """The idempotency checks also cover ``@tool`` writes (the tool raised, the retry changed the key)."""
    lab.pytester.makepyfile(
        test_agent="""
import pytest
from pytest_agentreplay import tool

ATTEMPTS = []

@tool(name="refund", effect="write", idempotency_key="key")
def refund(order_id, key):
    ATTEMPTS.append(key)
    if len(ATTEMPTS) == 1 and key != "rk-recording":
        raise TimeoutError("gateway timeout")
    return {"id": "R-1"}

def test_support(agent_replay):
    ATTEMPTS.clear()
    if agent_replay.recording:
        refund("A1", key="rk-recording")
        return
    try:
        refund("A1", key="rk-1")
    except TimeoutError:
        refund("A1", key="rk-2")
"""
    )
    lab.record()
    result = run_sandbox(lab, sandbox)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*retry of tool refund (seq *) was sent with a new idempotency key 'rk-2'; "
            "the failed attempt*'rk-1'*"
        ]
    )


def test_kit_is_shared() -> None:
    assert "class ToolsServer" in KIT
