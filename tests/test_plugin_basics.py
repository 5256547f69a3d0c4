"""The pytest plugin skeleton: options, precedence, record-then-replay, the missing-cassette message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

AGENT = """
import pytest
from pytest_agentreplay import tool, record_state, record_retrieval, record_policy, record_approval

CALLS = []

@tool(name="lookup_order", schema_version="2")
def lookup_order(order_id):
    CALLS.append(order_id)
    return {"order_id": order_id, "status": "shipped"}

@tool(name="create_ticket", effect="write", idempotency_key="key")
def create_ticket(subject, key):
    CALLS.append(subject)
    return {"id": "T-1", "subject": subject}

def agent(order_id, subject):
    record_retrieval("where is my order", document_ids=["kb-1", "kb-7"], corpus_version="2026-11")
    order = lookup_order(order_id)
    record_state({"order": order})
    record_policy("ticket-policy", "allow", version="3")
    record_approval("granted", by="alice")
    return create_ticket(subject, key="idem-1")
"""


def write_agent_test(pytester: pytest.Pytester, subject: str = "late parcel", order: str = "A1") -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_agent=f"""
import agentlib

def test_support(agent_replay):
    agentlib.CALLS.clear()
    receipt = agentlib.agent({order!r}, {subject!r})
    assert receipt["id"] == "T-1"
    if agent_replay.recording:
        assert agentlib.CALLS == [{order!r}, {subject!r}]
    else:
        assert agentlib.CALLS == [], "replay must not execute tools"
"""
    )


def cassette_of(pytester: pytest.Pytester) -> Path:
    return pytester.path / "cassettes" / "test_agent" / "test_support.json"


def test_record_then_replay_explicit_events(pytester: pytest.Pytester) -> None:
    write_agent_test(pytester)
    result = pytester.runpytest("--agentreplay-record=all")
    result.assert_outcomes(passed=1)
    path = cassette_of(pytester)
    doc = json.loads(path.read_text())
    types = [e["type"] for e in doc["events"]]
    assert types == [
        "run.start",
        "retrieval",
        "tool.call",
        "tool.result",
        "state.update",
        "policy.decision",
        "approval",
        "tool.call",
        "effect",
        "run.end",
    ]
    effect = doc["events"][8]
    assert effect["tool"]["idempotency_key"] == "idem-1"
    assert effect["effect"]["receipt"] == "T-1"
    assert effect["effect"]["committed"] is True
    assert doc["events"][2]["tool"]["schema_version"] == "2"
    first_bytes = path.read_bytes()

    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert path.read_bytes() == first_bytes, "replay must not rewrite the cassette"
    result.stdout.fnmatch_lines(["*1 replayed*"])


def test_missing_cassette_gives_the_record_command(pytester: pytest.Pytester) -> None:
    write_agent_test(pytester)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*no cassette for test_agent.py::test_support*",
            "*pytest --agentreplay-record=missing test_agent.py::test_support*",
        ]
    )
    assert not cassette_of(pytester).exists()


def test_record_missing_records_only_absent_cassettes(pytester: pytest.Pytester) -> None:
    write_agent_test(pytester)
    pytester.runpytest("--agentreplay-record=missing").assert_outcomes(passed=1)
    before = cassette_of(pytester).stat().st_mtime_ns
    result = pytester.runpytest("--agentreplay-record=missing")
    result.assert_outcomes(passed=1)
    assert cassette_of(pytester).stat().st_mtime_ns == before


def test_failing_recording_test_writes_no_cassette(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_agent="""
import agentlib

def test_support(agent_replay):
    agentlib.agent("A1", "x")
    assert False, "the agent got it wrong"
"""
    )
    result = pytester.runpytest("--agentreplay-record=all")
    result.assert_outcomes(failed=1)
    assert not cassette_of(pytester).exists()
    result.stdout.fnmatch_lines(["*not-saved*"])


def test_drift_in_tool_arguments_fails(pytester: pytest.Pytester) -> None:
    write_agent_test(pytester, order="A1")
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    write_agent_test(pytester, order="B2")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*lookup_order*"])


PRECEDENCE_TEST = """
import pytest

@pytest.mark.agentreplay(record={marker!r})
def test_support(agent_replay):
    print("EFFECTIVE", agent_replay.mode)
"""


@pytest.mark.parametrize(
    ("ini", "marker", "cli", "expected"),
    [
        (None, None, None, "missing-cassette"),  # default none: replay, no cassette
        ("all", None, None, "record"),  # ini applies
        ("all", "none", None, "missing-cassette"),  # marker beats ini
        (None, "all", "none", "missing-cassette"),  # explicit command line beats marker
        ("none", "none", "all", "record"),  # explicit command line beats marker and ini
    ],
)
def test_record_mode_precedence(
    pytester: pytest.Pytester, ini: str | None, marker: str | None, cli: str | None, expected: str
) -> None:
    if ini is not None:
        pytester.makeini(f"[pytest]\nagentreplay_record = {ini}\n")
    pytester.makepyfile(test_prec=PRECEDENCE_TEST.format(marker=marker))
    args = ["-s"] + ([f"--agentreplay-record={cli}"] if cli else [])
    result = pytester.runpytest(*args)
    if expected == "record":
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*EFFECTIVE record*"])
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*no cassette for*"])


def test_pyproject_table_is_read_and_ini_wins_over_it(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.agentreplay]\nrecord = "all"\ncassette_dir = "tapes"\n')
    pytester.makepyfile(test_prec=PRECEDENCE_TEST.format(marker=None))
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "test_prec" / "test_support.json").is_file()


@pytest.mark.parametrize(
    ("args", "ini", "needle"),
    [
        (["--agentreplay-mode=fast"], None, "invalid choice: 'fast'"),
        (["--agentreplay-record=sometimes"], None, "invalid choice: 'sometimes'"),
        ([], "agentreplay_mode = fast", "valid values: audit, regression, model-comparison, sandbox"),
        ([], "agentreplay_record = sometimes", "valid values: none, missing, drifted, all"),
        (["--agentreplay-report=out.txt"], None, "must end in .md, .json or .html"),
    ],
)
def test_bad_configuration_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], ini: str | None, needle: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()


def test_bad_marker_mode_lists_valid_values(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="""
import pytest

@pytest.mark.agentreplay(mode="fast")
def test_x(agent_replay):
    pass
"""
    )
    result = pytester.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*invalid mode 'fast' in @pytest.mark.agentreplay on test_x.py::test_x*",
            "*valid values: audit, regression, model-comparison, sandbox*",
        ]
    )


def test_unknown_pyproject_key_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.agentreplay]\nrecrod = "all"\n')
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "recrod" in result.stderr.str()
    assert "valid keys" in result.stderr.str()


def test_marker_cassette_name_and_override_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import pytest

@pytest.fixture
def agentreplay_config():
    return {"record": "all"}
"""
    )
    pytester.makepyfile(
        test_x="""
import pytest

@pytest.mark.agentreplay(cassette="shared/custom")
def test_x(agent_replay):
    assert agent_replay.recording
    assert agent_replay.cassette_path.name == "custom.json"
"""
    )
    pytester.runpytest().assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "shared" / "custom.json").is_file()


def test_disabling_the_plugin_by_entry_point_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(agent_replay): pass")
    result = pytester.runpytest("-p", "no:pytest_agentreplay")
    result.stdout.fnmatch_lines(["*fixture 'agent_replay' not found*"])
