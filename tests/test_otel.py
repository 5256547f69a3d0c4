"""`agentreplay export-otel`: OTLP JSON following the GenAI semantic conventions, and the SDK path."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_cli_support import build_run, read, write_rechained

from pytest_agentreplay.cli import main
from pytest_agentreplay.interop.otel import cassette_to_otlp, export_with_sdk
from pytest_agentreplay.interop.otel.spans import ts_to_ns


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    """OTLP key/value list -> plain dict (ints decoded from their string form)."""
    out: dict[str, Any] = {}
    for item in span["attributes"]:
        value = item["value"]
        ((kind, raw),) = value.items()
        if kind == "intValue":
            out[item["key"]] = int(raw)
        elif kind == "arrayValue":
            out[item["key"]] = [next(iter(v.values())) for v in raw["values"]]
        else:
            out[item["key"]] = raw
    return out


def spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (resource,) = doc["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    spans: list[dict[str, Any]] = scope["spans"]
    return spans


@pytest.fixture
def otlp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "cassettes" / "run.json"
    build_run(path)
    assert main(["export-otel", str(path)]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_otlp_shape(otlp: dict[str, Any]) -> None:
    spans = spans_of(otlp)
    resource = attrs(otlp["resourceSpans"][0]["resource"])
    assert resource["service.name"] == "pytest-agentreplay"
    trace_ids = {s["traceId"] for s in spans}
    assert len(trace_ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", trace_ids.pop())
    ids = [s["spanId"] for s in spans]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids) and len(set(ids)) == len(ids)
    root = spans[0]
    assert "parentSpanId" not in root
    assert all(s["parentSpanId"] == root["spanId"] for s in spans[1:])
    for span in spans:
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
        assert 1_600_000_000 * 10**9 < start <= end
        assert int(root["startTimeUnixNano"]) <= start and end <= int(root["endTimeUnixNano"])


def test_genai_span_names_and_attributes(otlp: dict[str, Any]) -> None:
    spans = spans_of(otlp)
    names = [s["name"] for s in spans]
    assert names == [
        "invoke_agent support-bot",
        "chat gpt-4o-mini",
        "execute_tool lookup_order",
        "execute_tool issue_refund",
        "chat gpt-4o-mini",
    ]
    root = attrs(spans[0])
    assert root["gen_ai.operation.name"] == "invoke_agent"
    assert root["gen_ai.agent.name"] == "support-bot"
    chat = attrs(spans[1])
    assert chat == {
        **chat,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 21,
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.request.temperature": 0.0,
    }
    assert spans[1]["kind"] == 3  # CLIENT
    # The chat span lasts its recorded latency.
    assert int(spans[1]["endTimeUnixNano"]) - int(spans[1]["startTimeUnixNano"]) == 420_500_000
    tool = attrs(spans[2])
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "lookup_order"
    assert tool["gen_ai.tool.call.id"] == "call_1"
    refund = attrs(spans[3])
    assert refund["agentreplay.idempotency_key"] == "refund-order-17"
    assert refund["agentreplay.effect.receipt"] == "rf_9001"
    # Checkpoints are events of the root span.
    events = {e["name"]: e for e in spans[0]["events"]}
    assert set(events) == {
        "agentreplay.retrieval",
        "agentreplay.policy.decision",
        "agentreplay.approval",
        "agentreplay.state.update",
    }
    policy = attrs(events["agentreplay.policy.decision"])
    assert policy["agentreplay.policy.verdict"] == "needs_approval"


def test_no_invented_llm_names(otlp: dict[str, Any]) -> None:
    text = json.dumps(otlp)
    assert '"llm.' not in text
    for span in spans_of(otlp):
        for key in attrs(span):
            assert key.split(".")[0] in ("gen_ai", "agentreplay", "error", "http", "url", "exception"), key


def test_ts_to_ns() -> None:
    assert ts_to_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert ts_to_ns("1970-01-01T00:00:01Z") == 1_000_000_000
    assert ts_to_ns("1970-01-01T01:00:00.000000001+01:00") == 1


def test_export_is_deterministic(tmp_path: Path) -> None:
    from pytest_agentreplay.cassette.read import load_cassette

    path = tmp_path / "cassettes" / "run.json"
    build_run(path)
    loaded = load_cassette(path)
    assert cassette_to_otlp(loaded) == cassette_to_otlp(load_cassette(path))


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("model.call", {"decision": {"tool_calls": 3}}),
        ("model.call", {"latency_ms": 1e308}),
        ("model.call", {"latency_ms": 10**400}),
        ("retrieval", {"document_ids": 7}),
    ],
)
def test_export_takes_data_of_any_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], event_type: str, data: dict[str, object]
) -> None:
    """``data`` is free-form: tool calls or document ids that are no list, a latency past any float's
    nanoseconds raised TypeError or OverflowError out of the export (a resealed cassette)."""
    path = tmp_path / "cassettes" / "run.json"
    build_run(path)
    doc = read(path)
    for event in doc["events"]:
        if event["type"] == event_type:
            event["data"].update(data)
    write_rechained(path, doc)
    assert main(["export-otel", str(path)]) == 0
    spans = spans_of(json.loads(capsys.readouterr().out))
    if event_type == "retrieval":
        (found,) = [attrs(e) for e in spans[0]["events"] if e["name"] == "agentreplay.retrieval"]
        assert found["agentreplay.retrieval.document_ids"] == ["7"]


def test_sdk_exporter(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the otel extra) is not installed")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pytest_agentreplay.cassette.read import load_cassette

    path = tmp_path / "cassettes" / "run.json"
    build_run(path)
    exporter = InMemorySpanExporter()
    assert export_with_sdk(load_cassette(path), exporter) == 5
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    chat = by_name["chat gpt-4o-mini"]
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.usage.input_tokens"] in (812, 901)
    assert (
        chat.parent is not None and chat.parent.span_id == by_name["invoke_agent support-bot"].context.span_id
    )


def test_sdk_exporter_missing_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    path = tmp_path / "cassettes" / "run.json"
    build_run(path)
    code = main(["export-otel", str(path), "--exporter", "console"])
    err = capsys.readouterr().err
    assert code == 2
    assert "needs the OpenTelemetry SDK" in err and "pip install" in err
