"""The public provider interface, in real inner sessions against a model API of its own wire format
(tests/tiny_model_server.py) on 127.0.0.1:

- a provider class in the project's conftest.py (``pytest_agentreplay_providers``) reads its calls as
  ``model.call`` events (provider, model, messages, decision, usage, a stream folded), replays them with the
  server stopped, and a changed prompt fails naming the model call and the provider's declared input field;
- a provider installed by a distribution (entry point group ``pytest_agentreplay.providers``), and one that
  does not load: a usage error naming the distribution;
- an exchange classified ``"model"`` that no provider reads: the call is refused with ``NoProviderError``
  (httpx, requests with urllib3 retries, botocore which wraps and retries), and the test fails even though
  the client swallowed it;
- a call a library makes for itself from a thread of its own (LiteLLM's model-cost map): the refusal names
  the thread, the library and its fix; ``tolerated_hosts`` refuses it without failing the test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiny_model_server import TinyModelServer

PROVIDER = '''
from pytest_agentreplay import InputFields


class TinyProvider:
    """The tiny API: POST /api/complete, JSON or server-sent events."""

    NAME = "{name}"
    INPUT_FIELDS = InputFields(conversation=("turns",), system=("preamble_text",), tools=("functions",))

    def match(self, request, settings):
        if request.method == "POST" and request.path == "/api/complete":
            return "complete"
        return None

    def request_fields(self, endpoint, body):
        body = body if isinstance(body, dict) else {{}}
        return {{
            "model": body.get("model_name"),
            "decoding": {{"heat": body["heat"]}} if "heat" in body else {{}},
            "tools_hash": str(len(body["functions"])) if body.get("functions") else None,
            "streamed": bool(body.get("stream")),
        }}

    def response_fields(self, endpoint, body):
        if body and "sse" in body:
            chunks = [e["data"] for e in body["sse"] if isinstance(e.get("data"), dict)]
            text = "".join(c.get("delta", "") for c in chunks).strip()
            last = chunks[-1] if chunks else {{}}
            output = {{"say": text, "invoke": []}}
        else:
            last = (body or {{}}).get("json") or {{}}
            output = last.get("output") or {{}}
        tokens = last.get("tokens") or {{}}
        return {{
            "decision": {{
                "text": output.get("say"),
                "tool_calls": [
                    {{"id": None, "name": c["fn"], "arguments": c["args"]}}
                    for c in output.get("invoke") or []
                ],
                "stop_reason": last.get("finish"),
            }},
            "usage": {{"input_tokens": tokens.get("in"), "output_tokens": tokens.get("out")}},
            "response_id": None,
            "response_model": None,
        }}
'''

AGENT = """
import json, os

import httpx


def ask(text, stream=False, functions=None):
    body = {
        "model_name": "tiny-1",
        "preamble_text": "Be brief.",
        "turns": [{"role": "system", "text": "You echo."}, {"role": "user", "text": text}],
        "heat": 0.1,
        "stream": stream,
    }
    if functions:
        body["functions"] = functions
    reply = httpx.post(os.environ["TINY_URL"] + "/api/complete", json=body)
    if stream:
        return reply.text
    return reply.json()["output"]["say"]
"""

TESTS = """
import os

import tiny_agent


def test_tiny(agent_replay):
    first = tiny_agent.ask(os.environ.get("PROMPT", "hello there"), functions=[{"name": "lookup"}])
    streamed = tiny_agent.ask("stream this", stream=True)
    assert first == "echo: hello there"
    assert "echo:" in streamed
"""


class Project:
    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch

    def run(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def events(self, name: str) -> list[dict[str, Any]]:
        (path,) = (self.pytester.path / "cassettes").rglob(f"{name}.json")
        return list(json.loads(path.read_text())["events"])

    def model_calls(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events(name) if e["type"] == "model.call"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    pytester.makepyfile(tiny_agent=AGENT)
    pytester.syspathinsert()
    yield Project(pytester, monkeypatch)
    for name in ("tiny_agent", "tiny_provider_ep", "tiny_broken_ep"):
        sys.modules.pop(name, None)


def _record(project: Project) -> TinyModelServer:
    with TinyModelServer() as server:
        project.monkeypatch.setenv("TINY_URL", server.url)
        project.run("--agentreplay-record=all").assert_outcomes(passed=1)
    return server


# -- a provider in the project's conftest.py ----------------------------------------------------------


def test_conftest_provider_records_replays_and_names_its_input_fields(project: Project) -> None:
    project.pytester.makeconftest(
        PROVIDER.format(name="tiny")
        + "\n\ndef pytest_agentreplay_providers(config):\n    return [TinyProvider]\n"
    )
    project.pytester.makepyfile(test_tiny=TESTS)
    server = _record(project)
    seen = len(server.log)
    plain, streamed = project.model_calls("test_tiny")
    assert plain["data"]["provider"] == "tiny" and plain["data"]["endpoint"] == "complete"
    assert plain["data"]["model"] == "tiny-1" and plain["data"]["decoding"] == {"heat": 0.1}
    assert plain["data"]["decision"] == {
        "text": "echo: hello there",
        "tool_calls": [{"id": None, "name": "lookup", "arguments": {"q": "echo: hello there"}}],
        "stop_reason": "done",
    }
    assert plain["data"]["usage"] == {"input_tokens": 4, "output_tokens": 3}
    assert plain["input_ref"]["inline"]["body"]["json"]["turns"][1] == {"role": "user", "text": "hello there"}
    assert streamed["data"]["streamed"] is True
    assert streamed["data"]["decision"]["text"] == "echo: stream this"
    assert not [e for e in project.events("test_tiny") if e["type"] in ("http", "effect")]

    # Replayed with the server stopped: served from the cassette, nothing sent.
    project.run().assert_outcomes(passed=1)
    assert len(server.log) == seen

    # One word of the prompt changed: a drift of the model call, named as the provider declared it.
    project.monkeypatch.setenv("PROMPT", "hello here")
    result = project.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "model.call tiny-1 (tiny complete)" in out
    assert "user message (turns[1]) changed" in out
    assert len(server.log) == seen


def test_conftest_provider_that_is_not_one_is_a_usage_error(project: Project) -> None:
    project.pytester.makeconftest(
        "class Half:\n    NAME = 'half'\n\n    def match(self, request, settings):\n        return None\n\n"
        "def pytest_agentreplay_providers(config):\n    return [Half()]\n"
    )
    project.pytester.makepyfile(test_tiny=TESTS)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "pytest_agentreplay_providers gave" in err and "not a pytest-agentreplay provider" in err
    assert "request_fields is missing or not callable" in err


# -- a provider a distribution installs ---------------------------------------------------------------


def _install(project: Project, dist: str, module: str, source: str, target: str) -> None:
    site = project.pytester.path / "site"
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pytest_agentreplay.providers]\ntiny = {module}:{target}\n")
    (site / f"{module}.py").write_text(source)
    project.monkeypatch.syspath_prepend(site)


def test_entry_point_provider(project: Project) -> None:
    _install(project, "tiny-provider-ep", "tiny_provider_ep", PROVIDER.format(name="tiny-ep"), "TinyProvider")
    project.pytester.makepyfile(test_tiny=TESTS)
    server = _record(project)
    seen = len(server.log)
    plain, streamed = project.model_calls("test_tiny")
    assert plain["data"]["provider"] == streamed["data"]["provider"] == "tiny-ep"
    assert plain["data"]["model"] == "tiny-1"
    project.run().assert_outcomes(passed=1)
    assert len(server.log) == seen


def test_entry_point_that_does_not_load_names_its_distribution(project: Project) -> None:
    _install(project, "tiny-provider-broken", "tiny_broken_ep", "raise ImportError('no tiny SDK')\n", "X")
    project.pytester.makepyfile(test_tiny=TESTS)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "distribution tiny-provider-broken 0.1" in err and "could not be loaded" in err
    assert "ImportError: no tiny SDK" in err


# -- classified "model", and no provider reads it -----------------------------------------------------

CLASSIFY_AS_MODEL = """
import os


def pytest_agentreplay_classify_exchange(request, response):
    if request["url"].startswith(os.environ["TINY_URL"]) and "/api/complete" not in request["url"]:
        return "model"
    return None
"""

SWALLOWING_CLIENTS = """
import json, os

import pytest

SEEN = os.environ["SEEN"]


def note(exc):
    with open(SEEN, "a") as fh:
        fh.write(json.dumps([type(exc).__module__, type(exc).__name__]) + "\\n")


def test_httpx(agent_replay):
    import httpx

    try:
        httpx.post(os.environ["TINY_URL"] + "/v2/converse", json={"q": 1})
    except Exception as exc:  # the agent swallows it: the test must fail all the same
        note(exc)


def test_requests_retrying(agent_replay):
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=Retry(total=3, backoff_factor=0)))
    try:
        session.post(os.environ["TINY_URL"] + "/v2/converse", json={"q": 1})
    except Exception as exc:
        note(exc)


def test_botocore(agent_replay, monkeypatch):
    import botocore.session
    from botocore.config import Config

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    client = botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=os.environ["TINY_URL"],
        config=Config(retries={"max_attempts": 3, "mode": "standard"}),
    )
    try:
        client.list_tables()
    except Exception as exc:  # botocore wraps what its transport raised, and retries
        note(exc)
"""


def test_model_without_provider_is_refused_and_fails_the_test(project: Project, tmp_path: Path) -> None:
    pytest.importorskip("requests")
    pytest.importorskip("botocore")
    project.pytester.makeconftest(CLASSIFY_AS_MODEL)
    project.pytester.makepyfile(test_clients=SWALLOWING_CLIENTS)
    seen = tmp_path / "seen.jsonl"
    project.monkeypatch.setenv("SEEN", str(seen))
    with TinyModelServer() as server:
        project.monkeypatch.setenv("TINY_URL", server.url)
        result = project.run("--agentreplay-record=all", "-p", "no:randomly")
        sent = list(server.log)
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert out.count("is classified as a model call, and no provider reads it") >= 3
    assert "/v2/converse is classified as a model call" in out
    assert (
        "providers asked, in order: azure-openai, mistral, openai, anthropic, gemini, ollama, cohere, bedrock"
        in out
    )
    assert "pytest_agentreplay_providers hook" in out and "classify it 'read' or 'write'" in out
    # Nothing reached the service; each client met the plugin's own error, or its wrapper of it.
    assert sent == []
    kinds = [tuple(json.loads(line)) for line in seen.read_text().splitlines()]
    assert kinds[0] == ("pytest_agentreplay.exceptions", "NoProviderError")
    assert kinds[1] == ("pytest_agentreplay.exceptions", "NoProviderError")
    assert kinds[2][1] == "HTTPClientError"  # botocore's wrapper; the test failed on ours


# -- calls a library makes for itself ------------------------------------------------------------------

LIBRARY_THREAD = """
import os
import threading

import tiny_agent

COST_MAP = "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"
# A module of the library's own, as LiteLLM's background fetch runs it: the frame's module is litellm.x.
LIBRARY = '''
def fetch(url):
    import httpx
    try:
        httpx.get(url, timeout=5)
    except Exception:
        pass  # LiteLLM falls back to the map it ships with
'''


def test_agent(agent_replay):
    tiny_agent.ask("hello there")
    if os.environ.get("LIBRARY_FETCH"):
        space = {"__name__": "litellm.x"}
        exec(compile(LIBRARY, "litellm/x.py", "exec"), space)
        worker = threading.Thread(
            target=space["fetch"], args=(COST_MAP,), name="litellm-model-cost-map-retry"
        )
        worker.start()
        worker.join()
"""


def _library_project(project: Project) -> TinyModelServer:
    project.pytester.makepyfile(test_library=LIBRARY_THREAD)
    with TinyModelServer() as server:
        project.monkeypatch.setenv("TINY_URL", server.url)
        project.run("--agentreplay-record=all").assert_outcomes(passed=1)
    project.monkeypatch.setenv("LIBRARY_FETCH", "1")
    return server


def test_library_thread_refusal_names_thread_library_and_fix(project: Project) -> None:
    _library_project(project)
    result = project.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "no recorded HTTP exchange matches GET https://raw.githubusercontent.com/" in out
    assert "thread: 'litellm-model-cost-map-retry' (not the thread running the test)" in out
    assert "made by: litellm (code in module litellm.x)" in out
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in out
    assert "agentreplay_tolerated_hosts" in out


def test_tolerated_hosts_refuse_without_failing(project: Project) -> None:
    _library_project(project)
    result = project.run("-o", "agentreplay_tolerated_hosts=raw.githubusercontent.com")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "tolerated: 1 call refused without failing the test" in out
    assert (
        "refused, tolerated: GET https://raw.githubusercontent.com/BerriAI/litellm/main/"
        "model_prices_and_context_window.json (thread 'litellm-model-cost-map-retry', by litellm) "
        "in test_library.py::test_agent"
    ) in out

    # The [tool.agentreplay] key works the same, and is checked at start-up.
    project.pytester.makepyprojecttoml('[tool.agentreplay]\ntolerated_hosts = ["*.githubusercontent.com"]\n')
    project.run().assert_outcomes(passed=1)
    project.pytester.makepyprojecttoml("[tool.agentreplay]\ntolerated_hosts = 3\n")
    bad = project.run()
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "tolerated_hosts" in bad.stderr.str()


# -- the same, one level down -------------------------------------------------------------------------


def _tiny_provider(name: str = "tiny") -> Any:
    space: dict[str, Any] = {"__name__": "tiny_provider_unit"}
    exec(compile(PROVIDER.format(name=name), "tiny_provider_unit.py", "exec"), space)
    return space["TinyProvider"]()


def test_sandbox_and_model_comparison_expect_a_declared_conversation_to_change() -> None:
    from pytest_agentreplay.core.capture import Recorder, RunContext
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.http.providers import BUILTIN, ProviderSet
    from pytest_agentreplay.replay.modes import mode_rules

    providers = ProviderSet([_tiny_provider(), *BUILTIN])

    def rules(mode: str) -> list[str]:
        ctx = RunContext(Recorder(RunMeta(run_id="r")), mode=mode, settings={"providers": providers})
        return [str(rule["selector"]) for rule in mode_rules(ctx)]

    assert "model.call:input_ref.body.json.turns" in rules("sandbox")
    assert "model.call:input_ref.body.json.turns" in rules("model-comparison")
    assert rules("regression") == []


def test_guard_refusal_names_the_library_of_a_thread_of_its_own() -> None:
    import threading

    from pytest_agentreplay.core.capture import Recorder, RunContext
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.guard.reports import refusal

    ctx = RunContext(Recorder(RunMeta(run_id="r", test="t.py::t")), mode="regression", cassette="c.json")
    ctx.origin_thread = threading.get_ident()
    found: list[BaseException] = []
    # What LiteLLM's background fetch does below the guard: its module asks, a socket refuses.
    space: dict[str, Any] = {"__name__": "litellm.x", "refusal": refusal, "ctx": ctx, "found": found}
    exec(
        compile(
            "def fetch():\n"
            "    found.append(refusal(ctx, 'raw.githubusercontent.com:443', 'socket.connect', "
            "thread='litellm-model-cost-map-retry'))\n",
            "litellm/x.py",
            "exec",
        ),
        space,
    )
    worker = threading.Thread(target=space["fetch"], name="litellm-model-cost-map-retry")
    worker.start()
    worker.join()
    (error,) = found
    text = str(error)
    assert "made by: litellm (code in module litellm.x)" in text
    assert "known case: LiteLLM fetching its model-cost map" in text
    assert "1. set LITELLM_LOCAL_MODEL_COST_MAP=True" in text
