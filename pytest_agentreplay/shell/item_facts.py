"""What the plugin keeps on pytest's items and reads off them: whether a test uses agent replay, where its
cassette is, and its one status once its reports are in. Plain functions over pytest's objects; the hooks
that call them are in ``plugin.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..core.config import Settings, marker_cassette
from ..core.paths import default_for_item
from ..report.message import status_message
from ..report.status import Cause, TestStatus, decide
from . import foreign_adapters
from .controller import CollectedTest, SessionController

if TYPE_CHECKING:
    from .session import TestRun

SETTINGS_KEY = pytest.StashKey[Settings]()
CONTROLLER_KEY = pytest.StashKey[SessionController]()
# The cause of a failure the plugin raised for this item, set where it is raised.
CAUSE_KEY = pytest.StashKey[Cause]()
# The whole message of that failure, as the terminal showed it: every report carries it (report/message.py).
MESSAGE_KEY = pytest.StashKey[str]()
# Where the item's cassette is, as computed once for it (item_facts.default_cassette, collected_test).
DEFAULT_CASSETTE_KEY = pytest.StashKey[Path]()
COLLECTED_KEY = pytest.StashKey[CollectedTest]()
# A user property of a test's teardown report: what the network guard could not reach ("key|text").
GUARD_NOTE_PROPERTY = "agentreplay-guard-note"


def uses_agentreplay(item: pytest.Item) -> bool:
    """A test replays when it requests the fixture or carries the marker (on itself, class or module), or
    a foreign adapter claims it (``@pytest.mark.vcr``, when pytest-recording is not active)."""
    if "agent_replay" in getattr(item, "fixturenames", ()):
        return True
    if item.get_closest_marker("agentreplay") is not None:
        return True
    return foreign_adapters.claims(item)


def overrides_fixture(item: pytest.Item, name: str) -> bool:
    """Whether a project fixture ``name`` is visible to ``item`` (its module, class or a conftest above)."""
    for holder in (getattr(item, "cls", None), getattr(item, "module", None)):
        if holder is not None and name in vars(holder):
            return True
    for plugin in item.config.pluginmanager.get_plugins():
        # The name first: a Path per plugin of the session, per test, cost more than the whole check.
        if name not in getattr(plugin, "__dict__", ()):
            continue
        path = getattr(plugin, "__file__", None)
        if not path or Path(path).name != "conftest.py":
            continue
        if Path(path).parent in item.path.parents:
            return True
    return False


def default_cassette(item: pytest.Item) -> Path:
    """The test's cassette path by default (the ``pytest_agentreplay_cassette_path`` hook's, if it answers),
    computed once per item: collection, the guard and the fixture all ask."""
    known = item.stash.get(DEFAULT_CASSETTE_KEY, None)
    if known is not None:
        return known
    settings = item.config.stash[SETTINGS_KEY]
    default = default_for_item(settings.cassette_dir, item.config.rootpath, item.path, item.nodeid, item.name)
    chosen = item.config.hook.pytest_agentreplay_cassette_path(item=item, default=default)
    path = item.stash[DEFAULT_CASSETTE_KEY] = Path(chosen) if chosen is not None else default
    return path


def collected_test(item: pytest.Item) -> CollectedTest:
    """The item as the session's bookkeeping knows it, computed once per item (collection and the guard's
    set-up ask)."""
    known = item.stash.get(COLLECTED_KEY, None)
    if known is None:
        known = item.stash[COLLECTED_KEY] = _collected_test(item)
    return known


def _collected_test(item: pytest.Item) -> CollectedTest:
    settings = item.config.stash[SETTINGS_KEY]
    cassette: Path | None
    marks = [m.kwargs.get("cassette") for m in item.iter_markers("agentreplay")]
    named = next((m for m in marks if m is not None), None)
    if named is not None:
        cassette = marker_cassette(settings.cassette_dir, named)
    elif overrides_fixture(item, "agentreplay_cassette_path"):
        cassette = None
    else:
        cassette = default_cassette(item)
    return CollectedTest(nodeid=item.nodeid, module=item.path, cassette=cassette)


def decide_status(
    item: pytest.Item, reports: dict[str, pytest.TestReport], test_run: TestRun | None
) -> TestStatus:
    """The test's status from pytest's reports of its phases and the plugin's outcome of its run."""
    worst, phase = "passed", "call"
    for when in ("setup", "call", "teardown"):
        report = reports.get(when)
        if report is None:
            continue
        if report.failed:
            worst, phase = "failed", when
            break
        if report.skipped and worst == "passed":
            worst, phase = "skipped", when
    xfail = any(hasattr(r, "wasxfail") for r in reports.values())
    outcome = test_run.outcome if test_run is not None else None
    message = status_message(
        item.stash.get(MESSAGE_KEY, None),
        test_run,
        str(getattr(reports[phase], "longreprtext", "") or "") if worst == "failed" else None,
    )
    settings = item.config.stash[SETTINGS_KEY]
    return decide(
        nodeid=item.nodeid,
        cassette=str(test_run.cassette if test_run is not None else collected_test(item).cassette or ""),
        mode=(outcome.mode if outcome is not None else test_run.test.mode if test_run else settings.mode),
        pytest_outcome=worst,
        phase=phase,
        action=outcome.action if outcome is not None else None,
        cause=item.stash.get(CAUSE_KEY, None),
        message=message,
        regressions=outcome.regressions if outcome is not None else 0,
        expected=outcome.expected if outcome is not None else 0,
        drift=outcome.drift if outcome is not None else None,
        xfail=xfail,
        # pytest-rerunfailures numbers the attempts of a test it runs again; the last one is the verdict.
        reruns=max(int(getattr(item, "execution_count", 1) or 1) - 1, 0),
        rerecorded=outcome.rerecorded if outcome is not None else None,
        pending=outcome.pending if outcome is not None else None,
    )
