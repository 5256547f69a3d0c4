"""The recorder and the explicit event API, without pytest: ordering, threads, tasks, no-ops."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pytest_agentreplay
from pytest_agentreplay import (
    capture_run,
    record_approval,
    record_policy,
    record_retrieval,
    record_state,
    state_hash,
    tool,
)
from pytest_agentreplay.core.canonical import hash_value
from pytest_agentreplay.core.capture import Recorder, RunContext, activate, current_run, to_jsonable
from pytest_agentreplay.core.events import RunMeta


@tool(name="add", schema_version="1")
def add(a: int, b: int) -> int:
    return a + b


@tool(effect="write", idempotency_key="key")
async def send_email(to: str, key: str) -> dict[str, str]:
    await asyncio.sleep(0)
    return {"id": f"mail-{to}"}


def new_context() -> RunContext:
    return RunContext(Recorder(RunMeta(run_id="r1")), mode="record")


def test_api_is_a_noop_without_an_active_run() -> None:
    assert current_run() is None
    assert add(1, 2) == 3
    assert record_state({"x": 1}) is None
    record_retrieval("q", document_ids=["d"])
    record_policy("p", "allow")
    record_approval("granted")
    assert asyncio.run(send_email("bob", key="k")) == {"id": "mail-bob"}


def test_state_hash_is_sha256_of_canonical_json() -> None:
    state = {"b": [1, 2], "a": "é"}
    assert state_hash(state) == hash_value({"a": "é", "b": [1, 2]})
    assert state_hash({"a": "é", "b": [1, 2]}) == state_hash(state)
    assert len(state_hash(state)) == 64


def test_events_carry_seq_tool_and_effect_fields() -> None:
    ctx = new_context()
    with activate(ctx):
        assert add(2, b=3) == 5
        receipt = asyncio.run(send_email("ann", key="idem-9"))
        digest = record_state({"step": 1}, snapshot=True)
    events = ctx.recorder.events
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.type for e in events] == ["tool.call", "tool.result", "tool.call", "effect", "state.update"]
    call = events[0]
    assert call.tool is not None and call.tool.name == "add" and call.tool.schema_version == "1"
    assert call.data["arguments"] == {"a": 2, "b": 3}
    assert call.data["attempt"] == 1
    effect = events[3]
    assert effect.event_class == "effect"
    assert effect.tool is not None and effect.tool.idempotency_key == "idem-9"
    assert effect.effect is not None and effect.effect.receipt == receipt["id"] and effect.effect.committed
    assert events[4].state_hash == digest


@pytest.mark.parametrize("agent", [None, "support-bot", "é\u2028"])
@pytest.mark.parametrize("error", [None, "ValueError: boom"])
def test_run_start_and_end_data_is_its_json_conversion(agent: str | None, error: str | None) -> None:
    # run.start and run.end are emitted trusted (their data is plain JSON): the same as converting it.
    ctx = RunContext(Recorder(RunMeta(run_id="r1", agent=agent)), mode="record")
    ctx.start()
    ctx.finish("error" if error else "ok", error)
    start, end = ctx.recorder.events
    assert start.data == to_jsonable({"agent": agent}) and list(start.data) == ["agent"]
    expected = {"status": "error" if error else "ok", **({"error": error} if error else {})}
    assert end.data == to_jsonable(expected) and list(end.data) == list(expected)


def test_retry_attempts_are_counted_per_idempotency_key() -> None:
    failures = iter([True, False])

    @tool(effect="write", idempotency_key="key")
    def flaky(key: str) -> str:
        if next(failures):
            raise TimeoutError("slow service")
        return "ok"

    ctx = new_context()
    with activate(ctx):
        with pytest.raises(TimeoutError):
            flaky(key="k1")
        assert flaky(key="k1") == "ok"
    results = [e for e in ctx.recorder.events if e.type in ("tool.result", "effect")]
    assert [e.data["attempt"] for e in results] == [1, 2]
    assert results[0].data["error"] == "TimeoutError: slow service"
    assert results[1].type == "effect"


def test_events_from_worker_threads_and_tasks_land_in_the_run() -> None:
    ctx = new_context()

    async def in_task(n: int) -> None:
        record_state({"task": n})
        await asyncio.to_thread(record_state, {"to_thread": n})

    with activate(ctx):
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda n: add(n, n), range(20)))

        async def main() -> None:
            await asyncio.gather(*(in_task(n) for n in range(5)))

        asyncio.run(main())
    events = ctx.recorder.events
    assert sum(1 for e in events if e.type == "tool.call") == 20
    assert sum(1 for e in events if e.type == "state.update") == 10
    assert [e.seq for e in events] == list(range(len(events)))
    # each result follows its own call
    calls = [e for e in events if e.type in ("tool.call", "tool.result")]
    assert len(calls) == 40


def test_two_concurrent_async_runs_stay_apart() -> None:
    a, b = new_context(), new_context()

    async def run(ctx: RunContext, label: str) -> None:
        with activate(ctx):
            for i in range(5):
                record_state({label: i})
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(run(a, "a"), run(b, "b"))

    asyncio.run(main())
    assert len(a.recorder.events) == 5 and len(b.recorder.events) == 5
    assert {e.state_hash for e in a.recorder.events} == {state_hash({"a": i}) for i in range(5)}


def test_capture_run_writes_a_cassette_outside_pytest(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "prod" / "run1.json"
    with capture_run(path, agent="support-bot", run_id="prod-1", intercept_http=False):
        add(1, 1)
        record_policy("refund-limit", "needs_approval", version="4", reason="over 100")
    doc = json.loads(path.read_text())
    assert doc["run"]["agent"] == "support-bot"
    assert [e["type"] for e in doc["events"]] == [
        "run.start",
        "tool.call",
        "tool.result",
        "policy.decision",
        "run.end",
    ]
    assert doc["events"][3]["policy_version"] == "4"
    assert doc["events"][-1]["data"]["status"] == "ok"


def test_capture_run_saves_errored_runs_too(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "run.json"
    with pytest.raises(RuntimeError), capture_run(path, intercept_http=False):
        record_state({"a": 1})
        raise RuntimeError("boom")
    doc = json.loads(path.read_text())
    assert doc["events"][-1]["data"] == {"status": "error", "error": "RuntimeError: boom"}


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="read' or 'write"):
        tool(effect="delete")  # type: ignore[call-overload]
    ctx = new_context()
    with activate(ctx), pytest.raises(ValueError, match="requested, granted or denied"):
        record_approval("maybe")  # type: ignore[arg-type]


def test_public_facade_matches_all() -> None:
    for name in pytest_agentreplay.__all__:
        assert getattr(pytest_agentreplay, name) is not None
    assert sorted(pytest_agentreplay.__all__) == pytest_agentreplay.__all__
    assert "record_value" in pytest_agentreplay.__all__
    # @tool values of one's own types, and the error refusing a value replay could not rebuild.
    assert {"register_tool_codec", "ToolValueError"} <= set(pytest_agentreplay.__all__)
    assert pytest_agentreplay.ToolValueError.__mro__[1] is pytest_agentreplay.AgentReplayError
    assert pytest_agentreplay.record_value("seq", lambda: 7) == 7  # a pass-through outside a run
    with pytest.raises(AttributeError):
        _ = pytest_agentreplay.not_a_name  # type: ignore[attr-defined]


def test_import_loads_no_heavy_library() -> None:
    code = (
        "import sys, pytest_agentreplay;"
        "pytest_agentreplay.tool; pytest_agentreplay.record_state; pytest_agentreplay.capture_run;"
        "pytest_agentreplay.record_value;"
        "names = ('pytest', 'respx', 'vcr', 'deepdiff', 'syrupy', 'httpx', 'httpx2', 'time_machine');"
        "heavy = [m for m in names if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    "ns",
    [
        0,
        999_999_000,
        1_700_000_000_000_000_000,
        1_700_000_000_000_001_000,
        1_700_000_000_999_999_999,
        4102444799 * 10**9,
    ],
)
def test_utc_now_fills_the_kept_second_as_datetime_writes_the_instant(
    ns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second's text is kept with the microseconds left as a printf field: each stamp, the first of its
    second and the next ones, is what ``datetime`` writes for the instant."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from pytest_agentreplay.core import capture

    for step in (ns, ns + 1_000, ns):  # a new second, then the kept one
        monkeypatch.setattr(capture, "time", SimpleNamespace(time_ns=lambda step=step: step))
        second, micros = divmod(step // 1000, 1_000_000)
        instant = datetime.fromtimestamp(second, UTC).replace(microsecond=micros)
        assert capture.utc_now() == instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
