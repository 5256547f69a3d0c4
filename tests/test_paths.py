"""Cassette paths: one file per test, readable names, no two tests sharing a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentreplay.core.commands import record_command
from pytest_agentreplay.core.paths import default_cassette_path


def test_layout_follows_the_module_path(tmp_path: Path) -> None:
    module = tmp_path / "tests" / "agents" / "test_support.py"
    path = default_cassette_path(tmp_path / "cassettes", tmp_path, module, "test_refund[openai-stream]")
    assert (
        path
        == tmp_path / "cassettes" / "tests" / "agents" / "test_support" / "test_refund[openai-stream].json"
    )


def test_ids_that_clean_to_the_same_name_stay_apart(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    names = ["test_c[a/b]", "test_c[a_b]", "test_c[a b]", "test_c[é]", "test_c[☕]"]
    paths = {default_cassette_path(tmp_path, tmp_path, module, n) for n in names}
    assert len(paths) == len(names)
    for path in paths:
        assert "/" not in path.name and " " not in path.name


def test_very_long_ids_are_shortened_but_distinct(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    a = default_cassette_path(tmp_path, tmp_path, module, "test_" + "a" * 300)
    b = default_cassette_path(tmp_path, tmp_path, module, "test_" + "a" * 299 + "b")
    assert a != b and len(a.name) < 200 and len(b.name) < 200


def test_record_command_quotes_the_node_id() -> None:
    assert record_command("t.py::test[x y]") == "pytest --agentreplay-record=missing 't.py::test[x y]'"


def test_positional_marker_arguments_are_rejected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="""
import pytest

@pytest.mark.agentreplay("sandbox")
def test_x(agent_replay):
    pass
"""
    )
    result = pytester.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*takes keyword arguments only*"])
    assert "Traceback" not in result.stdout.str()
