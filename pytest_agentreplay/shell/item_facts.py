"""What the plugin keeps on pytest's items and reads off them: whether a test uses agent replay and where
its cassette is (called from ``plugin.py``'s hooks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..core.config import Settings, marker_cassette
from ..core.paths import default_for_item, module_cassette_dir
from . import vcr_plugin
from .controller import CollectedTest

SETTINGS_KEY = pytest.StashKey[Settings]()
# Where the item's cassette is, as computed once for it (item_facts.default_cassette, collected_test).
DEFAULT_CASSETTE_KEY = pytest.StashKey[Path]()
COLLECTED_KEY = pytest.StashKey[CollectedTest]()
# The session's cassette folder of each test module, by its path as collected: resolving the module's path
# walks every folder above it, once per module, not once per test (the settings and rootdir are the
# session's own).
MODULE_DIRS_KEY = pytest.StashKey[dict[Path, Path]]()
# A user property of a test's teardown report: what the network guard could not reach ("key|text").
GUARD_NOTE_PROPERTY = "agentreplay-guard-note"
# The fixture a project overrides to decide a test's cassette path at run time.
CASSETTE_FIXTURE = "agentreplay_cassette_path"


def uses_agentreplay(item: pytest.Item) -> bool:
    """A test replays when it requests the fixture or carries the marker (on itself, class or module), or
    the vcr adapter claims it (``@pytest.mark.vcr``, when pytest-recording is not active)."""
    return (
        "agent_replay" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("agentreplay") is not None
        or vcr_plugin.claims(item)
    )


def fixture_conftests(config: pytest.Config, name: str) -> list[Path]:
    found = []
    for plugin in config.pluginmanager.get_plugins():
        # The name first: a Path per plugin of the session cost more than the whole check.
        if name not in getattr(plugin, "__dict__", ()):
            continue
        path = getattr(plugin, "__file__", None)
        if path and Path(path).name == "conftest.py":
            found.append(Path(path).parent)
    return found


def overrides_fixture(item: pytest.Item, name: str, conftests: list[Path] | None = None) -> bool:
    """Whether a project fixture ``name`` is visible to ``item`` (its module, class or a conftest above);
    ``conftests``: :func:`fixture_conftests` of the session, when known (collection asks it once)."""
    for holder in (getattr(item, "cls", None), getattr(item, "module", None)):
        if holder is not None and name in vars(holder):
            return True
    folders = fixture_conftests(item.config, name) if conftests is None else conftests
    return any(folder in item.path.parents for folder in folders)


def default_cassette(item: pytest.Item) -> Path:
    """The test's cassette path by default (the ``pytest_agentreplay_cassette_path`` hook's, if it answers),
    computed once per item."""
    known = item.stash.get(DEFAULT_CASSETTE_KEY, None)
    if known is not None:
        return known
    config = item.config
    folders = config.stash.setdefault(MODULE_DIRS_KEY, {})
    folder = folders.get(item.path)
    if folder is None:
        settings = config.stash[SETTINGS_KEY]
        folder = folders[item.path] = module_cassette_dir(settings.cassette_dir, config.rootpath, item.path)
    default = default_for_item(folder, item.nodeid, item.name)
    chosen = item.config.hook.pytest_agentreplay_cassette_path(item=item, default=default)
    known = item.stash[DEFAULT_CASSETTE_KEY] = Path(chosen) if chosen is not None else default
    return known


def collected_test(item: pytest.Item, conftests: list[Path] | None = None) -> CollectedTest:
    """The item as the session's bookkeeping knows it, computed once per item."""
    known = item.stash.get(COLLECTED_KEY, None)
    if known is not None:
        return known
    settings = item.config.stash[SETTINGS_KEY]
    cassette: Path | None
    marks = [m.kwargs.get("cassette") for m in item.iter_markers("agentreplay")]
    named = next((m for m in marks if m is not None), None)
    if named is not None:
        cassette = marker_cassette(settings.cassette_dir, named)
    elif overrides_fixture(item, CASSETTE_FIXTURE, conftests):
        cassette = None
    else:
        cassette = default_cassette(item)
    known = item.stash[COLLECTED_KEY] = CollectedTest(nodeid=item.nodeid, module=item.path, cassette=cassette)
    return known
