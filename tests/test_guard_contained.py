"""Fail-closed for programs the guard does not know: a non-Python child of a replaying test (no isolation)
that tries to reach the network fails that test with the fix; local helpers (uname, git, ls) pass quietly."""

from __future__ import annotations

import shutil

import pytest

from pytest_agentreplay.guard.isolation import HOLDER

pytestmark = pytest.mark.skipif(
    shutil.which("curl") is None or not HOLDER.ready(),
    reason="needs curl and a network namespace this machine can make",
)

CASSETTE_TEST = """
import os
import subprocess

import pytest

@pytest.mark.agentreplay
def test_agent(agent_replay, tmp_path):
    {body}
"""


def _project(pytester: pytest.Pytester, body: str) -> None:
    pytester.makepyfile(test_child=CASSETTE_TEST.format(body=body))


def test_unknown_cli_reaching_the_network_fails_its_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the replay runs curl, and only to loopback: even a containment bug sends nothing off the machine.
    body = (
        "if not os.environ.get('RECORDING'):\n"
        "        subprocess.run(['curl', '-s', '-m', '2', 'http://127.0.0.1:9/'], check=False)"
    )
    _project(pytester, body)
    monkeypatch.setenv("RECORDING", "1")
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--agentreplay-record=all")
    monkeypatch.delenv("RECORDING")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "a child process that is not Python tried to reach the network" in out
    assert "`curl -s -m 2 http://127.0.0.1:9/`" in out
    assert "--agentreplay-isolate=auto" in out


def test_local_helpers_pass_quietly(pytester: pytest.Pytester) -> None:
    body = (
        "argvs = (['uname', '-a'], ['ls', str(tmp_path)], ['git', '--version'], ['sh', '-c', 'echo hi'])\n"
        "    for argv in argvs:\n"
        "        assert subprocess.run(argv, capture_output=True).returncode == 0"
    )
    _project(pytester, body)
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--agentreplay-record=all")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "not Python tried to reach the network" not in result.stdout.str()
