"""The replay policy decides per call, without an HTTP library, a patch or a socket.

Each test builds a run (mode, settings, recorded events) and a library-neutral request, and checks
the action: serve, send (rewritten, with a fault), or refuse, and what the run recorded.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_agentreplay.core.capture import Recorder, RunContext
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta, ToolInfo
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.exceptions import ConfigError, UnmatchedRequestError
from pytest_agentreplay.http.classify import classify_exchange
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse
from pytest_agentreplay.http.recording import emit_exchange, served
from pytest_agentreplay.replay.policy import Refuse, Send, Serve, decide
from pytest_agentreplay.replay.sandbox import SandboxError

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_agentreplay"
ORDERS = "https://orders.example"
TICKETS = "https://tickets.example/tickets"
MODEL_URL = "https://api.openai.com/v1/chat/completions"


class MemoryCassette:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def payload(self, ref: Any) -> Any:
        return None if ref is None else ref.inline


def json_response(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(
        status, {"content-type": "application/json"}, {"json": value, "content_type": "application/json"}
    )


def get(url: str) -> HttpRequest:
    return HttpRequest("GET", url, {"accept": "application/json"})


def post(url: str, value: Any, **headers: str) -> HttpRequest:
    body = json.dumps(value).encode()
    return HttpRequest(
        "POST", url, {"content-type": "application/json", "content-length": str(len(body)), **headers}, body
    )


def chat(model: str = "gpt-4o-mini") -> HttpRequest:
    return post(MODEL_URL, {"model": model, "messages": [{"role": "user", "content": "hi"}]})


def answer(text: str) -> HttpResponse:
    return json_response(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
    )


def recorded(*exchanges: tuple[HttpRequest, HttpResponse]) -> list[Event]:
    ctx = RunContext(Recorder(RunMeta(run_id="recording")), mode="capture")
    for request, response in exchanges:
        emit_exchange(ctx, request, response, classify_exchange(request, response, RunSettings()), 1.0)
    return ctx.recorder.events


def run(mode: str, events: list[Event] | None = None, **settings: Any) -> RunContext:
    cassette = cast(Any, MemoryCassette(events or []))
    return RunContext(
        Recorder(RunMeta(run_id="replay")), mode=mode, cassette="c.json", recorded=cassette, settings=settings
    )


def emitted(ctx: RunContext) -> list[Event]:
    return [e for e in ctx.recorder.events if e.type in ("http", "effect", "model.call")]


# -- recording ----------------------------------------------------------------------------------------


def test_recording_sends_every_call_as_addressed_and_captures_it() -> None:
    ctx = run("record")
    request = get(f"{ORDERS}/orders/A1")
    action = decide(ctx, request)
    assert isinstance(action, Send)
    assert (action.permit, action.url, action.body, action.fault) == ("orders.example", None, None, None)
    assert action.request is request
    assert action.capture.request is request and action.capture.ctx is ctx
    assert emitted(ctx) == []  # recorded once the response has been read, not before


# -- regression: served from the cassette --------------------------------------------------------------


def test_regression_serves_the_recorded_read_and_records_it() -> None:
    events = recorded((get(f"{ORDERS}/orders/A1"), json_response({"status": "shipped"})))
    ctx = run("regression", events)
    action = decide(ctx, get(f"{ORDERS}/orders/A1"))
    assert isinstance(action, Serve)
    assert action.response.status == 200 and action.response.json() == {"status": "shipped"}
    [event] = emitted(ctx)
    assert event.type == "http" and event.data["url"] == f"{ORDERS}/orders/A1"


def test_regression_serves_model_calls_in_recorded_order() -> None:
    events = recorded((chat(), answer("first")), (chat(), answer("second")))
    ctx = run("regression", events)
    served = [decide(ctx, chat()) for _ in range(2)]
    assert [cast(Serve, a).response.json()["choices"][0]["message"]["content"] for a in served] == [
        "first",
        "second",
    ]
    third = decide(ctx, chat())
    assert isinstance(third, Refuse) and isinstance(third.error, UnmatchedRequestError)


def test_regression_never_sends_a_write_it_serves_the_recorded_receipt() -> None:
    events = recorded((post(TICKETS, {"subject": "late"}), json_response({"id": "T-1"}, 201)))
    ctx = run("regression", events)
    action = decide(ctx, post(TICKETS, {"subject": "late"}))
    assert isinstance(action, Serve) and action.response.json() == {"id": "T-1"}
    assert emitted(ctx)[0].type == "effect"


def test_a_served_exchange_holds_the_recorded_records_built_only_when_they_differ() -> None:
    events = recorded((get(f"{ORDERS}/orders/A1"), json_response({"status": "shipped"})))
    ctx = run("regression", events)
    decide(ctx, get(f"{ORDERS}/orders/A1"))
    [event] = emitted(ctx)
    assert event.tool is events[0].tool and event.output_ref is events[0].output_ref
    # The recorded record is served only when equal field for field, each container the same object;
    # else a record of the fields is built.
    ref, tool = events[0].output_ref, events[0].tool
    assert ref is not None and tool is not None
    cases: list[tuple[Any, dict[str, Any], Any]] = [
        (ref, dict(ref.__dict__), PayloadRef),
        (ref, {**ref.__dict__, "inline": dict(ref.inline)}, PayloadRef),  # equal, not the same object
        (ref, {**ref.__dict__, "size": 1}, PayloadRef),
        (ref, {k: v for k, v in ref.__dict__.items() if k != "size"}, PayloadRef),  # a field fewer
        (tool, dict(tool.__dict__), ToolInfo),
        (tool, {**tool.__dict__, "idempotency_key": "1"}, ToolInfo),
        (
            ToolInfo(name="svc", idempotency_key="1"),
            {"name": "svc", "schema_version": None, "idempotency_key": 1},
            ToolInfo,
        ),
        (tool, dict(tool.__dict__), PayloadRef),  # another kind of record
        (None, dict(tool.__dict__), ToolInfo),
    ]
    for twin, fields, kind in cases:
        out = served(kind, dict(fields), twin)
        assert out is twin or (type(out) is kind and out.__dict__ == fields)
    assert [served(k, dict(f), t) is t for t, f, k in cases] == [True, False, False, False, True] + [
        False
    ] * 4


def test_unmatched_call_is_refused_and_fails_the_test_even_if_swallowed() -> None:
    ctx = run("regression", recorded((get(f"{ORDERS}/orders/A1"), json_response({}))))
    action = decide(ctx, get(f"{ORDERS}/orders/B2"))
    assert isinstance(action, Refuse) and action.fault is None
    assert isinstance(action.error, UnmatchedRequestError)
    assert "GET https://orders.example/orders/B2" in str(action.error)
    assert list(ctx.failures) == [action.error]
    assert action.exception(lambda fault: AssertionError("no fault here")) is action.error
    assert emitted(ctx) == []


@pytest.mark.parametrize("mode", ["regression", "model-comparison", "sandbox"])
def test_allowed_host_goes_live_as_addressed_in_every_replay_mode(mode: str) -> None:
    ctx = run(mode, allow_hosts=["localhost"])
    action = decide(ctx, get("http://localhost:8080/health"))
    assert isinstance(action, Send)
    assert (action.permit, action.url, action.fault) == ("localhost", None, None)


def test_audit_sends_nothing_even_to_an_allowed_host() -> None:
    ctx = run("audit", allow_hosts=["localhost"])
    assert isinstance(decide(ctx, get("http://localhost:8080/health")), Refuse)


# -- model-comparison -------------------------------------------------------------------------------


def test_model_comparison_sends_model_calls_and_still_serves_tool_reads() -> None:
    events = recorded((get(f"{ORDERS}/orders/A1"), json_response({"status": "shipped"})))
    ctx = run("model-comparison", events)
    model = decide(ctx, chat())
    assert isinstance(model, Send)
    assert (model.permit, model.body, model.url) == ("api.openai.com", None, None)
    assert isinstance(decide(ctx, get(f"{ORDERS}/orders/A1")), Serve)


def test_model_override_rewrites_the_body_and_the_recorded_request_carries_it() -> None:
    ctx = run("model-comparison", model_override="gpt-4.1")
    request = chat()
    action = decide(ctx, request)
    assert isinstance(action, Send) and action.body is not None
    assert json.loads(action.body)["model"] == "gpt-4.1"
    assert action.request.body == action.body and action.request.url == request.url
    assert action.request.headers["content-length"] == str(len(action.body))
    assert action.capture.request is action.request
    assert json.loads(request.body)["model"] == "gpt-4o-mini"  # the agent's request is left alone


def test_model_override_equal_to_the_requested_model_changes_nothing() -> None:
    ctx = run("model-comparison", model_override="gpt-4o-mini")
    action = decide(ctx, chat())
    assert isinstance(action, Send) and action.body is None


# -- sandbox ---------------------------------------------------------------------------------------


def test_sandbox_maps_tool_calls_to_the_sandbox_service_and_serves_model_calls() -> None:
    ctx = run("sandbox", recorded((chat(), answer("ok"))), sandbox={ORDERS: "http://127.0.0.1:8081"})
    action = decide(ctx, get(f"{ORDERS}/orders/A1?x=1"))
    assert isinstance(action, Send)
    assert action.url == "http://127.0.0.1:8081/orders/A1?x=1"
    assert action.permit == "127.0.0.1"
    assert action.request.url == f"{ORDERS}/orders/A1?x=1"  # the event keeps the agent's URL
    assert isinstance(decide(ctx, chat()), Serve)


def test_sandbox_host_is_reached_as_addressed() -> None:
    ctx = run("sandbox", sandbox_hosts=["orders.example"])
    action = decide(ctx, get(f"{ORDERS}/orders/A1"))
    assert isinstance(action, Send) and (action.url, action.permit) == (None, "orders.example")


def test_sandbox_refuses_a_tool_call_without_a_sandbox_service() -> None:
    ctx = run("sandbox", sandbox={ORDERS: "http://127.0.0.1:8081"})
    action = decide(ctx, post(TICKETS, {"subject": "late"}))
    assert isinstance(action, Refuse) and isinstance(action.error, SandboxError)
    assert "tickets.example" in str(action.error)
    assert list(ctx.failures) == [action.error]


def test_invalid_faults_refuse_with_the_usage_error() -> None:
    ctx = run("sandbox", sandbox_hosts=["tickets.example"], faults=[{"route": "nope"}])
    action = decide(ctx, post(TICKETS, {}))
    assert isinstance(action, Refuse) and isinstance(action.error, ConfigError)
    assert list(ctx.failures) == [action.error]


def test_status_fault_is_served_without_sending_and_recorded_with_the_fault() -> None:
    faults = [{"route": f"POST {TICKETS}", "nth": 1, "status": 503, "retry_after": 2}]
    ctx = run("sandbox", sandbox_hosts=["tickets.example"], faults=faults)
    first = decide(ctx, post(TICKETS, {"subject": "late"}, **{"idempotency-key": "k1"}))
    assert isinstance(first, Serve)
    assert first.response.status == 503 and first.response.headers["retry-after"] == "2"
    [event] = emitted(ctx)
    assert event.data["status"] == 503 and event.data["fault"]["kind"] == "status"
    second = decide(ctx, post(TICKETS, {"subject": "late"}, **{"idempotency-key": "k1"}))
    assert isinstance(second, Send) and second.fault is None  # only the first call fails


def test_timeout_before_sending_is_refused_with_the_fault_for_the_client_to_raise() -> None:
    faults = [{"route": f"POST {TICKETS}", "timeout": True, "delivered": False}]
    ctx = run("sandbox", sandbox_hosts=["tickets.example"], faults=faults)
    action = decide(ctx, post(TICKETS, {}))
    assert isinstance(action, Refuse) and action.error is None
    assert action.fault is not None and action.fault.kind == "timeout" and not action.fault.delivered
    assert "injected timeout before sending on call 1" in action.fault.message()
    raised = action.exception(lambda fault: TimeoutError(fault.message()))  # the client's own type
    assert isinstance(raised, TimeoutError) and "agentreplay sandbox" in str(raised)
    [event] = emitted(ctx)
    assert event.data["status"] == 0 and event.data["fault"]["delivered"] is False
    assert list(ctx.failures) == []  # a fault is the test's own doing, not a failure


def test_delivered_reset_is_sent_and_the_lost_answer_recorded() -> None:
    faults = [{"route": "POST https://tickets.example/*", "reset": True}]
    ctx = run("sandbox", sandbox={"https://tickets.example": "http://127.0.0.1:9000"}, faults=faults)
    action = decide(ctx, post(TICKETS, {"subject": "late"}))
    assert isinstance(action, Send) and action.url == "http://127.0.0.1:9000/tickets"
    assert action.fault is not None and action.fault.kind == "reset" and action.fault.delivered
    assert emitted(ctx) == []
    action.lost(201, [("Content-Type", "application/json")], b'{"id": "T-9"}')
    [event] = emitted(ctx)
    assert event.type == "effect" and event.data["status"] == 201
    route = "POST https://tickets.example/*"
    assert event.data["fault"] == {"kind": "reset", "route": route, "nth": 1, "delivered": True}
    assert event.data["url"] == TICKETS


def test_fault_routes_match_the_agents_url_or_the_mapped_one() -> None:
    faults = [{"route": "GET http://127.0.0.1:8081/orders/*", "status": 500}]
    ctx = run("sandbox", sandbox={ORDERS: "http://127.0.0.1:8081"}, faults=faults)
    action = decide(ctx, get(f"{ORDERS}/orders/A1"))
    assert isinstance(action, Serve) and action.response.status == 500


def test_a_runs_classify_hook_is_asked_for_every_call_not_cached_by_path() -> None:
    seen: list[Any] = []

    def hook(request: dict[str, Any], response: Any) -> None:
        seen.append(request["headers"].get("x-call"))

    ctx = run("record", classify_hook=hook)
    for n in ("1", "2"):
        decide(ctx, HttpRequest("GET", f"{ORDERS}/orders/A1", {"x-call": n}))
    assert seen == ["1", "2"]


# -- shape ---------------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
            names.update(f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_replay_never_imports_an_interceptor() -> None:
    """The import direction is one way: interceptors call the policy, never the reverse."""
    for path in sorted((PACKAGE / "replay").glob("*.py")):
        bad = sorted(n for n in _imports(path) if "intercept" in n or "dispatch" in n)
        assert not bad, f"{path.name} imports {bad}"


def test_interceptors_reach_replay_only_through_the_policy_and_fault_values() -> None:
    """An adapter reaches replay through the policy (HTTP calls), the fault values, or its transport's own
    library-neutral replay side (``replay/<transport>_sessions.py``); never the matching or serving
    internals. The installer, the registry and shared helpers import no replay at all."""
    adapters = 0
    for path in sorted((PACKAGE / "intercept").glob("*.py")):
        replay = sorted(n for n in _imports(path) if n.startswith("..replay"))
        if not replay:
            continue
        adapters += 1
        allowed = ("..replay.policy", "..replay.faults")
        assert all(n.startswith(allowed) or n.split(".")[3].endswith("_sessions") for n in replay), (
            path.name,
            replay,
        )
    assert adapters >= 5  # httpx, urllib3, aiohttp, websockets, mcp at least: the check sees them
