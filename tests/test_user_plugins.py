"""The plugins users combine with this one: each loaded with ``-p`` in a real inner session (pytester) whose
agent talks to the local LLM double (tests/servers.py) through the official ``openai`` SDK.

- pytest-randomly reseeds ``random`` before every test phase (and ``random.seed`` in a fixture does the
  same): the agent's draws are the run's, recorded and replayed the same whatever the seed;
- pytest-asyncio and anyio run an ``async def`` agent on ``openai.AsyncOpenAI``;
- pytest-rerunfailures reruns a flaky test: a fresh run each time, one cassette, saved once;
- pytest-timeout stops a recording: no cassette is left behind, truncated or otherwise;
- freezegun's frozen clock and the recorded clock agree (the frozen one wins inside ``freeze_time``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer, ModelReply

AGENT = """
import datetime, json, os, random, time, uuid

import openai


def prompt():
    shots = random.sample(["track", "refund", "cancel", "address", "password"], 2)
    return (
        f"Now {datetime.datetime.now().isoformat()} ({time.time():.6f}), request {uuid.uuid4()}, "
        f"examples {shots}, temperature {random.random():.6f}"
    )


def client(kind=openai.OpenAI):
    return kind(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-plugins", max_retries=0)


def ask(text):
    messages = [{"role": "user", "content": text}]
    reply = client().chat.completions.create(model="gpt-4o-mini", messages=messages)
    return reply.choices[0].message.content


async def ask_async(text):
    messages = [{"role": "user", "content": text}]
    reply = await client(openai.AsyncOpenAI).chat.completions.create(model="gpt-4o-mini", messages=messages)
    return reply.choices[0].message.content


def note(**fields):
    with open(os.environ["NOTES"], "a") as fh:
        fh.write(json.dumps(fields) + "\\n")
"""


class Lab:
    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, llm: LLMServer) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.llm = llm

    @property
    def cassettes(self) -> Path:
        return self.pytester.path / "cassettes"

    def files(self) -> dict[str, bytes]:
        root = self.cassettes
        if not root.exists():
            return {}
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    def notes(self) -> list[dict[str, Any]]:
        path = self.pytester.path / "notes.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def run(self, *args: str, replies: int = 0, subprocess: bool = False) -> pytest.RunResult:
        if replies:
            self.llm.queue("chat", *[ModelReply(text="Fine.") for _ in range(replies)])
        if subprocess:
            # A process of its own: the first to record in it, with none of the outer suite's modules loaded.
            return self.pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)
        return self.pytester.runpytest("-p", "no:cacheprovider", *args)

    def events(self, name: str) -> list[dict[str, Any]]:
        (path,) = self.cassettes.rglob(f"{name}.json")
        return list(json.loads(path.read_text())["events"])


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    pytester.makepyfile(agent_plugins=AGENT)
    pytester.syspathinsert()
    monkeypatch.setenv("NOTES", str(pytester.path / "notes.jsonl"))
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_URL", llm.url)
        yield Lab(pytester, monkeypatch, llm)
    import sys

    sys.modules.pop("agent_plugins", None)


# -- pytest-randomly ----------------------------------------------------------------------------------

RANDOMLY_TESTS = """
import random

import pytest

import agent_plugins


@pytest.fixture
def seeded():
    random.seed(7)  # a fixture of the project's own, between the run's start and the test body


def test_prompt(agent_replay):
    text = agent_plugins.prompt()
    agent_plugins.note(test="prompt", text=text, answer=agent_plugins.ask(text))


def test_prompt_seeded(agent_replay, seeded):
    text = agent_plugins.prompt()
    agent_plugins.note(test="seeded", text=text, answer=agent_plugins.ask(text))


def test_no_draws(agent_replay):
    agent_plugins.note(test="none", answer=agent_plugins.ask("Where is my parcel?"))
"""


def test_pytest_randomly_reseeding_before_each_test_changes_nothing_replayed(lab: Lab) -> None:
    lab.pytester.makepyfile(test_randomly=RANDOMLY_TESTS)
    lab.run("-p", "randomly", "--randomly-seed=1", "--agentreplay-record=all", replies=3).assert_outcomes(
        passed=3
    )
    recorded = {n["test"]: n for n in lab.notes()}
    before = lab.files()
    # A run that draws nothing from random records no random state: pytest-randomly's reseeds are no draws
    # (the SDK's idempotency key is a uuid4: that much is recorded).
    (values,) = [e["data"] for e in lab.events("test_no_draws") if e["type"] == "runtime.values"]
    assert "random" not in values and values["sources"] == ["clock", "uuid", "random"]
    for seed in ("2", "3"):
        replayed = lab.run("-p", "randomly", f"--randomly-seed={seed}")
        replayed.assert_outcomes(passed=3)
        replayed.stdout.fnmatch_lines(["*3 replayed, 0 recorded, 0 drifted*"])
    without = lab.run("-p", "no:randomly", "--agentreplay-update")
    without.stdout.fnmatch_lines(["*3 replayed, 0 recorded, 0 drifted, 0 failed, 0 updated*"])
    notes = lab.notes()
    assert len(notes) == 12
    for note in notes[3:]:
        assert note == recorded[note["test"]]  # the same prompt, draws included, and the same answer
    assert lab.files() == before
    assert len(lab.llm.log) == 3  # replay sent nothing


# -- pytest-asyncio and anyio -------------------------------------------------------------------------

ASYNC_TEST = """
import pytest

import agent_plugins


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.{mark}
async def test_async_agent(agent_replay):
    text = agent_plugins.prompt()
    answer = await agent_plugins.ask_async(text)
    agent_plugins.note(text=text, answer=answer)
"""


@pytest.mark.parametrize(("plugin", "other"), [("asyncio", "anyio"), ("anyio", "asyncio")])
def test_an_async_agent_records_and_replays(lab: Lab, plugin: str, other: str) -> None:
    lab.pytester.makepyfile(test_async=ASYNC_TEST.format(mark=plugin))
    only = ("-p", plugin, "-p", f"no:{other}")
    lab.run(*only, "--agentreplay-record=all", replies=1).assert_outcomes(passed=1)
    assert [e["type"] for e in lab.events("test_async_agent")] == [
        "run.start",
        "model.call",
        "runtime.values",
        "run.end",
    ]
    replayed = lab.run(*only)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted*"])
    recorded, served = lab.notes()
    assert served == recorded
    assert len(lab.llm.log) == 1


# -- pytest-rerunfailures -----------------------------------------------------------------------------

FLAKY_TEST = """
import os

import agent_plugins


def test_flaky(agent_replay):
    answer = agent_plugins.ask(agent_plugins.prompt())
    marker = os.path.join(os.environ["NOTES"] + ".attempts")
    attempts = int(open(marker).read()) if os.path.exists(marker) else 0
    with open(marker, "w") as fh:
        fh.write(str(attempts + 1))
    agent_plugins.note(attempt=attempts + 1, events=len(agent_replay.events))
    assert attempts % 2 == 1, "flaky: fails on every other attempt"
    assert answer
"""


def test_a_rerun_starts_a_fresh_run_and_the_cassette_is_saved_once(lab: Lab) -> None:
    lab.pytester.makepyfile(test_flaky=FLAKY_TEST)
    rerun = ("-p", "rerunfailures", "--reruns=1")
    recorded = lab.run(*rerun, "--agentreplay-record=all", replies=2)
    assert recorded.parseoutcomes() == {"passed": 1, "rerun": 1}
    # One verdict per test: the attempt that passed (and was saved), not the one that failed before it.
    recorded.stdout.fnmatch_lines(["*0 replayed, 1 recorded, 0 drifted, 0 failed*"])
    events = lab.events("test_flaky")
    assert [e["type"] for e in events] == ["run.start", "model.call", "runtime.values", "run.end"]
    assert [n["events"] for n in lab.notes()] == [2, 2]  # each attempt: run.start and its model call
    before = lab.files()

    replayed = lab.run(*rerun)
    assert replayed.parseoutcomes() == {"passed": 1, "rerun": 1}
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted, 0 failed*"])
    assert [n["events"] for n in lab.notes()] == [2, 2, 2, 2]
    updated = lab.run(*rerun, "--agentreplay-update")
    assert updated.parseoutcomes() == {"passed": 1, "rerun": 1}
    assert lab.files() == before
    assert len(lab.llm.log) == 2


# -- pytest-timeout -----------------------------------------------------------------------------------

HANGING_TEST = """
import os, threading

import agent_plugins


def test_hangs(agent_replay):
    agent_plugins.ask(agent_plugins.prompt())
    if os.environ.get("HANG"):
        threading.Event().wait()  # never set: pytest-timeout ends the test
"""


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_timeout_while_recording_leaves_the_cassette_as_it_was(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    lab.pytester.makepyfile(test_hang=HANGING_TEST)
    lab.run("--agentreplay-record=all", replies=1).assert_outcomes(passed=1)
    before = lab.files()
    monkeypatch.setenv("HANG", "1")
    lab.llm.queue("chat", ModelReply(text="Fine."))
    args = ("-p", "timeout", "--timeout=1", f"--timeout-method={method}", "--agentreplay-record=all")
    # A session of its own for both methods: the thread method ends the process (os._exit) mid-test, and
    # the signal method dumps every thread's stack from a signal handler, which in this long-lived process
    # (hundreds of threads other tests left, process-wide gc callbacks) can stall the whole worker.
    result = lab.pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    if method != "thread":
        result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*"])
    assert result.ret != 0
    assert lab.files() == before  # neither rewritten nor truncated, no temporary file left
    monkeypatch.delenv("HANG")
    lab.run().assert_outcomes(passed=1)


# -- freezegun ----------------------------------------------------------------------------------------

FROZEN_TEST = """
import datetime, time

from freezegun import freeze_time

import agent_plugins


@freeze_time("2024-02-29 12:00:00")
def test_frozen(agent_replay):
    text = agent_plugins.prompt()
    assert datetime.date.today() == datetime.date(2024, 2, 29)
    assert time.time() == datetime.datetime(2024, 2, 29, 12, tzinfo=datetime.timezone.utc).timestamp()
    agent_plugins.note(text=text, answer=agent_plugins.ask(text), today=str(datetime.date.today()))


def test_clock_after_the_frozen_test(agent_replay):
    agent_plugins.note(text=agent_plugins.prompt(), answer=agent_plugins.ask("after"))
"""


def test_an_agent_under_freezegun_records_and_replays(lab: Lab) -> None:
    # Each run in a process of its own, where the frozen test is the first to record or replay: the
    # plugin's records must not build their validators inside the freeze.
    lab.pytester.makepyfile(test_frozen=FROZEN_TEST)
    lab.run("-p", "no:randomly", "--agentreplay-record=all", replies=2, subprocess=True).assert_outcomes(
        passed=2
    )
    frozen, after = lab.notes()
    assert frozen["text"].startswith("Now 2024-02-29T12:00:00 (1709208000.000000)")
    assert not after["text"].startswith("Now 2024-")  # the freeze ended with its test
    before = lab.files()
    replayed = lab.run("-p", "no:randomly", subprocess=True)
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["*2 replayed, 0 recorded, 0 drifted*"])
    assert lab.notes()[2:] == [frozen, after]
    lab.run("-p", "no:randomly", "--agentreplay-update", subprocess=True).assert_outcomes(passed=2)
    assert lab.files() == before
    assert len(lab.llm.log) == 2


FROZEN_BEFORE_THE_RUN = """
import datetime

import pytest
from freezegun import freeze_time

import agent_plugins


@pytest.fixture
def frozen():
    with freeze_time("2024-02-29 12:00:00"):
        yield


def test_frozen_from_a_fixture(frozen, agent_replay):
    text = agent_plugins.prompt()
    agent_plugins.note(text=text, answer=agent_plugins.ask(text), today=str(datetime.date.today()))
"""


def test_a_clock_frozen_before_the_run_starts_is_the_one_recorded_and_replayed(lab: Lab) -> None:
    # freezegun is active when the run begins (time-machine refuses to start under it): the frozen clock
    # is what the agent reads while recording and in replay.
    lab.pytester.makepyfile(test_frozen=FROZEN_BEFORE_THE_RUN)
    lab.run("--agentreplay-record=all", replies=1, subprocess=True).assert_outcomes(passed=1)
    lab.run(subprocess=True).assert_outcomes(passed=1)
    recorded, replayed = lab.notes()
    assert recorded == replayed
    assert recorded["text"].startswith("Now 2024-02-29T12:00:00")
    assert len(lab.llm.log) == 1


LEFT_FROZEN = """
from freezegun import freeze_time


def test_leaves_the_clock_frozen():
    # cohere's package imports its submodules lazily from a module __getattr__, which freezegun's walk of
    # the loaded modules calls; one of them builds a pydantic TypeAdapter(datetime) in the middle of the
    # freeze and start() raises half-way (still leaving the clock frozen). The outer suite may have
    # imported cohere: leave it out so that this freeze starts whole, whatever ran before.
    freeze_time("2024-02-29 12:00:00", ignore=["cohere"]).start()
"""

TIMEOUT_FIRES = """
import asyncio

import pytest


def test_a_timeout_fires():
    async def wait():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 0.2)

    asyncio.run(wait())
"""


def test_a_freeze_left_behind_by_an_inner_run_fails_it_and_does_not_stall_the_next(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_left=LEFT_FROZEN, test_timeout=TIMEOUT_FIRES)
    args = ("-p", "clock_guard", "-p", "no:randomly", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_leaves_the_clock_frozen left 1 freezegun freeze(s) active*"])
    # The next inner run's event loop reads a clock that advances again: its timeout fires.
    pytester.runpytest(*args, "test_timeout.py").assert_outcomes(passed=1)
