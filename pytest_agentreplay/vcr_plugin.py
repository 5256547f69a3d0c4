"""``@pytest.mark.vcr`` without pytest-recording: its fixtures and markers, registered only when
pytest-recording is not active (a project's own ``vcr_config``/``vcr_cassette_dir``/
``default_cassette_name`` in a conftest override these as they override pytest-recording's).

This module is the pytest side of the vcrpy adapter (``foreign_adapters.py`` lists it): :func:`register`,
:func:`claims` and :func:`source`. A vcr-marked test then replays through this plugin: this plugin's own
cassette when it exists, else the pytest-recording cassettes read in place (``interop/vcr_serving.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from .core.documents import Document

if TYPE_CHECKING:
    from .interop.vcr_serving import VcrSource

# The interop modules are imported where they are used: every session without pytest-recording
# registers this module, and most of them never see a vcr-marked test.

PLUGIN_NAME: Final = "agentreplay-vcr"
# How pytest-recording registers (its pytest11 entry point, or ``-p pytest_recording.plugin``).
RECORDING_PLUGINS: Final = ("recording", "pytest_recording.plugin", "pytest_recording")
MARKERS: Final = (
    "vcr(*cassettes, **vcr_config): replay this test's pytest-recording cassettes through agentreplay "
    "(pytest-recording is not active)",
    "default_cassette(name): the default cassette name of a vcr-marked test",
)


def recording_active(pluginmanager: pytest.PytestPluginManager) -> bool:
    return any(pluginmanager.has_plugin(name) for name in RECORDING_PLUGINS)


def register(config: pytest.Config) -> None:
    """At configure: honour ``@pytest.mark.vcr`` unless pytest-recording does."""
    if recording_active(config.pluginmanager) or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)


def claims(item: pytest.Item) -> bool:
    """A vcr-marked test this plugin replays (pytest-recording is absent)."""
    return item.get_closest_marker("vcr") is not None and item.config.pluginmanager.has_plugin(PLUGIN_NAME)


def source(request: pytest.FixtureRequest) -> VcrSource:
    """The vcr source of the requesting test (its fixtures resolved the way pytest-recording does)."""
    # heavy: vcr_compat and the serving adapter load the recorder and the cassette reader
    from .interop.vcr_compat import cassette_paths, merge_vcr_config, resolve_record_mode
    from .interop.vcr_serving import VcrSource

    item = request.node
    marks = list(item.iter_markers("vcr"))
    config = merge_vcr_config(request.getfixturevalue("vcr_config"), [m.kwargs for m in marks])
    args = [a for m in marks for a in m.args]
    paths = cassette_paths(
        Path(item.path),
        item.name,
        marker_args=args,
        vcr_cassette_dir=request.getfixturevalue("vcr_cassette_dir"),
        default_cassette_name=request.getfixturevalue("default_cassette_name"),
        config=config,
    )
    return VcrSource(paths, config, resolve_record_mode(config))


# -------------------------------------------------------------------------------- pytest-recording's fixtures


@pytest.fixture(scope="module")
def vcr_config() -> Document:
    """pytest-recording's default: no vcrpy options (override it in a conftest.py)."""
    return {}


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """pytest-recording's default: ``<test dir>/cassettes/<module name>``."""
    from .interop.vcr_compat import default_cassette_dir  # heavy: as in source()

    return os.fspath(default_cassette_dir(request.node.path))


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    """pytest-recording's default: ``[<Class>.]<test name>`` (``@pytest.mark.default_cassette`` wins)."""
    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None and marker.args:
        return str(marker.args[0])
    from .interop.vcr_compat import default_cassette_name as _cassette_name  # heavy: as in source()

    cls = getattr(request, "cls", None)
    return _cassette_name(request.node.name, cls.__name__ if cls is not None else None)
