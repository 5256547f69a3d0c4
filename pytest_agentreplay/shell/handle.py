"""What the ``agent_replay`` fixture hands a test: the run, the recorded cassette, the drift result."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.constants import VOLATILE_DATA_FIELDS, VOLATILE_ENVELOPE
from ..core.events import Event, event_to_dict

if TYPE_CHECKING:
    from ..cassette.read import LoadedCassette
    from ..core.capture import RunContext
    from ..diff.result import DriftResult
    from .session import TestRun


class AgentReplay:
    """Handle on the current test's run. ``events`` is the history being recorded or replayed now."""

    def __init__(self, test_run: TestRun) -> None:
        self._test_run = test_run

    @property
    def run(self) -> RunContext:
        assert self._test_run.ctx is not None
        return self._test_run.ctx

    @property
    def mode(self) -> str:
        """``record`` while recording, else the replay mode."""
        return self.run.mode

    @property
    def recording(self) -> bool:
        return self.run.recording

    @property
    def cassette_path(self) -> Path:
        return self._test_run.plan.cassette

    @property
    def events(self) -> list[Event]:
        """Copies of the events so far: a replayed event holds the recorded one's values (a served response,
        a re-emitted tool's exchanges), which the comparison and an update still read."""
        return [copy.deepcopy(event) for event in self.run.recorder.events]

    @property
    def recorded(self) -> LoadedCassette | None:
        """The cassette being replayed (None while recording)."""
        return self._test_run.recorded

    @property
    def drift(self) -> DriftResult | None:
        """The drift result, available after the test body finished (in teardown or hooks)."""
        return self._test_run.drift

    def decisions(self) -> list[dict[str, Any]]:
        """The decision trace: decision and effect events without volatile fields, for snapshots."""
        trace = []
        for event in self.run.recorder.events:
            if event.event_class == "input" and event.type != "retrieval":
                continue
            if event.type in ("run.start", "run.end"):
                continue
            item = event_to_dict(event)
            for key in (*VOLATILE_ENVELOPE, "input_ref", "output_ref"):
                item.pop(key, None)
            data = item.get("data", {})
            for key in VOLATILE_DATA_FIELDS:
                data.pop(key, None)
            trace.append(item)
        return trace
