"""A cassette that cannot be written (a full disk, a file where a folder should be) is one error of the
package with the cause `not-saved` in every view, and the previous cassette and its blobs stay intact.

The failures are real writes that fail: `os.replace` refusing with ENOSPC inside the inner session (a
conftest patch, so the test does not depend on a full disk, and works as root, whom chmod does not stop),
and a regular file standing where the cassette's folder must be created.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_agentreplay.cassette.atomic import TEMP_PREFIX

AGENT = """
from pytest_agentreplay import tool

@tool(name="fetch_docs")
def fetch_docs(topic):
    # Above 2 KiB, paragraphs over 256 bytes: the result goes to the blob store, one blob per paragraph.
    paragraphs = [{"n": i, "text": f"{topic} paragraph {i}. " * 16} for i in range(12)]
    return {"topic": topic, "paragraphs": paragraphs}
"""

TEST = """
import pathlib

import agentlib
from pytest_agentreplay import record_policy

def test_support(agent_replay):
    here = pathlib.Path(__file__).parent
    topic = (here / "topic.txt").read_text()
    assert agentlib.fetch_docs(topic)["topic"] == topic
    record_policy("refund-limit", (here / "verdict.txt").read_text())
    assert {fails!r} != "fails", "the agent got it wrong"
"""

# Writes into the blob store or of the cassette itself fail as on a full disk.
FULL_DISK = """
import errno
import os

import pytest

_replace = os.replace


def _full_disk(src, dst, *args, **kwargs):
    target = os.fspath(dst)
    if {which!r} == ("blob" if "/.blobs/" in target else "cassette"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(src), None, target)
    return _replace(src, dst, *args, **kwargs)


@pytest.fixture(autouse=True)
def full_disk(monkeypatch):
    monkeypatch.setattr(os, "replace", _full_disk)
"""


def _project(pytester: pytest.Pytester, topic: str, *, verdict: str = "allow", fails: bool = False) -> None:
    pytester.syspathinsert()
    pytester.makepyfile(agentlib=AGENT, test_agent=TEST.format(fails="fails" if fails else "passes"))
    (pytester.path / "topic.txt").write_text(topic, encoding="utf-8")
    (pytester.path / "verdict.txt").write_text(verdict, encoding="utf-8")


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_intact(before: dict[Path, bytes], root: Path) -> None:
    for path, data in before.items():
        assert path.read_bytes() == data, f"{path} changed"
    assert not [p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX)], "a temporary file was left"


def _assert_not_saved_everywhere(
    pytester: pytest.Pytester, result: pytest.RunResult, errno_name: str, mode: str
) -> None:
    text = result.stdout.str()
    # One message of the package: no traceback through the writer.
    for frame in ("Traceback", "atomic.py", "write.py", "session.py", "OSError", "PermissionError"):
        assert frame not in text, frame
    result.stdout.fnmatch_lines(
        [
            f"*cassette test_support.json was not saved: writing it failed with {errno_name} (*",
            "*How to fix:*",
            "*--agentreplay-cassette-dir DIR*",
            "*0 recorded*",
            "*failed (not-saved: the cassette was not saved*test_agent.py::test_support*",
            "*free disk space or make the folder of*writable*",
        ]
    )
    assert "fix the failing test(s)" not in text
    doc = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    (test,) = doc["tests"]
    assert (test["status"], test["cause"], test["mode"]) == ("failed", "not-saved", mode)
    assert "was not saved: writing it failed" in test["message"]
    (case,) = ET.parse(pytester.path / "junit.xml").iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert (props["agentreplay.status"], props["agentreplay.cause"]) == ("failed", "not-saved")
    assert case.find("failure") is not None


REPORTS = ("--agentreplay-report=r.json", "--junitxml=junit.xml")


@pytest.mark.parametrize("which", ["blob", "cassette"])
def test_a_full_disk_while_recording_keeps_the_previous_cassette(
    pytester: pytest.Pytester, which: str
) -> None:
    _project(pytester, "late parcel")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    cassettes = pytester.path / "cassettes"
    before = _files(cassettes)
    assert any(".blobs" in p.parts for p in before)
    # A new topic needs new blobs, so the blob writes are the ones that fail first.
    _project(pytester, "lost parcel" if which == "blob" else "late parcel")
    pytester.makeconftest(FULL_DISK.format(which=which))

    result = pytester.runpytest("--agentreplay-record=all", *REPORTS)
    result.assert_outcomes(failed=1)
    _assert_not_saved_everywhere(pytester, result, "ENOSPC", "record")
    result.stdout.fnmatch_lines(["*1. free space on the disk holding*"])
    _assert_intact(before, pytester.path)


def test_a_full_disk_while_updating_keeps_the_previous_cassette(pytester: pytest.Pytester) -> None:
    _project(pytester, "late parcel")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    before = _files(pytester.path / "cassettes")
    _project(pytester, "late parcel", verdict="deny")  # a drift --agentreplay-update accepts by rewriting
    pytester.makeconftest(FULL_DISK.format(which="cassette"))

    result = pytester.runpytest("--agentreplay-update", *REPORTS)
    result.assert_outcomes(failed=1)
    _assert_not_saved_everywhere(pytester, result, "ENOSPC", "regression")
    _assert_intact(before, pytester.path)


def test_a_file_where_the_cassette_folder_goes(pytester: pytest.Pytester) -> None:
    """A real failure: the cassette's folder cannot be created, a regular file has its name."""
    _project(pytester, "late parcel")
    pytester.makepyfile(
        test_keep="def test_keep(agent_replay):\n    import agentlib\n    agentlib.fetch_docs('x')\n"
    )
    pytester.runpytest("--agentreplay-record=all", "test_keep.py").assert_outcomes(passed=1)
    (pytester.path / "cassettes" / "test_agent").write_text("not a folder", encoding="utf-8")
    before = _files(pytester.path / "cassettes")

    result = pytester.runpytest("--agentreplay-record=all", "test_agent.py", *REPORTS)
    result.assert_outcomes(failed=1)
    _assert_not_saved_everywhere(pytester, result, "EEXIST", "record")
    result.stdout.fnmatch_lines(["*1. a file stands where a folder is needed*"])
    _assert_intact(before, pytester.path)


def test_a_failing_test_keeps_its_own_error_when_saving_it_fails(pytester: pytest.Pytester) -> None:
    """--agentreplay-save-on-failure: the test's assertion stays what pytest reports, the failed write is a
    note on it, and the verdict is not-saved."""
    _project(pytester, "late parcel", fails=True)
    pytester.makeconftest(FULL_DISK.format(which="blob"))
    result = pytester.runpytest("--agentreplay-record=all", "--agentreplay-save-on-failure", *REPORTS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the agent got it wrong*",
            "*agentreplay: cassette test_support.json was not saved: writing it failed with ENOSPC*",
        ]
    )
    doc = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert (doc["tests"][0]["status"], doc["tests"][0]["cause"]) == ("failed", "not-saved")
    assert not (pytester.path / "cassettes" / "test_agent" / "test_support.json").exists()
    _assert_intact({}, pytester.path)
