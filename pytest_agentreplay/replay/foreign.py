"""What an adapter for another tool's recordings (vcrpy today: ``interop/vcr_serving.py``) provides, so
the session (``session.TestRun``) can serve a test from them: at set-up :meth:`ForeignSource.exists`,
:meth:`~ForeignSource.load` and :meth:`~ForeignSource.activate`; per request the installed
:class:`~pytest_agentreplay.core.capture.ServesInstead` decides; at teardown
:meth:`~ForeignSource.recorded_side` and :meth:`~ForeignSource.converted_run`. The pytest side registers
the adapter (``shell/vcr_plugin.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from ..cassette.read import LoadedCassette
from ..core.capture import RunContext
from ..core.documents import Document
from ..core.events import PayloadRef, RunMeta


class RecordedSide(Protocol):
    """The recorded history a replayed run is compared with."""

    def event_dicts(self) -> list[Document]:
        """The events' JSON forms, redacted as a saved cassette is."""

    def payload(self, ref: PayloadRef | None) -> object: ...


class ForeignSource(Protocol):
    """One test's recordings in another tool's format."""

    def exists(self) -> bool:
        """Whether any of the recordings exists (else ``--agentreplay-record=missing`` records)."""

    def marker_defaults(self, marker: Mapping[str, object]) -> dict[str, object]:
        """The ``agentreplay`` marker settings the other tool's configuration implies (the marker's own
        values and the command line still win)."""

    def load(self, nodeid: str, cassette: Path) -> LoadedCassette:
        """The recorded side of the replay, in memory (``cassette``: where this plugin's would be)."""

    def activate(self, ctx: RunContext, recorded: LoadedCassette, *, converting: bool) -> None:
        """Before the run starts: answer ``ctx``'s requests from ``recorded`` (a :meth:`load` result).
        ``converting``: the run will be written as this plugin's cassette if it passes."""

    def recorded_side(self, ctx: RunContext) -> RecordedSide:
        """After the run: what it is compared with."""

    def converted_run(self, run: RunMeta) -> RunMeta:
        """The run metadata of the replay written as this plugin's cassette."""
