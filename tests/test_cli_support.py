"""Builders shared by the CLI, report, viewer and OTel tests: a realistic recorded run and tampering.

(No tests here; the name keeps it among this area's files.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agentreplay.cassette.blobs import BlobStore
from pytest_agentreplay.cassette.read import LoadedCassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import dumps_compact, dumps_pretty, hash_value, sha256_hex
from pytest_agentreplay.core.capture import Recorder, RunContext, payload
from pytest_agentreplay.core.events import EffectInfo, RunMeta, ToolInfo

TEST_ID = "tests/test_support_agent.py::test_refund_flow"
# Big enough to go to the blob store (INLINE_PAYLOAD_LIMIT is 2 KiB).
LONG_POLICY = " ".join(f"Refund rule {i}: orders older than {i} days need review." for i in range(60))


def build_run(
    path: Path,
    *,
    run_id: str = "run-0001",
    refund_amount: int = 40,
    final_text: str = "Your refund of 40 EUR is on its way.",
    receipt: Any = "rf_9001",
    idempotency_key: str | None = "refund-order-17",
    html_payload: bool = False,
) -> LoadedCassette:
    """Record a refund-agent run (two model calls, tools, retrieval, policy, approval, state, effect)."""
    rec = Recorder(
        RunMeta(
            run_id=run_id,
            agent="support-bot",
            test=TEST_ID,
            provider="openai",
            model="gpt-4o-mini",
            code_version="abc123",
            recorded_at="2025-05-01T10:00:00.000000Z",
            tool_schema_versions={"lookup_order": "2", "issue_refund": "1"},
            policy_versions={"refund-limit": "3"},
        )
    )
    ctx = RunContext(rec, mode="capture")
    ctx.start()
    system = LONG_POLICY + (
        " <script>alert('x')</script> </pre><img src=x onerror=alert(1)>" if html_payload else ""
    )
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Refund order 17"}],
    }
    rec.emit(
        "model.call",
        actor="model",
        event_class="decision",
        data={
            "provider": "openai",
            "endpoint": "chat.completions",
            "model": "gpt-4o-mini",
            "response_model": "gpt-4o-mini-2024-07-18",
            "decision": {
                "text": None,
                "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order_id": 17}}],
                "stop_reason": "tool_calls",
            },
            "usage": {"input_tokens": 812, "output_tokens": 21},
            "response_id": "chatcmpl-1",
            "latency_ms": 420.5,
            "decoding": {"temperature": 0.0},
        },
        input=payload(request, "personal"),
        output=payload({"id": "chatcmpl-1", "choices": []}, "personal"),
    )
    lookup = ToolInfo(name="lookup_order", schema_version="2")
    rec.emit(
        "tool.call",
        actor="runtime",
        event_class="decision",
        tool=lookup,
        data={"arguments": {"order_id": 17}, "attempt": 1, "effect": "read"},
    )
    rec.emit(
        "tool.result",
        actor="tool",
        event_class="input",
        tool=lookup,
        data={"attempt": 1},
        output=payload({"order_id": 17, "total": 40, "status": "delivered"}),
    )
    rec.emit(
        "retrieval",
        actor="tool",
        event_class="input",
        data={
            "query": "refund policy delivered orders",
            "document_ids": ["kb-12", "kb-7"],
            "corpus_version": "2025-04",
            "scores": [0.91, 0.77],
        },
    )
    rec.emit(
        "policy.decision",
        actor="policy",
        event_class="decision",
        policy_version="3",
        data={"policy": "refund-limit", "verdict": "needs_approval", "reason": "amount over 25"},
    )
    rec.emit(
        "approval",
        actor="human",
        event_class="decision",
        data={"status": "granted", "by": "agent-lead", "subject": "refund order 17"},
    )
    rec.emit(
        "state.update",
        actor="runtime",
        event_class="decision",
        state_hash=hash_value({"stage": "approved"}),
        data={"label": "approved"},
    )
    refund = ToolInfo(name="issue_refund", schema_version="1", idempotency_key=idempotency_key)
    rec.emit(
        "tool.call",
        actor="runtime",
        event_class="decision",
        tool=refund,
        data={"arguments": {"order_id": 17, "amount": refund_amount}, "attempt": 1, "effect": "write"},
    )
    rec.emit(
        "effect",
        actor="tool",
        event_class="effect",
        tool=refund,
        data={"attempt": 1},
        effect=EffectInfo(kind="issue_refund", target="payments", receipt=receipt, committed=True),
        output=payload({"refund_id": receipt, "amount": refund_amount}),
    )
    rec.emit(
        "model.call",
        actor="model",
        event_class="decision",
        data={
            "provider": "openai",
            "endpoint": "chat.completions",
            "model": "gpt-4o-mini",
            "response_model": "gpt-4o-mini-2024-07-18",
            "decision": {"text": final_text, "tool_calls": [], "stop_reason": "stop"},
            "usage": {"input_tokens": 901, "output_tokens": 17},
            "response_id": "chatcmpl-2",
            "latency_ms": 250.0,
        },
        input=payload(request, "personal"),
    )
    ctx.finish()
    return save_cassette(path, rec.run, rec.events)


def put_blob(store: Path, value: object) -> str:
    """``value`` written to the blob store at ``store`` as it is (any shape), under its content address."""
    data = dumps_compact(value).encode("utf-8")
    sha = sha256_hex(data)
    BlobStore(store).put_bytes(sha, data)
    return sha


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def write_rechained(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` with freshly computed integrity fields (a tamper they cannot see)."""
    from pytest_agentreplay.cassette.chain import build_document

    path.write_text(dumps_pretty(build_document(doc["run"], doc["events"])), encoding="utf-8")


def write_raw(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(dumps_pretty(doc), encoding="utf-8")
