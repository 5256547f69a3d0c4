"""Regression mode end to end: an agent on the official OpenAI SDK (httpx2) with an httpx read, a
requests write with retries, ``@tool`` functions, a policy and an approval, recorded against local
servers in an inner pytest session, then replayed with known drifts. Each drift must be reported
exactly, and no replay may reach a live service (the servers keep running and their logs must not grow).

``KIT`` (the agent and its tools service) is shared with the other ``test_modes_*`` modules.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("respx")

from servers import LLMServer, ModelReply


def _preload() -> None:
    """Import the whole package and the clients in this (outer) process, before any inner session.

    pytester's in-process runs restore ``sys.modules`` afterwards: a module first imported inside an
    inner session is dropped and imported again by the next one, while modules the outer process
    already held stay. Half-old, half-new copies of the package (two ``capture`` modules, two context
    variables) would then disagree about the active run. With everything imported up front, every inner
    session shares one copy.
    """
    import pkgutil

    import pytest_agentreplay

    for name in ("openai", "anthropic", "httpx", "httpx2", "requests", "aiohttp", "respx"):
        importlib.import_module(name)
    for info in pkgutil.walk_packages(pytest_agentreplay.__path__, "pytest_agentreplay."):
        # Optional extras (e.g. the browser viewer's dependencies) may be missing.
        with contextlib.suppress(ImportError):
            importlib.import_module(info.name)


_preload()

KIT = r'''
"""The agent under test and its tools service (written into the inner session's directory)."""
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import requests

from pytest_agentreplay import record_approval, record_policy, tool


class ToolsServer:
    """GET /orders/<id>; POST /tickets (Idempotency-Key deduplicates); POST /notify. Logs everything.

    ``flaky``: the first POST /tickets answers 503 (so a recording holds a retry).
    ``slow``: seconds every answer waits (never needed by the agent, only by fault tests).
    """

    def __init__(self, flaky=False):
        self.log = []
        self.commits = []
        self.flaky = flaky
        self._failed = False
        self._keys = {}
        self._n = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, value):
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                owner.log.append(("GET", self.path, None, None))
                if self.path.startswith("/orders/"):
                    oid = self.path.rsplit("/", 1)[1]
                    return self._send(200, {"id": oid, "status": "shipped", "carrier": "DHL"})
                self._send(404, {"error": "not found"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                key = self.headers.get("idempotency-key")
                owner.log.append(("POST", self.path, key, body))
                with owner._lock:
                    if self.path == "/tickets":
                        if owner.flaky and not owner._failed:
                            owner._failed = True
                            return self._send(503, {"error": "busy"})
                        if key and key in owner._keys:
                            return self._send(201, owner._keys[key])
                        owner._n += 1
                        ticket = {"id": f"T-{owner._n}", **json.loads(body)}
                        owner.commits.append(ticket)
                        if key:
                            owner._keys[key] = ticket
                        return self._send(201, ticket)
                    if self.path == "/notify":
                        owner._n += 1
                        return self._send(200, {"id": f"N-{owner._n}"})
                self._send(404, {"error": "not found"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_order", "description": "Status of an order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                       "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "get_policy", "description": "The support policy on a topic",
        "parameters": {"type": "object", "properties": {"topic": {"type": "string"}},
                       "required": ["topic"]}}},
    {"type": "function", "function": {
        "name": "create_ticket", "description": "Open a support ticket",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"},
                       "order_id": {"type": "string"}}, "required": ["title", "order_id"]}}},
]

CALLED = []  # what the @tool bodies did (they run only when recording or in sandbox)


@tool(name="get_policy", schema_version="1")
def get_policy(topic):
    CALLED.append(("get_policy", topic))
    return {"topic": topic, "refund_days": 30}


@tool(name="get_policy_v2", schema_version="2")
def get_policy_v2(topic):
    CALLED.append(("get_policy_v2", topic))
    return {"topic": topic, "refund_days": 14}


@tool(name="notify_customer", effect="write", idempotency_key="key")
def notify_customer(order_id, message, key):
    CALLED.append(("notify_customer", order_id))
    r = requests.post(os.environ["TOOLS_URL"] + "/notify", json={"order_id": order_id, "message": message},
                      headers={"Idempotency-Key": key}, timeout=5)
    return r.json()


@tool(name="escalate", effect="write", idempotency_key="key")
def escalate(order_id, reason, key="esc-1"):
    CALLED.append(("escalate", order_id))
    return {"id": "E-1"}


def ticket_key(order_id, title):
    return "tk-" + hashlib.sha256(f"{order_id}|{title}".encode()).hexdigest()[:12]


def create_ticket(title, order_id, attempts=3):
    """A plain HTTP write (requests/urllib3) with retry logic; the variant decides how keys are handled."""
    v = variant()
    url = os.environ["TOOLS_URL"] + ("/tickets")
    key = ticket_key(order_id, title)
    last = None
    for attempt in range(attempts):
        headers = {}
        if "no_key" in v or ("retry_no_key" in v and attempt > 0):
            pass
        elif "retry_new_key" in v and attempt > 0:
            headers["Idempotency-Key"] = f"{key}-{attempt}"
        else:
            headers["Idempotency-Key"] = key
        try:
            r = requests.post(url, json={"title": title, "order_id": order_id}, headers=headers, timeout=5)
        except (requests.Timeout, requests.ConnectionError) as exc:
            last = repr(exc)
            continue
        if r.status_code in (429, 500, 502, 503, 504):
            last = f"status {r.status_code}"
            time.sleep(min(float(r.headers.get("retry-after") or 0), 0.01))
            continue
        return r.json()
    raise RuntimeError(f"ticket not created: {last}")


def lookup_order(order_id):
    base = os.environ["TOOLS_URL"] + ("/v2/orders/" if "changed_url" in variant() else "/orders/")
    with httpx.Client(timeout=5) as client:
        return client.get(base + order_id).json()


def dispatch(name, args):
    v = variant()
    if name == "lookup_order":
        return lookup_order(args["order_id"])
    if name == "get_policy":
        topic = args["topic"].upper() if "changed_argument" in v else args["topic"]
        return (get_policy_v2 if "another_tool" in v else get_policy)(topic)
    if name == "create_ticket":
        record_policy("ticket-policy", "allow", version="2")
        if "skipped_approval" not in v:
            record_approval("requested", subject=f"ticket {args['order_id']}")
            record_approval("granted", by="lead", subject=f"ticket {args['order_id']}")
        if "dropped_write" in v:
            return {"skipped": True}
        ticket = create_ticket(args["title"], args["order_id"])
        if "extra_write" in v:
            create_ticket("Follow-up " + args["title"], args["order_id"])
        notify_customer(args["order_id"], "We opened " + ticket["id"], key="nt-" + args["order_id"])
        return ticket
    if name == "escalate":
        return escalate(args["order_id"], args.get("reason", ""), key="esc-" + args["order_id"])
    return {"error": f"unknown tool {name}"}


def run_agent(question):
    v = variant()
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
    system = "You are a helpful and friendly support agent." if "reworded_prompt" in v else (
        "You are a support agent. Be brief.")
    if "changed_message" in v:
        question = question + " Please hurry."
    tools = json.loads(json.dumps(TOOLS))
    if "changed_schema" in v:
        tools[2]["function"]["description"] = "Open a ticket in the support queue"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    for _ in range(6):
        r = client.chat.completions.create(
            model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"), messages=messages, tools=tools,
            temperature=0.7 if "changed_decoding" in v else 0.0,
        )
        msg = r.choices[0].message
        if not msg.tool_calls:
            return msg.content
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                         "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for call in msg.tool_calls:
            result = dispatch(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    raise RuntimeError("agent did not finish")
'''

INNER_TEST = """
import agentkit

def test_support(agent_replay):
    agentkit.CALLED.clear()
    answer = agentkit.run_agent("Where is my order A1? It is late.")
    assert "A1" in answer
"""


def script(server: LLMServer, *, second: str = "create_ticket") -> None:
    """The model's decisions: look up the order and the policy, open a ticket (or escalate), answer."""
    second_call = (
        ("create_ticket", {"title": "Late parcel A1", "order_id": "A1"})
        if second == "create_ticket"
        else ("escalate", {"order_id": "A1", "reason": "late parcel"})
    )
    server.queue(
        "chat",
        ModelReply(
            text=None,
            tool_calls=[("lookup_order", {"order_id": "A1"}), ("get_policy", {"topic": "late delivery"})],
            input_tokens=40,
            output_tokens=12,
        ),
        ModelReply(text=None, tool_calls=[second_call], input_tokens=80, output_tokens=9),
        ModelReply(
            text="Order A1 has shipped with DHL; I opened a ticket for you.",
            input_tokens=120,
            output_tokens=15,
        ),
    )


@dataclass
class Lab:
    """An inner pytest project with the agent kit, and the live services it records against."""

    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    llm: LLMServer
    tools: Any  # agentkit.ToolsServer
    kit: Any

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_support.json"

    def run(self, *args: str, variant: str = "") -> pytest.RunResult:
        self.monkeypatch.setenv("AGENT_VARIANT", variant)
        return self.pytester.runpytest("-p", "no:cacheprovider", "-rA", *args)

    def record(self, *args: str) -> pytest.RunResult:
        script(self.llm)
        result = self.run("--agentreplay-record=all", *args)
        result.assert_outcomes(passed=1)
        assert self.cassette.exists()
        return result

    def seen(self) -> tuple[int, int]:
        return len(self.llm.log), len(self.tools.log)


def make_lab(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *, flaky: bool = False, test: str = INNER_TEST
) -> Iterator[Lab]:
    pytester.makepyfile(agentkit=KIT)
    pytester.makepyfile(test_agent=test)
    pytester.syspathinsert()
    agentkit = importlib.import_module("agentkit")  # written just above

    llm = LLMServer().start()
    tools = agentkit.ToolsServer(flaky=flaky)
    monkeypatch.setenv("LLM_URL", llm.url)
    monkeypatch.setenv("TOOLS_URL", tools.url)
    try:
        yield Lab(pytester, monkeypatch, llm, tools, agentkit)
    finally:
        llm.stop()
        tools.stop()
        import sys

        sys.modules.pop("agentkit", None)


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    # The recorded run holds a retry: the first ticket POST answers 503, the agent retries with its key.
    yield from make_lab(pytester, monkeypatch, flaky=True)


@pytest.fixture
def recorded(lab: Lab) -> Lab:
    lab.record()
    return lab


def events_of(path: Path) -> list[dict[str, Any]]:
    """The events as replay reads them (the file leaves out what repeats, see stored_form)."""
    from pytest_agentreplay.cassette.read import load_cassette

    return load_cassette(path).event_dicts()


# -- the recording ----------------------------------------------------------------------------------


def test_recording_holds_model_calls_reads_writes_retry_and_tools(recorded: Lab) -> None:
    events = events_of(recorded.cassette)
    types = [e["type"] for e in events]
    assert types.count("model.call") == 3
    assert types.count("http") == 1  # the order lookup
    effects = [e for e in events if e["type"] == "effect"]
    # 503 then the retry with the same key, then the notify @tool (which itself POSTs /notify).
    http_effects = [e for e in effects if "method" in e["data"]]
    assert [e["data"]["status"] for e in http_effects if e["data"]["url"].endswith("/tickets")] == [503, 201]
    keys = {e["tool"]["idempotency_key"] for e in http_effects if e["data"]["url"].endswith("/tickets")}
    assert len(keys) == 1 and next(iter(keys)).startswith("tk-")
    assert [e["tool"]["name"] for e in effects if "method" not in e["data"]] == ["notify_customer"]
    assert "approval" in types and "policy.decision" in types
    assert len(recorded.tools.commits) == 1


# -- replay without drift ---------------------------------------------------------------------------


def test_replay_without_drift_passes_and_sends_nothing(recorded: Lab) -> None:
    before = recorded.seen()
    result = recorded.run()
    result.assert_outcomes(passed=1)
    assert recorded.seen() == before, "regression replay reached a live service"
    # @tool functions did not run: a write tool never executes in regression.
    assert recorded.kit.CALLED == []


# -- drifts -----------------------------------------------------------------------------------------

# variant -> what the failure must say (regular expressions, all must match the output)
DRIFTS: dict[str, list[str]] = {
    "reworded_prompt": [
        r"model\.call.*\n?.*input_ref\.body\.json\.messages\[0\]\.content",
        r"You are a helpful and friendly support agent",
    ],
    "changed_message": [r"input_ref\.body\.json\.messages\[1\]\.content", r"Please hurry"],
    "changed_schema": [r"input_ref\.body\.json\.tools\[2\]\.function\.description|data\.tools_hash"],
    "changed_decoding": [r"data\.decoding\.temperature|input_ref\.body\.json\.temperature"],
    "another_tool": [
        r"tool call get_policy_v2\(topic='late delivery'\) has no recorded result",
        r"recorded tools: .*get_policy",
    ],
    "changed_argument": [
        r"tool call get_policy\(topic='LATE DELIVERY'\) has no recorded result",
        r"recorded: get_policy\(topic='late delivery'\)",
    ],
    "changed_url": [
        r"no recorded HTTP exchange matches GET http://127\.0\.0\.1:\d+/v2/orders/A1",
        r"similar: GET http://127\.0\.0\.1:\d+/orders/A1",
    ],
    "extra_write": [
        r"no recorded HTTP exchange matches POST http://127\.0\.0\.1:\d+/tickets",
        r"Follow-up Late parcel A1",
    ],
    "dropped_write": [
        r"effect http\.post -> http://127\.0\.0\.1:\d+/tickets .*\n\s+missing: recorded, not replayed",
        r"effect notify_customer .*\n\s+missing: recorded, not replayed",
    ],
    "skipped_approval": [r"approval ticket A1\n\s+missing: recorded, not replayed"],
    "retry_no_key": [r"idempotency[_-]key"],
}


@pytest.mark.parametrize("variant", list(DRIFTS))
def test_drift_is_reported_and_nothing_is_sent(recorded: Lab, variant: str) -> None:
    before = recorded.seen()
    result = recorded.run(variant=variant)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for pattern in DRIFTS[variant]:
        assert re.search(pattern, out, re.IGNORECASE), f"{variant}: /{pattern}/ not in output:\n{out}"
    assert recorded.seen() == before, f"{variant}: the replay reached a live service"
    assert not [c for c in recorded.kit.CALLED if c[0] in ("notify_customer", "escalate")]


def test_model_call_drift_names_the_changed_request_field(recorded: Lab) -> None:
    """The replayed model.call carries the live request, so the diff shows the exact changed field."""
    result = recorded.run("--agentreplay-report=drift.json", variant="reworded_prompt")
    result.assert_outcomes(failed=1)
    report = json.loads((recorded.pytester.path / "drift.json").read_text())
    (test,) = report["tests"]
    regressions = [d for d in test["drift"]["differences"] if d["verdict"] == "regression"]
    paths = {(d["event_type"], d["path"]) for d in regressions}
    assert ("model.call", "input_ref.body.json.messages[0].content") in paths
    change = next(d for d in regressions if d["path"] == "input_ref.body.json.messages[0].content")
    assert change["recorded"] == "You are a support agent. Be brief."
    assert change["replayed"] == "You are a helpful and friendly support agent."


def test_retry_without_its_idempotency_key_is_a_regression(recorded: Lab) -> None:
    result = recorded.run("--agentreplay-report=drift.json", variant="retry_no_key")
    result.assert_outcomes(failed=1)
    report = json.loads((recorded.pytester.path / "drift.json").read_text())
    (test,) = report["tests"]
    regressions = [d for d in test["drift"]["differences"] if d["verdict"] == "regression"]
    key_changes = [
        d for d in regressions if d["event_type"] == "effect" and "idempotency" in d["path"].lower()
    ]
    assert key_changes, regressions
    assert any(
        (str(d.get("recorded", "")).startswith("tk-") and d.get("replayed") is None)
        or d.get("replayed_absent")
        for d in key_changes
    )


def test_dropped_write_and_skipped_approval_name_the_missing_events(recorded: Lab) -> None:
    result = recorded.run("--agentreplay-report=drift.json", variant="dropped_write,skipped_approval")
    result.assert_outcomes(failed=1)
    report = json.loads((recorded.pytester.path / "drift.json").read_text())
    (test,) = report["tests"]
    missing = {
        (d["event_type"], d["kind"]) for d in test["drift"]["differences"] if d["verdict"] == "regression"
    }
    assert ("effect", "missing") in missing
    assert ("approval", "missing") in missing


def test_missing_model_call_is_a_regression(recorded: Lab) -> None:
    """An agent that stops early leaves a recorded model call unplayed: reported as missing."""
    recorded.pytester.makepyfile(
        test_agent="""
import agentkit, openai, os

def test_support(agent_replay):
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
"""
    )
    before = recorded.seen()
    result = recorded.run("--agentreplay-report=drift.json")
    result.assert_outcomes(failed=1)
    report = json.loads((recorded.pytester.path / "drift.json").read_text())
    (test,) = report["tests"]
    kinds = [
        (d["event_type"], d["kind"]) for d in test["drift"]["differences"] if d["verdict"] == "regression"
    ]
    assert kinds.count(("model.call", "missing")) == 2
    assert recorded.seen() == before


def test_extra_model_call_is_reported(recorded: Lab) -> None:
    recorded.pytester.makepyfile(
        test_agent=INNER_TEST
        + """
    import openai, os
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}])
"""
    )
    before = recorded.seen()
    result = recorded.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*no recorded HTTP exchange matches POST*/v1/chat/completions*",
            "*the cassette holds 3 call(s) to openai:chat.completions; all were already served*",
        ]
    )
    assert recorded.seen() == before


# -- mode selection ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (
            "option",
            "argument --agentreplay-mode: invalid choice: 'replay' (choose from 'audit', 'regression', "
            "'model-comparison', 'sandbox')",
        ),
        ("ini", "invalid agentreplay_mode 'replay' in [pytest] of"),
        ("pyproject", "invalid mode 'replay' in [tool.agentreplay] of"),
        ("marker", "invalid mode 'replay' in @pytest.mark.agentreplay on"),
        ("fixture", "invalid mode 'replay' in the agentreplay_config fixture"),
    ],
)
def test_invalid_mode_is_a_usage_error_listing_the_valid_ones(
    pytester: pytest.Pytester, where: str, expected: str
) -> None:
    args: list[str] = []
    test = "def test_it(agent_replay):\n    pass\n"
    if where == "option":
        args = ["--agentreplay-mode=replay"]
    elif where == "ini":
        pytester.makeini("[pytest]\nagentreplay_mode = replay\n")
    elif where == "pyproject":
        pytester.makepyprojecttoml('[tool.agentreplay]\nmode = "replay"\n')
    elif where == "marker":
        test = "import pytest\n\n@pytest.mark.agentreplay(mode='replay')\n" + test
    else:
        test = (
            "import pytest\n\n@pytest.fixture\ndef agentreplay_config():\n    return {'mode': 'replay'}\n\n"
            + test
        )
    pytester.makepyfile(test_mode=test)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    out = result.stdout.str() + result.stderr.str()
    assert expected in out, out
    if where != "option":  # argparse lists the choices in its own words (checked above)
        assert "valid values: audit, regression, model-comparison, sandbox" in out, out
    if where in ("marker", "fixture"):
        # Per-test sources are resolved when the test sets up: the test errors with the usage message.
        result.assert_outcomes(errors=1)
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize("where", ["option", "ini", "marker", "fixture"])
def test_a_marker_or_option_pins_the_mode(pytester: pytest.Pytester, where: str) -> None:
    args: list[str] = []
    head = "import pytest\n"
    deco = ""
    if where == "option":
        args = ["--agentreplay-mode=sandbox"]
    elif where == "ini":
        pytester.makeini("[pytest]\nagentreplay_mode = sandbox\n")
    elif where == "marker":
        deco = "@pytest.mark.agentreplay(mode='sandbox')\n"
    else:
        head += "\n@pytest.fixture\ndef agentreplay_config():\n    return {'mode': 'sandbox'}\n"
    pytester.makepyfile(
        test_mode=head + "\n" + deco + "def test_it(agent_replay):\n"
        "    assert agent_replay.mode == ('record' if agent_replay.recording else 'sandbox')\n"
    )
    pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-record=all").assert_outcomes(passed=1)
    pytester.runpytest("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)
