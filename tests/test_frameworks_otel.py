"""The generic bridge (OpenTelemetry GenAI spans emitted in-process feed the run) and the activation
contract (cheap, nothing imported eagerly, a no-op outside a run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from servers import LLMServer, ModelReply

from pytest_agentreplay import capture_run, frameworks
from pytest_agentreplay.frameworks import otel


@pytest.fixture
def tracer() -> object:
    provider = TracerProvider()
    provider.add_span_processor(otel.processor())  # what a library with its own provider does
    return provider.get_tracer("my-agent-lib")


def _events(path: Path) -> list[dict[str, object]]:
    return list(json.loads(path.read_text())["events"])


def test_genai_spans_become_tool_events_and_agent_labels(tmp_path: Path, tracer: object) -> None:
    path = tmp_path / "run.json"
    with (
        capture_run(path),
        tracer.start_as_current_span(  # type: ignore[attr-defined]
            "invoke_agent support",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        ),
    ):
        with tracer.start_as_current_span(  # type: ignore[attr-defined]
            "execute_tool lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.arguments": '{"order_id": "A1"}',
            },
        ) as span:
            span.set_attribute("gen_ai.tool.call.result", '{"status": "shipped"}')
        with tracer.start_as_current_span(  # type: ignore[attr-defined]
            "execute_tool lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "tool_arguments": '{"order_id": "A1"}',
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            span.record_exception(TimeoutError("warehouse timed out"))
            span.set_status(Status(StatusCode.ERROR))
        # A model call no HTTP exchange was recorded for (e.g. over gRPC): kept from the span.
        with tracer.start_as_current_span(  # type: ignore[attr-defined]
            "chat m",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "acme",
                "gen_ai.request.model": "m-1",
                "gen_ai.usage.input_tokens": 3,
            },
        ):
            pass
    doc = json.loads(path.read_text())
    assert doc["run"]["labels"] == {"agent": "support", "framework": "my-agent-lib"}
    events = doc["events"]
    tools = [(e["type"], e["data"]) for e in events if e["type"].startswith("tool.")]
    assert tools == [
        (
            "tool.call",
            {
                "arguments": {"order_id": "A1"},
                "attempt": 1,
                "framework": "my-agent-lib",
            },
        ),
        ("tool.result", {"attempt": 1}),
        ("tool.call", {"arguments": {"order_id": "A1"}, "attempt": 2, "framework": "my-agent-lib"}),
        ("tool.result", {"attempt": 2, "error": "TimeoutError: warehouse timed out"}),
    ]
    assert events[2]["output_ref"]["inline"] == '{"status": "shipped"}'
    (model,) = [e for e in events if e["type"] == "model.call"]
    assert model["data"] == {
        "source": "otel",
        "provider": "acme",
        "model": "m-1",
        "usage": {"input_tokens": 3},
    }


def test_a_model_call_the_http_layer_recorded_is_not_duplicated(tmp_path: Path, tracer: object) -> None:
    import openai

    path = tmp_path / "run.json"
    with LLMServer() as llm:
        llm.queue("chat", ModelReply(text="hi"))
        client = openai.OpenAI(base_url=llm.url + "/v1", api_key="sk-test", max_retries=0)
        with (
            capture_run(path),
            tracer.start_as_current_span(  # type: ignore[attr-defined]
                "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"}
            ),
        ):
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    models = [e for e in _events(path) if e["type"] == "model.call"]
    assert len(models) == 1 and "source" not in models[0]["data"]


def test_spans_outside_a_run_are_ignored(tracer: object) -> None:
    with tracer.start_as_current_span(  # type: ignore[attr-defined]
        "execute_tool x", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"}
    ):
        pass  # nothing to record into, nothing raised


def test_activation_without_frameworks_is_a_noop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frameworks, "ADAPTERS", (("not_a_framework_module", "otel"),))
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    assert deactivate is frameworks._noop


def test_importing_the_plugin_imports_no_framework() -> None:
    code = (
        "import sys, pytest_agentreplay, pytest_agentreplay.plugin, pytest_agentreplay.core.capture\n"
        "heavy = [m for m in ('pydantic_ai', 'langchain_core', 'langgraph', 'agents', 'opentelemetry.sdk',"
        " 'pytest_agentreplay.frameworks.otel') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
