"""pytest-recording suites moved over with zero edits: with pytest-recording not active (``-p no:recording``,
or not installed), its ``pytest_recording_configure`` hook and its options (``--record-mode``,
``--block-network``, ``--allowed-hosts``, ``--disable-recording``) are this plugin's, a ``persister`` in
``vcr_config`` is used, and ``tolerated_hosts`` applies to vcr-served tests. Each test runs a pytester suite
against a local 127.0.0.1 service its replayed tests must never reach.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from json_server import JsonHandler, JsonServer
from vcr_suites import PASSING, write_migration_suite

from pytest_agentreplay.intercept import install

pytest.importorskip("vcr")
# As in test_vcr_marker.py: the interceptors and HTTP clients are imported once, in this process.
install()()


class _Service(JsonHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_json({"live": True, "path": self.path})


@pytest.fixture
def service() -> Iterator[str]:
    _Service.hits = []
    with JsonServer(_Service) as server:
        yield server.url


# Plugins of the development environment these inner sessions do not need (each costs start-up time).
QUIET = (
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
    "-p",
    "no:langsmith_plugin",
    "-p",
    "no:hypothesispytest",
)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:recording", *QUIET, *args)


def write_cassette(path: Path, url: str, body: Any) -> Path:
    interaction = {
        "request": {"body": None, "headers": {"accept": ["*/*"]}, "method": "GET", "uri": url},
        "response": {
            "body": {"string": json.dumps(body)},
            "headers": {"Content-Type": ["application/json"]},
            "status": {"code": 200, "message": "OK"},
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": [interaction], "version": 1}))
    return path


def test_a_pytest_recording_suite_runs_with_zero_edits(pytester: pytest.Pytester, service: str) -> None:
    """The hook registers the matcher, the persister finds the cassettes, the addopts are accepted: every
    test passes as under pytest-recording, and nothing reaches the service."""
    write_migration_suite(pytester.path, service)
    result = run(pytester)
    result.assert_outcomes(passed=PASSING)
    assert _Service.hits == []
    assert not (pytester.path / "cassettes").exists(), "replaying never writes"
    # Without the hook's matcher the test fails, with vcrpy's own words for the unknown matcher.
    conftest = pytester.path / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text().replace("def pytest_recording_configure", "def _not_a_hook"))
    result = run(pytester)
    result.assert_outcomes(passed=PASSING - 2, failed=2)
    result.stdout.fnmatch_lines(["*Matcher case_header doesn't exist or isn't registered*"])
    assert _Service.hits == []


def test_the_hook_is_called_once_with_a_real_vcr(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(pytester.path / "cassettes" / "test_h" / "test_a.yaml", f"{service}/a", {"n": 1})
    write_cassette(pytester.path / "cassettes" / "test_h" / "test_b.yaml", f"{service}/b", {"n": 2})
    pytester.makeconftest(
        """
        import vcr

        CALLS = []

        def pytest_recording_configure(config, vcr):
            CALLS.append(vcr)

        def pytest_sessionfinish(session):
            assert len(CALLS) == 1 and isinstance(CALLS[0], vcr.VCR), CALLS
            print("configured once")
        """
    )
    pytester.makepyfile(
        test_h=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            assert httpx.get("{service}/a").json() == {{"n": 1}}

        @pytest.mark.vcr
        def test_b():
            assert httpx.get("{service}/b").json() == {{"n": 2}}
        """
    )
    result = run(pytester, "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*configured once*"])


def test_options_stay_pytest_recordings_when_it_is_active(pytester: pytest.Pytester) -> None:
    """A stand-in ``recording`` plugin declares the same options and hook: no clash, none of ours."""
    pytester.makepyfile(
        recording="""
        def pytest_addoption(parser):
            group = parser.getgroup("recording")
            group.addoption("--record-mode", default=None)
            group.addoption("--block-network", action="store_true", default=False)
            group.addoption("--allowed-hosts", default=None)
            group.addoption("--disable-recording", action="store_true", default=False)

        class Spec:
            def pytest_recording_configure(config, vcr):
                pass

        def pytest_addhooks(pluginmanager):
            pluginmanager.add_hookspecs(Spec)
        """,
        test_active="""
        def test_ours_are_not_registered(pytestconfig):
            assert not pytestconfig.pluginmanager.has_plugin("agentreplay-vcr")
            assert pytestconfig.getoption("record_mode") == "all"
            assert pytestconfig.getoption("block_network") is True
        """,
    )
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "recording", *QUIET, "--record-mode=all", "--block-network")
    result.assert_outcomes(passed=1)


def test_record_mode_on_the_command_line(pytester: pytest.Pytester, service: str) -> None:
    """``--record-mode`` is the record mode of every vcr-marked test, a marker's never overrides it:
    ``once`` records what has no cassette (in this plugin's format), ``none`` only replays."""
    pytester.makepyfile(
        test_r=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_plain():
            assert httpx.get("{service}/plain").json()["live"] is True

        @pytest.mark.vcr(record_mode="once")
        def test_marked_once():
            assert httpx.get("{service}/once").json()["live"] is True
        """
    )
    result = run(pytester, "--record-mode=none")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*no recorded vcrpy interaction matches GET*/plain*"])
    assert _Service.hits == []
    run(pytester, "--record-mode=once").assert_outcomes(passed=2)
    assert sorted(_Service.hits) == ["/once", "/plain"]
    ours = pytester.path / "cassettes" / "test_r"
    assert sorted(p.name for p in ours.glob("*.json")) == ["test_marked_once.json", "test_plain.json"]
    run(pytester, "--record-mode=none").assert_outcomes(passed=2)
    assert len(_Service.hits) == 2, "replayed from the recordings"


def test_block_network_and_allowed_hosts(pytester: pytest.Pytester, service: str) -> None:
    pytester.makepyfile(
        test_plain=f"""
        import httpx

        def test_reaches_the_service():
            assert httpx.get("{service}/x").json()["live"] is True
        """
    )
    run(pytester).assert_outcomes(passed=1)
    result = run(pytester, "--block-network")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*network access blocked*127.0.0.1*"])
    assert _Service.hits == ["/x"]
    run(pytester, "--block-network", r"--allowed-hosts=localhost,127\.0\.0\.1").assert_outcomes(passed=1)
    result = run(pytester, "--block-network", "--allowed-hosts=127.*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*allowed host pattern '127.*' is not a host name*"])


def test_disable_recording_leaves_vcr_tests_alone(pytester: pytest.Pytester, service: str) -> None:
    pytester.makepyfile(
        test_d=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_live(request, disable_recording, record_mode):
            assert disable_recording is True and record_mode == "none"
            assert "agent_replay" not in request.fixturenames
            assert httpx.get("{service}/live").json()["live"] is True
        """
    )
    run(pytester, "--disable-recording").assert_outcomes(passed=1)
    assert _Service.hits == ["/live"]
    assert not (pytester.path / "cassettes").exists()


def test_vcrpy_options_refused_with_the_package_error(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(pytester.path / "cassettes" / "test_o" / "test_o.yaml", f"{service}/o", {"o": 1})
    pytester.makepyfile(
        test_o=f"""
        import httpx, pytest

        @pytest.mark.vcr(skip_patchers=["httpx"])
        def test_o():
            httpx.get("{service}/o")
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*vcr_config sets skip_patchers=*httpx*, which pytest-agentreplay cannot honour*",
            "*How to fix:*",
            "*1. let the hosts those requests reach through by name instead*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert _Service.hits == []


def test_tolerated_hosts_apply_to_vcr_served_tests(pytester: pytest.Pytester, service: str) -> None:
    """A library's own call from its own thread (a tokenizer download), refused and swallowed: a failure
    unless its host is in ``agentreplay_tolerated_hosts``, then listed in the summary."""
    write_cassette(pytester.path / "cassettes" / "test_t" / "test_t.yaml", f"{service}/answer", {"a": 42})
    pytester.makepyfile(
        test_t=f"""
        import threading, httpx, pytest

        def fetch_tokenizer():
            try:
                httpx.get("{service}/tokenizer.json")
            except Exception:
                pass  # the library logs it and goes on

        @pytest.mark.vcr
        def test_t():
            worker = threading.Thread(target=fetch_tokenizer)
            worker.start()
            worker.join()
            assert httpx.get("{service}/answer").json() == {{"a": 42}}
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no recorded vcrpy interaction matches GET*/tokenizer.json*"])
    pytester.makeini("[pytest]\nagentreplay_tolerated_hosts = 127.0.0.1\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*refused, tolerated: GET*/tokenizer.json*test_t*"])
    assert _Service.hits == []
