"""What an adapter for another tool's recordings does, so the session can serve a test from them.

A test may have no cassette of this plugin but recordings of another tool: vcrpy / pytest-recording
cassettes today (``interop/vcr_serving.py``); MCP, gRPC or WebSocket transcripts are meant to land beside
it as adapters of the same shape. The session (``session.TestRun``) knows only this interface:

- at set-up, :meth:`ForeignSource.exists` says whether there is anything to replay (``record=missing``
  records otherwise), :meth:`ForeignSource.load` gives the recorded side the run replays (a cassette held
  in memory, never written) and :meth:`ForeignSource.activate` installs the adapter's answer to each
  request on the run;
- per request, the installed :class:`~pytest_agentreplay.replay.policy.ServesInstead` decides (serve,
  send or refuse), as :func:`~pytest_agentreplay.replay.policy.decide` asks it;
- at teardown, :meth:`ForeignSource.recorded_side` gives what the replayed run is compared with (what
  was played, in play order), and :meth:`ForeignSource.converted_run` the run metadata under which an
  accepted replay (``--agentreplay-update``) is written as this plugin's own cassette.

The pytest side (markers, fixtures that find a test's recordings) registers the adapter; see
``shell/vcr_plugin.py``.
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
        ...

    def payload(self, ref: PayloadRef | None) -> object: ...


class ForeignSource(Protocol):
    """One test's recordings in another tool's format."""

    def exists(self) -> bool:
        """Whether any of the recordings exists (else ``--agentreplay-record=missing`` records)."""
        ...

    def marker_defaults(self, marker: Mapping[str, object]) -> dict[str, object]:
        """The ``agentreplay`` marker settings the other tool's configuration implies (the marker's own
        values and the command line still win)."""
        ...

    def load(self, nodeid: str, cassette: Path) -> LoadedCassette:
        """The recorded side of the replay, in memory (``cassette``: where this plugin's would be)."""
        ...

    def activate(self, ctx: RunContext, recorded: LoadedCassette, *, converting: bool) -> None:
        """Before the run starts: answer ``ctx``'s requests from ``recorded`` (a :meth:`load` result).
        ``converting``: the run will be written as this plugin's cassette if it passes."""
        ...

    def recorded_side(self, ctx: RunContext) -> RecordedSide:
        """After the run: what it is compared with."""
        ...

    def converted_run(self, run: RunMeta) -> RunMeta:
        """The run metadata of the replay written as this plugin's cassette."""
        ...
