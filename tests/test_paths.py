"""Cassette paths: one file per test, readable names, no two tests sharing a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentreplay.core.commands import record_command
from pytest_agentreplay.core.paths import item_cassette_path


def test_layout_follows_the_module_path(tmp_path: Path) -> None:
    module = tmp_path / "tests" / "agents" / "test_support.py"
    nodeid = "tests/agents/test_support.py::test_refund[openai-stream]"
    path = item_cassette_path(tmp_path / "cassettes", tmp_path, module, nodeid)
    assert (
        path
        == tmp_path / "cassettes" / "tests" / "agents" / "test_support" / "test_refund[openai-stream].json"
    )


def test_ids_that_clean_to_the_same_name_stay_apart(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    names = ["test_c[a/b]", "test_c[a_b]", "test_c[a b]", "test_c[é]", "test_c[☕]"]
    paths = {item_cassette_path(tmp_path, tmp_path, module, f"test_x.py::{n}") for n in names}
    assert len(paths) == len(names)
    for path in paths:
        assert "/" not in path.name and " " not in path.name


def test_very_long_ids_are_shortened_but_distinct(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    a = item_cassette_path(tmp_path, tmp_path, module, "test_x.py::test_" + "a" * 300)
    b = item_cassette_path(tmp_path, tmp_path, module, "test_x.py::test_" + "a" * 299 + "b")
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


@pytest.mark.parametrize("tapes", ["tapes", "absolute", "linked"])
def test_default_cassette_resolves_each_module_once_with_the_same_paths(
    pytester: pytest.Pytester, tapes: str
) -> None:
    from pytest_agentreplay.core.paths import item_cassette_path
    from pytest_agentreplay.shell.item_facts import MODULE_DIRS_KEY, SETTINGS_KEY, default_cassette

    root = pytester.path
    body = "import pytest\n\n@pytest.mark.agentreplay\n@pytest.mark.parametrize('x', ['a/b', 'c'])\n"
    body += "def test_x(x):\n    pass\n\nclass TestA:\n    @pytest.mark.agentreplay\n    def test_y(self):\n"
    body += "        pass\n"
    (root / "real").mkdir()
    (root / "other").mkdir()
    (root / "real" / "test_a.py").write_text(body)
    (root / "other" / "target.py").write_text(body)
    (root / "real" / "test_b.py").symlink_to(root / "other" / "target.py")  # a symlinked test file
    (root / "link").symlink_to(root / "real", target_is_directory=True)  # a folder symlink
    (root / "realtapes").mkdir()
    (root / "linkedtapes").symlink_to(root / "realtapes", target_is_directory=True)
    folder = {"tapes": "tapes", "absolute": str(root / "abs"), "linked": "linkedtapes"}[tapes]
    pytester.makepyprojecttoml(f'[tool.agentreplay]\ncassette_dir = "{folder}"\n')
    items, _ = pytester.inline_genitems("real", "link/test_a.py", "link/test_b.py")
    assert len(items) == 12
    for item in items:
        settings = item.config.stash[SETTINGS_KEY]
        slow = item_cassette_path(settings.cassette_dir, item.config.rootpath, item.path, item.nodeid)
        assert default_cassette(item) == slow, item.nodeid
    # One entry per module as collected: real/test_a, real/test_b, link/test_a, link/test_b.
    assert len(items[0].config.stash[MODULE_DIRS_KEY]) == 4


def test_the_sessions_conftests_answer_as_each_test_asking_them(pytester: pytest.Pytester) -> None:
    from pytest_agentreplay.shell.item_facts import CASSETTE_FIXTURE, fixture_conftests, overrides_fixture

    fixture = (
        "import pytest\n\n@pytest.fixture\ndef agentreplay_cassette_path(tmp_path):\n    return tmp_path\n"
    )
    test = "import pytest\n\n@pytest.mark.agentreplay\ndef test_x():\n    pass\n"
    for folder in ("a", "a/deep", "b", "c"):
        (pytester.path / folder).mkdir(parents=True)
        (pytester.path / folder / f"test_{folder.replace('/', '_')}.py").write_text(test)
    (pytester.path / "a" / "conftest.py").write_text(fixture)
    (pytester.path / "b" / "conftest.py").write_text("X = 1\n")
    (pytester.path / "c" / "test_c.py").write_text(fixture + "\n" + test)  # in the module itself
    items, _ = pytester.inline_genitems()
    conftests = fixture_conftests(items[0].config, CASSETTE_FIXTURE)
    assert conftests == [pytester.path / "a"]
    answers = {i.nodeid: overrides_fixture(i, CASSETTE_FIXTURE, conftests) for i in items}
    assert answers == {i.nodeid: overrides_fixture(i, CASSETTE_FIXTURE) for i in items}
    assert answers == {
        "a/test_a.py::test_x": True,
        "a/deep/test_a_deep.py::test_x": True,
        "b/test_b.py::test_x": False,
        "c/test_c.py::test_x": True,
    }
