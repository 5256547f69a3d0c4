"""Runtime values (issue 17): the clock, uuid and random values an agent reads are recorded and replayed.

Inner pytest sessions (pytester) run a small agent on the official ``openai`` SDK against the local LLM
double (tests/servers.py), whose system prompt carries the current time, whose few-shot examples are a
``random.sample``, whose ticket (an httpx POST, an effect) carries a ``uuid4`` request id, the time read
in a worker thread and in an asyncio task, and a ``record_value`` draw. Recorded, then replayed with the
clock moved days ahead by time-machine in the inner conftest (no sleeps): clean in regression, sandbox and
model-comparison; a reworded prompt still fails; opting out shows the drift this feature removes.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import time_machine  # noqa: F401  (imported by the outer session: kept across pytester's module resets)
from servers import LLMServer, ModelReply

AGENT = """
import asyncio, datetime, os, random, threading, time, uuid
from concurrent.futures import ThreadPoolExecutor
from uuid import uuid4  # bound before any run: covered too

import httpx
import openai

from pytest_agentreplay import record_value

EXAMPLES = ["refund a parcel", "track an order", "change an address", "cancel an order", "reset a password"]
SENT = []


def prompt():
    now = datetime.datetime.now().isoformat(timespec="seconds")
    tail = os.environ.get("AGENT_PROMPT", "Answer briefly.")
    return f"You are a support agent. Current time: {now}. Today is {datetime.date.today()}. {tail}"


async def _task_time():
    await asyncio.sleep(0)
    return datetime.datetime.now().isoformat()


async def _gather():
    return await asyncio.gather(asyncio.create_task(_task_time()))


def run():
    base = os.environ["LLM_URL"]
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test-runtime", max_retries=0)
    shots = random.sample(EXAMPLES, 2)
    messages = [{"role": "system", "content": prompt()}]
    messages += [{"role": "user", "content": "Example: " + s} for s in shots]
    messages.append({"role": "user", "content": "Where is my parcel?"})
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    with ThreadPoolExecutor(max_workers=1) as pool:
        opened = pool.submit(lambda: datetime.datetime.now().isoformat()).result()
    (checked,) = asyncio.run(_gather())
    request_id = str(uuid4())
    seq = record_value("ticket_seq", lambda: int.from_bytes(os.urandom(4), "big"))
    if os.environ.get("EXTRA_UUID"):
        uuid.uuid4()  # drawn and thrown away: one more uuid than recorded
    body = {"request_id": request_id, "seq": seq, "opened_at": opened, "checked_at": checked}
    body["at"] = time.time()
    SENT.append(body)
    with httpx.Client() as http:
        ticket = http.post(
            os.environ["TOOLS_URL"] + "/tools/tickets",
            json=body,
            headers={"Idempotency-Key": request_id},
        )
    return {"answer": reply.choices[0].message.content, "ticket": ticket.json(), "body": body}
"""

INNER_TEST = """
import agent_rt

def test_agent(agent_replay):
    agent_rt.SENT.clear()
    out = agent_rt.run()
    assert out["answer"]
"""

CONFTEST = """
import datetime, json, os
import pytest

@pytest.fixture(autouse=True)
def _moved_clock():
    # The replay happens "days later": time-machine moves this process's clock before the run starts.
    days = float(os.environ.get("SHIFT_DAYS") or 0)
    if not days:
        yield
        return
    import time_machine
    with time_machine.travel(datetime.timedelta(days=days, seconds=7), tick=True):
        yield

@pytest.fixture
def agentreplay_config():
    return json.loads(os.environ.get("AGENT_CONFIG") or "{}")

def pytest_runtest_logreport(report):
    if report.when == "call" and os.environ.get("REPORT_TIMES"):
        with open(os.environ["REPORT_TIMES"], "a") as fh:
            fh.write(json.dumps([report.start, report.stop, report.duration]) + "\\n")
"""


@dataclass
class Lab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    llm: LLMServer

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_agent.json"

    def doc(self) -> dict[str, Any]:
        return dict(json.loads(self.cassette.read_text()))

    def runtime_event(self) -> dict[str, Any] | None:
        found = [e for e in self.doc()["events"] if e["type"] == "runtime.values"]
        assert len(found) <= 1
        return found[0] if found else None

    def record(self, *args: str) -> pytest.RunResult:
        self.llm.queue("chat", ModelReply(text="Your parcel is on its way."))
        result = self.pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider", *args)
        result.assert_outcomes(passed=1)
        return result

    def replay(self, *args: str, days: float = 3.0, **env: str) -> pytest.RunResult:
        with self.monkeypatch.context() as m:
            m.setenv("SHIFT_DAYS", str(days))
            for key, value in env.items():
                m.setenv(key, value)
            return self.pytester.runpytest("-p", "no:cacheprovider", *args)

    def report(self, result: pytest.RunResult, path: Path) -> dict[str, Any]:
        return dict(json.loads(path.read_text()))


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    pytester.makepyfile(agent_rt=AGENT)
    pytester.makepyfile(test_agent=INNER_TEST)
    pytester.makeconftest(CONFTEST)
    pytester.syspathinsert()
    llm = LLMServer().start()
    monkeypatch.setenv("LLM_URL", llm.url)
    monkeypatch.setenv("TOOLS_URL", llm.url)
    monkeypatch.delenv("SHIFT_DAYS", raising=False)
    try:
        yield Lab(pytester, monkeypatch, llm)
    finally:
        llm.stop()
        import sys

        sys.modules.pop("agent_rt", None)


def ticket_posts(server: LLMServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.log if r.method == "POST" and r.path == "/tools/tickets"]


# -- recording -------------------------------------------------------------------------------------


def test_recording_holds_one_compact_runtime_values_event(lab: Lab) -> None:
    lab.record()
    (sent,) = ticket_posts(lab.llm)
    event = lab.runtime_event()
    assert event is not None
    assert event["class"] == "input" and event["actor"] == "runtime"
    data = event["data"]
    assert data["sources"] == ["clock", "uuid", "random"]
    reads = data["reads"]
    # The system prompt (now + today) and the ticket's time.time() in the main stream; one read in the
    # worker thread and one in the asyncio task, each its own stream with a name stable across runs;
    # per stream, the values are kept per module that read them.
    assert reads["clock"]["main"]["agent_rt"] == 3
    assert reads["clock"]["thread:ThreadPoolExecutor-N_N#0"] == {"agent_rt": 1}
    assert reads["clock"]["task:_task_time#0"] == {"agent_rt": 1}
    assert data["uuid"]["main"]["agent_rt"] == [sent["request_id"]]
    assert data["values"] == {"ticket_seq": {"main": [sent["seq"]]}}
    assert isinstance(data["random"]["seed"], int)
    # The clock: a start and per-stream offsets (microseconds, deltas), not one event per read.
    clock = data["clock"]
    assert clock["start"].endswith("Z") and isinstance(clock["start_us"], int)
    offsets = clock["streams"]["thread:ThreadPoolExecutor-N_N#0"]["agent_rt"]
    thread_value = clock["start_us"] + sum(int(d) for d in offsets.split())
    assert sent["opened_at"].startswith(time.strftime("%Y-%m-%dT", time.localtime(thread_value / 1e6)))
    # Exactly where it was recorded: the event before run.end.
    types = [e["type"] for e in lab.doc()["events"]]
    assert types[-2:] == ["runtime.values", "run.end"]


# -- replay after the clock moved ------------------------------------------------------------------


def test_regression_replay_days_later_is_clean_and_sends_the_recorded_values(lab: Lab) -> None:
    lab.record()
    before = len(lab.llm.log)
    report = lab.pytester.path / "drift.json"
    result = lab.replay(f"--agentreplay-report={report}", days=3)
    result.assert_outcomes(passed=1)
    assert len(lab.llm.log) == before, "regression replay sends nothing"
    data = json.loads(report.read_text())
    assert data["summary"]["regressions"] == 0 and data["summary"]["expected_differences"] == 0, data


def test_a_reworded_prompt_still_fails_with_the_clock_served(lab: Lab) -> None:
    lab.record()
    result = lab.replay(days=3, AGENT_PROMPT="Answer briefly and kindly.")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 regression, 0 expected differences*",
            "*input_ref.body.json.messages[[]0[]].content:*[[]regression*",
            "*- ... is ????-??-??. Answer briefly.",
            "*+ ... is ????-??-??. Answer briefly and kindly.",
        ]
    )
    # Only the reworded sentence differs: the prompt still carries the recorded date, three days back.
    shown = [line for line in result.stdout.lines if line.strip()[:5] in ("- ...", "+ ...")]
    dates = {line.split(" is ")[1][:10] for line in shown}
    assert len(dates) == 1, dates


def test_without_runtime_values_the_same_replay_drifts(lab: Lab) -> None:
    """The opt-out: ``runtime_values = ""`` records nothing and the moved clock shows as drift."""
    lab.pytester.makepyprojecttoml('[tool.agentreplay]\nruntime_values = ""\n')
    lab.record()
    event = lab.runtime_event()
    # Only the explicit record_value() draw is recorded: no clock, uuid or random.
    assert event is not None and event["data"]["sources"] == []
    assert set(event["data"]) == {"sources", "reads", "values"}
    result = lab.replay(days=3)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "messages[0].content" in out and "Current time" in out
    assert "request_id" in out  # the uuid4 request id of the ticket POST


def test_marker_chooses_the_sources(lab: Lab) -> None:
    lab.pytester.makepyfile(
        test_agent=INNER_TEST.replace(
            "def test_agent",
            'import pytest\n@pytest.mark.agentreplay(runtime_values="clock")\ndef test_agent',
        )
    )
    lab.record()
    event = lab.runtime_event()
    assert event is not None
    data = event["data"]
    assert data["sources"] == ["clock"] and "uuid" not in data and "random" not in data
    # record_value is explicit: it is recorded whatever the sources.
    assert "ticket_seq" in data["values"]
    result = lab.replay(days=3)
    result.assert_outcomes(failed=1)
    assert "request_id" in result.stdout.str()


def test_invalid_runtime_values_is_a_usage_error_listing_the_valid_ones(lab: Lab) -> None:
    lab.pytester.makepyprojecttoml('[tool.agentreplay]\nruntime_values = "clock dice"\n')
    result = lab.pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*invalid runtime_values 'clock dice'*",
            "*not a runtime value: 'dice'*",
            "*valid values: clock, uuid, random*",
        ]
    )


def test_fewer_or_more_draws_are_reported_with_their_rule(lab: Lab) -> None:
    lab.record()
    report = lab.pytester.path / "drift.json"
    result = lab.replay(f"--agentreplay-report={report}", "-rA", days=1, EXTRA_UUID="1")
    result.assert_outcomes(passed=1)
    text = report.read_text()
    assert "data.reads.uuid.main.agent_rt" in text and "runtime.values:data.reads" in text, text
    data = json.loads(text)
    assert data["summary"]["regressions"] == 0 and data["summary"]["expected_differences"] == 1


def test_sandbox_replay_sends_the_recorded_request_id(lab: Lab) -> None:
    # The fresh sandbox service numbers its tickets anew: its Location header is expected to differ.
    lab.pytester.makepyprojecttoml(
        '[tool.agentreplay.rules]\n"effect:output_ref.headers.location" = "expected"\n'
    )
    lab.record()
    (recorded_body,) = ticket_posts(lab.llm)
    with LLMServer() as sandbox:
        config = {"sandbox": {lab.llm.url: sandbox.url}}
        result = lab.replay("--agentreplay-mode=sandbox", days=5, AGENT_CONFIG=json.dumps(config))
        result.assert_outcomes(passed=1)
        (sent,) = ticket_posts(sandbox)
    for key in ("request_id", "seq", "opened_at", "checked_at", "at"):
        assert sent[key] == recorded_body[key], key


def test_model_comparison_replay_keeps_the_recorded_prompt(lab: Lab) -> None:
    lab.record()
    recorded_prompt = next(r.json() for r in lab.llm.log if r.path == "/v1/chat/completions")["messages"]
    with LLMServer() as live:
        live.queue("chat", ModelReply(text="The parcel is in transit."))
        lab.monkeypatch.setenv("LLM_URL", live.url)
        result = lab.replay("--agentreplay-mode=model-comparison", days=2)
        result.assert_outcomes(passed=1)
        (request,) = [r.json() for r in live.log if r.path == "/v1/chat/completions"]
    # The live model got the very prompt the recording sent: same time, same few-shot sample.
    assert request["messages"] == recorded_prompt


# -- cost, scope, pytest's own timing ----------------------------------------------------------------

HEAVY = """
import time, datetime
import httpx

def poll(url, n_requests, n_reads):
    # A library that reads the wall clock in a loop (a rate limiter) and an HTTP client making requests.
    stamps = 0.0
    for _ in range(n_reads):
        stamps += time.time()
    with httpx.Client(timeout=5) as client:
        for i in range(n_requests):
            client.get(url + "/tools/weather", params={"city": f"c{i}"})
    return datetime.datetime.now().isoformat(), stamps
"""


def test_a_clock_heavy_library_does_not_bloat_the_cassette(lab: Lab) -> None:
    from pytest_agentreplay.core.canonical import dumps_pretty

    lab.pytester.makepyfile(heavy=HEAVY)
    lab.pytester.makepyfile(
        test_agent="""
import os, heavy

def test_agent(agent_replay):
    heavy.poll(os.environ["LLM_URL"], 20, 5000)
"""
    )
    lab.pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    doc = lab.doc()
    types = [e["type"] for e in doc["events"]]
    # One event per request, plus run.start/run.end and a single runtime.values: never one per read.
    assert len(types) <= 20 + 3, types
    assert types.count("runtime.values") == 1
    event = next(e for e in doc["events"] if e["type"] == "runtime.values")
    reads = sum(sum(by_module.values()) for by_module in event["data"]["reads"]["clock"].values())
    assert reads >= 5000
    # In the cassette file as written (pretty-printed): a few bytes per read.
    size = len(dumps_pretty(event["data"]["clock"]["streams"]))
    assert size / reads < 4, f"{size} bytes for {reads} reads"
    lab.replay(days=1).assert_outcomes(passed=1)


def test_durations_and_report_times_stay_real(lab: Lab, tmp_path: Path) -> None:
    lab.pytester.makepyfile(
        test_agent="""
import time, agent_rt

def test_agent(agent_replay):
    agent_rt.run()
    time.sleep(0.3)
"""
    )
    lab.record()
    times = tmp_path / "times.jsonl"
    started = time.time()
    result = lab.replay("--durations=0", "--durations-min=0", days=0, REPORT_TIMES=str(times))
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r".*slowest durations.*", r"\d+\.\d\ds call +test_agent.py::test_agent"])
    (call,) = [line for line in result.stdout.lines if " call " in line and "test_agent.py" in line]
    assert float(call.split("s call")[0]) >= 0.3, call  # the real sleep, not a recorded clock
    ((start, stop, duration),) = [json.loads(line) for line in times.read_text().splitlines()]
    assert started <= start <= stop <= time.time() + 1, "pytest's own timestamps are the real clock"
    assert duration >= 0.3


def test_outside_a_run_nothing_is_patched() -> None:
    import random
    import uuid

    from pytest_agentreplay import record_value
    from pytest_agentreplay.core.capture import Recorder, RunContext, activate
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.replay import runs

    assert record_value("x", lambda: 41 + 1) == 42
    original = uuid.uuid4.__code__
    ctx = RunContext(Recorder(RunMeta(run_id="r")), mode="record")
    state_before = random.getstate()
    with activate(ctx):
        runs.start(ctx)
        assert uuid.uuid4.__code__ is not original
        runs.finish(ctx)
    assert uuid.uuid4.__code__ is original
    assert random.getstate() == state_before
    assert abs(time.time() - time.perf_counter() - (time.time() - time.perf_counter())) < 1


def test_a_single_installed_run_reads_uuid_as_the_run_lookup_decides() -> None:
    """uuid's short way for one installed run picks what the lookup of the current run (``_state``) picks,
    with its run current or not: the run while it reads uuid, nothing once it stopped or without uuid."""
    import uuid

    from pytest_agentreplay.core.capture import Recorder, RunContext, activate
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.runtime import patches
    from pytest_agentreplay.runtime.values import RuntimeValues

    def drawn(state: RuntimeValues) -> int:
        return sum(len(seq.drawn) for seq in state.stream().uuid.values())

    for sources in (("clock", "uuid"), ("clock",)):
        for current in (False, True):
            ctx = RunContext(Recorder(RunMeta(run_id="r")), mode="record")
            state = RuntimeValues(ctx, sources, None)
            undo = patches.INSTALLED.add(state, ("uuid",))  # patched even for a run that does not read it
            try:
                with activate(ctx) if current else contextlib.nullcontext():
                    for active in (True, False):
                        state.active = active
                        picked = patches._state("uuid") is state
                        before = drawn(state)
                        assert isinstance(uuid.uuid4(), uuid.UUID)
                        assert (drawn(state) == before + 1) is picked
                        assert picked is (active and "uuid" in sources)
            finally:
                undo()


def test_record_value_needs_plain_json_while_recording() -> None:
    import datetime as dt

    from pytest_agentreplay import record_value
    from pytest_agentreplay.core.capture import Recorder, RunContext, activate
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.replay import runs

    ctx = RunContext(Recorder(RunMeta(run_id="r")), mode="record")
    with activate(ctx):
        runs.start(ctx)
        try:
            with pytest.raises(TypeError, match="plain JSON"):
                record_value("when", lambda: dt.datetime(2026, 1, 1))
            assert record_value("flag", lambda: {"variant": "b"}) == {"variant": "b"}
        finally:
            runs.finish(ctx)
    (event,) = [e for e in ctx.recorder.events if e.type == "runtime.values"]
    assert event.data["values"] == {"flag": {"main": [{"variant": "b"}]}}


def test_schema_documents_the_event_type() -> None:
    from pytest_agentreplay.core.events import cassette_json_schema

    schema = json.dumps(cassette_json_schema())
    assert "runtime.values" in schema


def test_the_schema_describes_the_recorded_data(lab: Lab) -> None:
    import jsonschema

    from pytest_agentreplay.core.events import cassette_json_schema

    lab.record()
    schema = cassette_json_schema()
    event = lab.runtime_event()
    assert event is not None
    jsonschema.validate(event["data"], schema["$defs"]["RuntimeValuesData"])


def test_capture_run_records_runtime_values_for_production(tmp_path: Path) -> None:
    import datetime as dt
    import uuid

    from pytest_agentreplay import capture_run

    path = tmp_path / "incident.json"
    with capture_run(path, agent="prod-agent", intercept_http=False):
        request_id = str(uuid.uuid4())
        today = dt.date.today()
    doc = json.loads(path.read_text())
    (event,) = [e for e in doc["events"] if e["type"] == "runtime.values"]
    assert [request_id] in event["data"]["uuid"]["main"].values()
    assert sum(event["data"]["reads"]["clock"]["main"].values()) == 1
    assert event["data"]["clock"]["start"] <= f"{today.isoformat()}T23:59:59Z"


def test_xdist_workers_record_and_replay_their_own_values(lab: Lab) -> None:
    lab.pytester.makepyfile(
        test_agent=INNER_TEST
        + INNER_TEST.replace("def test_agent", "def test_agent_again").replace("import agent_rt", "")
    )
    lab.llm.queue("chat", ModelReply(text="One."), ModelReply(text="Two."))
    recorded = lab.pytester.runpytest_subprocess(
        "-n", "2", "--agentreplay-record=all", "-p", "no:cacheprovider"
    )
    recorded.assert_outcomes(passed=2)
    ids = {
        name: next(e for e in json.loads(path.read_text())["events"] if e["type"] == "runtime.values")
        for name, path in (
            (n, lab.pytester.path / "cassettes" / "test_agent" / f"{n}.json")
            for n in ("test_agent", "test_agent_again")
        )
    }
    first, second = (ids[n]["data"]["uuid"]["main"]["agent_rt"] for n in ("test_agent", "test_agent_again"))
    assert first != second
    lab.monkeypatch.setenv("SHIFT_DAYS", "4")
    replayed = lab.pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=2)


def test_setting_precedence_and_validation(tmp_path: Path) -> None:
    """marker > agentreplay_config fixture > ini ``agentreplay_runtime_values`` > pyproject > default; an
    empty ini value turns it off (the ini key as ``config.getini`` returns it: None when unset)."""
    from pytest_agentreplay.core.config import build_settings, resolve_test_settings
    from pytest_agentreplay.exceptions import ConfigError

    def settings(ini: Any, project: Any) -> Any:
        return build_settings(
            rootdir=tmp_path,
            cli={},
            ini={"runtime_values": ini},
            project={} if project is None else {"runtime_values": project},
        )

    assert settings(None, None).runtime_values == ("clock", "uuid", "random")
    assert settings(None, "clock").runtime_values == ("clock",)
    assert settings("", "clock").runtime_values == ()
    assert settings("uuid, clock", None).runtime_values == ("clock", "uuid")
    assert settings(["random"], None).runtime_values == ("random",)
    assert settings(None, []).runtime_values == ()
    base = settings(None, None)

    def per_test(marker: dict[str, Any], overrides: dict[str, Any]) -> tuple[str, ...]:
        test = resolve_test_settings(
            base, nodeid="t.py::t", marker=marker, overrides=overrides, default_cassette=tmp_path / "c.json"
        )
        assert "runtime_values" not in test.extra
        return tuple(test.runtime_values)

    assert per_test({}, {"runtime_values": "uuid"}) == ("uuid",)
    assert per_test({"runtime_values": False}, {"runtime_values": "uuid"}) == ()
    assert per_test({"runtime_values": True}, {"runtime_values": ""}) == ("clock", "uuid", "random")
    with pytest.raises(ConfigError, match="valid values: clock, uuid, random"):
        per_test({"runtime_values": "time"}, {})
    with pytest.raises(ConfigError, match="runtime_values"):
        settings(None, 3)


@pytest.mark.parametrize(
    ("ini_value", "expected"), [("uuid", ["uuid"]), ("", None)], ids=["uuid-only", "empty-is-off"]
)
def test_ini_key_chooses_the_sources(pytester: pytest.Pytester, ini_value: str, expected: Any) -> None:
    pytester.makeini(f"[pytest]\nagentreplay_runtime_values = {ini_value}\n")
    pytester.makepyfile(
        test_ids="""
import datetime, uuid

def test_ids(agent_replay):
    assert uuid.uuid4() and datetime.datetime.now()
"""
    )
    pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "cassettes" / "test_ids" / "test_ids.json").read_text())
    found = [e["data"]["sources"] for e in doc["events"] if e["type"] == "runtime.values"]
    assert found == ([expected] if expected is not None else [])
