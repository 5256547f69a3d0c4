"""Issue 29 item 2: what does not depend on a test's cassette is paid once per session, not once per test
(the rules compiled once per distinct rule set, the interceptors' table built once, a test's cassette path
computed once, the uuid trampoline compiled once). Each test checks the sharing itself, not a timing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid

import pytest

from pytest_agentreplay.core.patching import Patches
from pytest_agentreplay.diff.pipeline import RuleLayers, rules_for
from pytest_agentreplay.intercept import LIBRARIES
from pytest_agentreplay.runtime.patches import UuidPatch


def test_one_rule_set_per_distinct_rules() -> None:
    marker = {"model.call:data.latency_ms": "ignore"}
    first = rules_for(RuleLayers("regression", marker=marker), None)
    # Equal rules given as new objects (each test's marker is parsed anew): the same compiled set.
    again = rules_for(RuleLayers("regression", marker=dict(marker)), None)
    assert again is first
    assert rules_for(RuleLayers("regression"), None) is not first
    assert rules_for(RuleLayers("sandbox", marker=marker), None) is not first
    # Its judgements are those of the rules it was given.
    assert first.judge("model.call", "data.latency_ms").verdict == "ignore"
    assert rules_for(RuleLayers("regression"), None).judge("model.call", "data.text").verdict == "regression"


def test_imported_recordings_have_their_own_rule_set() -> None:
    plain = rules_for(RuleLayers("regression"), {})
    imported = rules_for(RuleLayers("regression"), {"source": "vcr"})
    assert imported is not plain and len(imported.rules) > len(plain.rules)
    assert rules_for(RuleLayers("regression"), {"source": "vcr"}) is imported
    assert rules_for(RuleLayers("regression"), {}) is plain


def test_interceptor_libraries_declared_once() -> None:
    triggers = [trigger for library in LIBRARIES for trigger in library.triggers]
    assert {"httpx", "httpx2", "urllib3", "aiohttp", "grpc"} <= set(triggers)
    assert len(triggers) == len(set(triggers))  # each trigger patches one library
    with pytest.raises(TypeError):
        LIBRARIES[0] = LIBRARIES[1]  # type: ignore[index]


def test_uuid_trampoline_compiled_once() -> None:
    patch = UuidPatch()
    if patch.codes:
        pytest.skip("uuid is patched by a run of this process already")
    genuine = uuid.uuid4.__code__
    seen = []
    try:
        for _ in range(2):
            patches = Patches()
            patch.apply(patches, None)
            seen.append(uuid.uuid4.__code__)
            assert isinstance(uuid.uuid4(), uuid.UUID)
            patches.restore()
    finally:
        patch.unpatch()
    assert uuid.uuid4.__code__ is genuine
    assert seen[0] is not genuine and seen[1] is seen[0]


CONFTEST = """
import json, os

def pytest_agentreplay_cassette_path(item, default):
    with open(os.environ["ASKED_LOG"], "a") as log:
        log.write(json.dumps(item.nodeid) + "\\n")
    return None
"""

TESTS = """
import pytest
from pytest_agentreplay import record_policy

@pytest.mark.agentreplay
def test_a():
    record_policy("p", "ok", version="1")

def test_b(agent_replay):
    record_policy("p", "ok", version="1")
"""


@pytest.mark.parametrize("record", [True, False], ids=["record", "replay"])
def test_cassette_path_computed_once_per_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, record: bool
) -> None:
    log = pytester.path / "asked.log"
    monkeypatch.setenv("ASKED_LOG", str(log))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_flow=TESTS)
    if not record:
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
        log.unlink()
    result = pytester.runpytest(*(["--agentreplay-record=all"] if record else []))
    result.assert_outcomes(passed=2)
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    # Collection, the guard's set-up and the fixture each need it: the hook is asked once per test.
    assert sorted(asked) == ["test_flow.py::test_a", "test_flow.py::test_b"]


def test_adapters_imported_only_with_their_library() -> None:
    """An agent on httpx alone imports no gRPC, MCP, WebSocket or aiohttp adapter (their import was paid by
    every session before: memory and import time); the adapter comes in the moment its library is
    imported, and patches it."""
    script = textwrap.dedent(
        """
        import sys
        import httpx
        from pytest_agentreplay.intercept import ADAPTERS, install
        uninstall = install()
        loaded = sorted(name for name, _ in ADAPTERS if f"pytest_agentreplay.intercept.{name}" in sys.modules)
        print("LOADED", ",".join(loaded))
        import urllib3
        print("AFTER", "pytest_agentreplay.intercept.urllib3" in sys.modules,
              urllib3.connectionpool.HTTPConnectionPool.urlopen.__module__)
        uninstall()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["LOADED"] == "httpx"
    assert lines["AFTER"] == "True pytest_agentreplay.intercept.urllib3"


GARBAGE_TEST = """
import gc
import weakref

import pytest

gc.set_threshold(10**9, 10**9, 10**9)  # no collection of its own: only one run after a test can free
LEFT = []


class Client:
    def __init__(self):
        self.resource = {"client": self}  # a cycle, as an SDK client and its resources make


@pytest.mark.agentreplay
def test_builds_a_client():
    LEFT.append(weakref.ref(Client()))


@pytest.mark.agentreplay
def test_after_it():
    assert LEFT[0]() is None, "the client of the test before is still in memory"


def test_plain_after_it():
    LEFT.append(weakref.ref(Client()))


def test_last():
    assert LEFT[1]() is not None, "a test without agentreplay keeps the collector's own schedule"
"""


def test_a_replayed_test_leaves_no_cyclic_garbage(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_garbage=GARBAGE_TEST)
    args = ("-p", "no:randomly")
    pytester.runpytest_subprocess("--agentreplay-record=all", *args).assert_outcomes(passed=4)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=4)


FROZEN_TEST = """
import gc

import pytest


@pytest.mark.agentreplay
def test_replayed():
    assert gc.get_freeze_count() > 0, "the session's objects are walked by every full collection"


def test_plain():
    assert gc.get_freeze_count() > 0
"""


def test_the_session_objects_are_left_out_of_collections_while_tests_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_frozen=FROZEN_TEST)
    args = ("-p", "no:randomly")
    pytester.runpytest_subprocess("--agentreplay-record=all", *args).assert_outcomes(passed=2)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)


def test_a_session_without_agentreplay_tests_freezes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="import gc\n\ndef test_plain():\n    assert gc.get_freeze_count() == 0\n")
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=1)


def test_a_regression_replay_imports_no_writer_and_no_other_mode(pytester: pytest.Pytester) -> None:
    """What only recording, accepting, audit, model-comparison or sandbox sessions use stays out of a
    regression replay: fewer modules to import at each start and to hold."""
    pytester.makepyfile(
        test_agent="""
        import pytest

        def test_agent(agent_replay):
            assert agent_replay.mode in ("record", "regression")
        """
    )
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            loaded = sorted(name for name in sys.modules if name.startswith("pytest_agentreplay."))
            (session.config.rootpath / "loaded.txt").write_text("\\n".join(loaded))
        """
    )
    pytester.runpytest_subprocess("--agentreplay-record=all").assert_outcomes(passed=1)
    recorded = set((pytester.path / "loaded.txt").read_text().split())
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    replayed = set((pytester.path / "loaded.txt").read_text().split())
    assert "pytest_agentreplay.cassette.write" in recorded
    others = {
        "pytest_agentreplay.cassette.write",
        "pytest_agentreplay.replay.audit",
        "pytest_agentreplay.replay.update",
        "pytest_agentreplay.replay.comparison",
        "pytest_agentreplay.replay.sandbox",
        "pytest_agentreplay.replay.faults",
        "pytest_agentreplay.report.timeline",
        "pytest_agentreplay.intercept.grpc",
        "pytest_agentreplay.intercept.mcp",
        "pytest_agentreplay.intercept.websockets",
        # Imported where used: gRPC calls, a refusal's known callers, @tool values, a kept pending drift.
        "pytest_agentreplay.http.grpc_calls",
        "pytest_agentreplay.core.callers",
        "pytest_agentreplay.core.tool_values",
        "pytest_agentreplay.cassette.pending",
    }
    assert not replayed & others, sorted(replayed & others)


HELD_TESTS = """
import httpx
import pytest

ORIGINAL = httpx.HTTPTransport.handle_request
SEEN = []


@pytest.mark.agentreplay
def test_first():
    SEEN.append(httpx.HTTPTransport.handle_request)
    assert SEEN[0] is not ORIGINAL


@pytest.mark.agentreplay
def test_second():
    assert httpx.HTTPTransport.handle_request is SEEN[0], "interception was installed again"


def test_plain():
    assert httpx.HTTPTransport.handle_request is ORIGINAL, "a test without agentreplay sees httpx patched"


@pytest.mark.agentreplay
def test_third():
    assert httpx.HTTPTransport.handle_request is not ORIGINAL
"""

HELD_CONFTEST = """
def pytest_unconfigure(config):
    import httpx
    import test_held

    restored = httpx.HTTPTransport.handle_request is test_held.ORIGINAL
    (config.rootpath / "restored.txt").write_text(str(restored))
"""


@pytest.mark.parametrize("record", [True, False], ids=["record", "replay"])
def test_interception_installed_once_for_consecutive_agentreplay_tests(
    pytester: pytest.Pytester, record: bool
) -> None:
    """Consecutive agentreplay tests share one installation of the interceptors (each test's run counts
    itself in); a test without agentreplay between them sees the libraries unpatched, and the session
    leaves them unpatched."""
    pytester.makepyfile(test_held=HELD_TESTS)
    pytester.makeconftest(HELD_CONFTEST)
    args = ("-p", "no:randomly", "-p", "no:cacheprovider")
    if not record:
        pytester.runpytest_subprocess("--agentreplay-record=all", *args).assert_outcomes(passed=4)
    result = pytester.runpytest_subprocess(*(["--agentreplay-record=all"] if record else []), *args)
    result.assert_outcomes(passed=4)
    assert (pytester.path / "restored.txt").read_text() == "True"


def test_a_library_imported_again_is_patched_again() -> None:
    """pytester drops the modules its inner session imported; with interception held from one replaying test
    to the next, a library imported again by the next test is patched again."""
    script = textwrap.dedent(
        """
        import sys
        from pytest_agentreplay.intercept import install
        uninstall = install()
        import urllib3
        first = urllib3.connectionpool.HTTPConnectionPool.urlopen.__module__
        for name in [m for m in sys.modules if m == "urllib3" or m.startswith("urllib3.")]:
            del sys.modules[name]
        import urllib3
        again = urllib3.connectionpool.HTTPConnectionPool.urlopen.__module__
        uninstall()
        print(first, again)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pytest_agentreplay.intercept.urllib3"] * 2


def test_an_install_that_fails_fails_its_test_not_the_session(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import httpx
        import pytest_agentreplay.intercept.httpx as adapter

        def _cannot_patch(patches, module):
            raise AttributeError("SomeClient has no attribute '_send' (a newer version)")

        adapter.patch = _cannot_patch
        """
    )
    pytester.makepyfile(
        test_flow="""
        import pytest

        @pytest.mark.agentreplay(record="all")
        def test_replays():
            pass

        def test_after():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*has no attribute '_send'*"])
    assert "INTERNALERROR" not in result.stdout.str()
