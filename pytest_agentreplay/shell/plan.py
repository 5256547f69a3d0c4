"""What one test will do, decided in one place: :class:`TestPlan` (precedence:
:func:`core.config.resolve_test_settings`).

:func:`early_plan`, from the session's settings, the marker and the collected cassette path, is known
before any fixture sets up: the network guard starts from it. :func:`fixture_plan` adds the
``agentreplay_config`` and ``agentreplay_cassette_path`` fixtures: the run, the reports and the controller
read it. Record or replay is decided by :func:`records` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

from ..core.config import Settings, TestSettings, marker_kwargs, resolve_test_settings
from ..core.documents import Document
from ..exceptions import AgentReplayError, ConfigError

if TYPE_CHECKING:
    from ..replay.foreign import ForeignSource


# A NamedTuple, not a frozen dataclass: as immutable, and far cheaper to create at start-up.
class TestPlan(NamedTuple):
    """One test's resolved settings and what the run will do with them."""

    nodeid: str
    test: TestSettings
    # Record now (True), replay (False), or not known before the fixtures run (None: the cassette is placed
    # by a fixture, or may be recorded): a test that may record is not guarded.
    records: bool | None
    # The cassette was named with the marker's ``cassette=``: other tests may share it.
    cassette_named: bool
    # Another tool's recordings of this test, served when its own cassette is absent (replay/foreign.py).
    foreign: ForeignSource | None = None
    # An early plan's inputs besides the session's: the marker and default cassette its settings were
    # resolved from (None: a bad marker, counted as absent), for the fixture plan to compare with its own.
    resolved_from: tuple[dict[str, object], Path] | None = None

    @property
    def cassette(self) -> Path:
        return self.test.cassette

    @property
    def mode(self) -> str:
        """``record`` while recording, else the replay mode."""
        return "record" if self.records else self.test.mode


# A class named Test*, not a test (a NamedTuple's body may not say so).
TestPlan.__test__ = False  # type: ignore[attr-defined]


def records(record: str, cassette: Path | None, foreign: ForeignSource | None = None) -> bool | None:
    """Whether the test records from its start: always under ``all``, under ``missing`` and ``drifted``
    when it has nothing to replay (None when its cassette is not known yet), never under ``none``. A
    ``drifted`` test with a cassette replays until its first changed call (run_state.Rerecord)."""
    if record == "all":
        return True
    if record not in ("missing", "drifted"):
        return False
    if cassette is None:
        return None
    return not (cassette.exists() or (foreign is not None and foreign.exists()))


def marker_of(item: pytest.Item) -> dict[str, object]:
    """The merged ``@pytest.mark.agentreplay`` keywords of ``item`` (closest wins)."""
    marks = list(item.iter_markers("agentreplay"))
    if any(m.args for m in marks):
        raise ConfigError(
            f"@pytest.mark.agentreplay on {item.nodeid} takes keyword arguments only",
            evidence=[f"got positional {m.args!r}" for m in marks if m.args],
            fixes=['name them, e.g. @pytest.mark.agentreplay(cassette="name", mode="sandbox")'],
        )
    return marker_kwargs([m.kwargs for m in marks], item.nodeid)


def early_plan(item: pytest.Item, settings: Settings, cassette: Path | None) -> TestPlan:
    """The plan before the test's fixtures run (``cassette`` None: a fixture places it). A bad marker
    counts as absent: the fixture plan reports it."""
    default = cassette or Path()
    resolved_from: tuple[dict[str, object], Path] | None
    try:
        marker = marker_of(item)
        test = resolve_test_settings(
            settings, nodeid=item.nodeid, marker=marker, overrides={}, default_cassette=default
        )
        resolved_from = (marker, default)
    except AgentReplayError:
        marker, resolved_from = {}, None
        test = resolve_test_settings(
            settings, nodeid=item.nodeid, marker={}, overrides={}, default_cassette=default
        )
    named = marker.get("cassette") is not None
    return TestPlan(item.nodeid, test, records(test.record, cassette), named, resolved_from=resolved_from)


def fixture_plan(
    item: pytest.Item,
    settings: Settings,
    *,
    overrides: Document,
    cassette: Path,
    foreign: ForeignSource | None,
    early: TestPlan | None = None,
) -> TestPlan:
    """The test's plan with its fixtures' settings applied and checked. ``early``'s settings are reused
    when the marker (read again: a fixture may have added one) and the cassette are the ones it was
    resolved from and the fixtures override nothing."""
    marker = marker_of(item)
    if foreign is not None:
        marker = foreign.marker_defaults(marker)
    if (
        early is not None
        and foreign is None
        and type(overrides) is dict
        and not overrides
        and early.resolved_from == (marker, cassette)
    ):
        test = early.test
    else:
        test = resolve_test_settings(
            settings, nodeid=item.nodeid, marker=marker, overrides=overrides, default_cassette=cassette
        )
    named = marker.get("cassette") is not None
    return TestPlan(item.nodeid, test, records(test.record, test.cassette, foreign), named, foreign)


def parse_rules_of(plan: TestPlan, settings: Settings) -> TestPlan:
    """``plan`` with the marker's and the fixture's rules parsed as the run begins (a bad one fails the
    test before its body, also when recording), into new settings: ``plan.test`` may be shared."""
    test, nodeid = plan.test, plan.nodeid
    if test.marker_rules is None and test.rules is settings.rules:
        return plan
    from ..diff.rules import parse_rules  # heavy: the rules engine, only for a test given rules

    rules, marker_rules = test.rules, test.marker_rules
    if rules is not settings.rules:
        place = "rules of the agentreplay_config fixture"
        rules = parse_rules(rules, source="project", place=place)
    if marker_rules is not None:
        where = f"rules= of @pytest.mark.agentreplay on {nodeid}"
        marker_rules = parse_rules(marker_rules, source="marker", place=where)
    return plan._replace(test=TestSettings(**{**vars(test), "rules": rules, "marker_rules": marker_rules}))
