"""``@pytest.mark.vcr`` without pytest-recording: its fixtures, markers, command-line options and its
``pytest_recording_configure`` hook (docs/vcr-migration.md), registered only when pytest-recording is not
active; a project's own fixtures in a conftest override these as they override pytest-recording's.

The pytest side of the vcrpy adapter (``replay/foreign.py``): a vcr-marked test replays its own cassette
when it exists, else the pytest-recording cassettes read in place (``interop/vcr_serving.py``). Unlike
under pytest-recording, a marker never overrides ``--record-mode`` and the hook is called once per session.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ..core.config import Settings
from ..core.documents import Document
from ..exceptions import ConfigError

if TYPE_CHECKING:
    from ..interop.vcr_serving import VcrSource

# The interop modules are imported where they are used: most sessions never see a vcr-marked test.
PLUGIN_NAME: Final = "agentreplay-vcr"
# How pytest-recording registers (its pytest11 entry point, or ``-p pytest_recording.plugin``).
RECORDING_PLUGINS: Final = ("recording", "pytest_recording.plugin", "pytest_recording")
MARKERS: Final = (
    "vcr(*cassettes, **vcr_config): replay this test's pytest-recording cassettes through agentreplay "
    "(pytest-recording is not active)",
    "default_cassette(name): the default cassette name of a vcr-marked test",
)


# pytest-recording's record modes (its --record-mode choices).
RECORD_MODES: Final = ("once", "new_episodes", "none", "all", "rewrite")
# The session's vcr.VCR, configured by the project's pytest_recording_configure hooks (made on first use).
VCR_KEY = pytest.StashKey[Any]()


def recording_active(pluginmanager: pytest.PytestPluginManager) -> bool:
    return any(pluginmanager.has_plugin(name) for name in RECORDING_PLUGINS)


def register_early(config: pytest.Config) -> None:
    """Before the conftest files load and the command line is parsed: unless pytest-recording is active,
    this module registers, so that suites naming pytest-recording's options and hook find them."""
    manager = config.pluginmanager
    if recording_active(manager) or manager.has_plugin(PLUGIN_NAME):
        return
    manager.register(sys.modules[__name__], PLUGIN_NAME)


def register(config: pytest.Config) -> None:
    """At configure: honour ``@pytest.mark.vcr`` unless pytest-recording does."""
    if recording_active(config.pluginmanager):
        return
    register_early(config)  # a session that skipped the early hook (the plugin loaded late)
    for line in MARKERS:
        config.addinivalue_line("markers", line)


def claims(item: pytest.Item) -> bool:
    """A vcr-marked test this plugin replays (pytest-recording not active, no ``--disable-recording``)."""
    return (
        item.get_closest_marker("vcr") is not None
        and item.config.pluginmanager.has_plugin(PLUGIN_NAME)
        and not item.config.getoption("disable_recording", False)
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recording", "pytest-recording's options, honoured by pytest-agentreplay")
    group.addoption(
        "--record-mode",
        action="store",
        default=None,
        choices=RECORD_MODES,
        help="record mode of vcr-marked tests: none (default, replay only), once and new_episodes (record "
        "what has no cassette), all and rewrite (record again); they record into pytest-agentreplay's format",
    )
    group.addoption(
        "--block-network",
        action="store_true",
        default=False,
        help="guard every test with the network guard (as --agentreplay-block-network)",
    )
    group.addoption(
        "--allowed-hosts",
        action="store",
        default=None,
        help="comma-separated hosts the network guard lets through (host names, or .*\\.domain patterns)",
    )
    group.addoption(
        "--disable-recording",
        action="store_true",
        default=False,
        help="do not apply the vcr marker: its tests run as plain tests",
    )


class RecordingHookspecs:
    """pytest-recording's hook, declared while pytest-recording is not active."""

    @staticmethod
    @pytest.hookspec
    def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
        """Configure the session's ``vcr.VCR`` (``register_matcher``, ``register_persister``,
        ``register_serializer``): what it registers applies to every vcrpy cassette the session serves."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(RecordingHookspecs)


def session_settings(config: pytest.Config, settings: Settings) -> Settings:
    """The session settings with pytest-recording's ``--block-network`` and ``--allowed-hosts`` applied
    (``settings`` is changed and returned). Raises ``ConfigError`` on a host pattern that names no host."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        return settings
    if config.getoption("block_network", False):
        settings.block_network = True
    patterns = config.getoption("allowed_hosts", None)
    if patterns:
        from ..interop.vcr_options import host_names, split_patterns  # heavy: only when the option is given

        hosts = host_names(split_patterns(patterns), "--allowed-hosts")
        settings.allow_hosts = tuple(dict.fromkeys((*settings.allow_hosts, *hosts)))
    return settings


def cli_record_mode(config: pytest.Config) -> str | None:
    mode = config.getoption("record_mode", None)
    return None if mode is None else str(mode)


def session_vcr(config: pytest.Config) -> Any:
    """The session's ``vcr.VCR``, handed to the project's ``pytest_recording_configure`` hooks on first use
    (a hook that raises fails the test that asked, and is asked again by the next one)."""
    found = config.stash.get(VCR_KEY, None)
    if found is not None:
        return found
    from vcr import VCR  # heavy: vcrpy, only once a vcr-marked test is served

    mode = cli_record_mode(config) or "none"
    vcr = VCR(record_mode="new_episodes" if mode == "rewrite" else mode)
    hook = getattr(config.hook, "pytest_recording_configure", None)
    if hook is not None:
        try:
            hook(config=config, vcr=vcr)
        except Exception as exc:
            impls = hook.get_hookimpls() if hasattr(hook, "get_hookimpls") else []
            names = ", ".join(str(getattr(impl, "plugin_name", impl)) for impl in impls) or "none"
            raise ConfigError(
                f"a pytest_recording_configure hook failed: {type(exc).__name__}: {exc}",
                evidence=[f"hook implementations: {names}"],
                place="pytest_recording_configure(config, vcr) in a conftest.py or plugin",
                fixes=["fix the hook: it receives the session's vcr.VCR, as pytest-recording passes one"],
            ) from exc
    config.stash[VCR_KEY] = vcr
    return vcr


def source(request: pytest.FixtureRequest) -> VcrSource:
    """The vcr source of the requesting test (its fixtures resolved the way pytest-recording does)."""
    # heavy: vcr_compat and the serving adapter load the recorder and the cassette reader
    from ..interop.vcr_compat import cassette_paths, merge_vcr_config, resolve_record_mode
    from ..interop.vcr_serving import VcrSource

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
    given = cli_record_mode(request.config)
    mode = resolve_record_mode(config, cli_record_mode=given)
    return VcrSource(paths, config, mode, record_given=given is not None, vcr=session_vcr(request.config))


@pytest.fixture(scope="session")
def record_mode(request: pytest.FixtureRequest) -> str:
    """pytest-recording's: ``--record-mode``, else ``none``."""
    return cli_record_mode(request.config) or "none"


@pytest.fixture(scope="session")
def disable_recording(request: pytest.FixtureRequest) -> bool:
    """pytest-recording's: whether ``--disable-recording`` was given."""
    return bool(request.config.getoption("disable_recording", False))


@pytest.fixture(scope="module")
def vcr_config() -> Document:
    """pytest-recording's default: no vcrpy options (override it in a conftest.py)."""
    return {}


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """pytest-recording's default: ``<test dir>/cassettes/<module name>``."""
    from ..interop.vcr_compat import default_cassette_dir  # heavy: as in source()

    return os.fspath(default_cassette_dir(request.node.path))


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    """pytest-recording's default: ``[<Class>.]<test name>`` (``@pytest.mark.default_cassette`` wins)."""
    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None and marker.args:
        return str(marker.args[0])
    from ..interop.vcr_compat import default_cassette_name as _cassette_name  # heavy: as in source()

    cls = getattr(request, "cls", None)
    return _cassette_name(request.node.name, cls.__name__ if cls is not None else None)
