"""The session serves a test from another tool's recordings through one interface
(``replay.foreign.ForeignSource``), not through vcr branches: a transcript format that is not vcrpy plugs
in as it is, asked at set-up (exists, load, activate) and at teardown (recorded side, converted run)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_agentreplay.cassette.blobs import BlobStore, default_blob_dir
from pytest_agentreplay.cassette.read import LoadedCassette, load_cassette
from pytest_agentreplay.core.capture import Recorder, RunContext
from pytest_agentreplay.core.config import build_settings, resolve_test_settings
from pytest_agentreplay.core.documents import Document
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta, event_to_dict
from pytest_agentreplay.exceptions import DriftError
from pytest_agentreplay.report.status import Action
from pytest_agentreplay.shell.plan import TestPlan, records
from pytest_agentreplay.shell.session import TestRun

NODEID = "tests/test_agent.py::test_transcript"


class Played:
    """A recorded side: the transcript's events, as replay would compare them."""

    def __init__(self, run: RunMeta, events: list[Event]) -> None:
        self.run = run
        self.events = events

    def event_dicts(self) -> list[Document]:
        return [event_to_dict(e) for e in self.events]

    def payload(self, ref: PayloadRef | None) -> object:
        return None if ref is None else ref.inline


class Transcript:
    """Another tool's recording of the test: one decision the agent made, nothing to serve."""

    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.asked: list[str] = []

    def exists(self) -> bool:
        return True

    def marker_defaults(self, marker: Mapping[str, object]) -> dict[str, object]:
        return dict(marker)

    def load(self, nodeid: str, cassette: Path) -> LoadedCassette:
        self.asked.append("load")
        run = RunMeta(run_id="transcript-1", test=nodeid, labels={"source": "transcript"})
        return LoadedCassette(
            path=cassette, run=run, events=[], blob_store=BlobStore(default_blob_dir(cassette))
        )

    def activate(self, ctx: RunContext, recorded: LoadedCassette, *, converting: bool) -> None:
        self.asked.append("activate")

    def recorded_side(self, ctx: RunContext) -> Played:
        self.asked.append("recorded_side")
        assert ctx.recorded is not None
        recorder = Recorder(ctx.recorded.run)
        recorder.emit("run.start", actor="runtime", event_class="input", data={})
        recorder.emit("decision", actor="agent", event_class="decision", data={"text": self.decision})
        recorder.emit("run.end", actor="runtime", event_class="decision", data={"status": "ok"})
        return Played(ctx.recorded.run, recorder.events)

    def converted_run(self, run: RunMeta) -> RunMeta:
        self.asked.append("converted_run")
        return run.model_copy(update={"labels": {"source": "transcript-converted"}})


def _run(tmp_path: Path, source: Transcript, *, update: bool = False) -> TestRun:
    settings = build_settings(rootdir=tmp_path, cli={"update": update}, ini={}, project={})
    test = resolve_test_settings(
        settings, nodeid=NODEID, marker={}, overrides={}, default_cassette=tmp_path / "cassettes" / "t.json"
    )
    plan = TestPlan(NODEID, test, records(test.record, test.cassette, source), False, source)
    return TestRun(plan, settings, rootdir=tmp_path)


def test_a_run_served_by_another_format_is_compared_with_what_it_recorded(tmp_path: Path) -> None:
    source = Transcript("refund approved")
    run = _run(tmp_path, source)
    run.begin()
    assert not run.plan.records and run.served_by is source
    with pytest.raises(DriftError):  # the agent made no decision this time
        run.end(passed=True)
    assert source.asked == ["load", "activate", "recorded_side"]
    assert run.outcome is not None and run.outcome.action is Action.DRIFTED
    assert not run.plan.cassette.exists()


def test_an_accepted_replay_is_written_under_the_converted_run(tmp_path: Path) -> None:
    source = Transcript("refund approved")
    run = _run(tmp_path, source, update=True)
    run.begin()
    outcome = run.end(passed=True)
    assert outcome.action is Action.UPDATED and "converted_run" in source.asked
    saved = load_cassette(run.plan.cassette)
    assert saved.run.labels == {"source": "transcript-converted"}
