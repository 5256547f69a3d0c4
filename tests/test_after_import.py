"""The finder running a callback the moment a module has been imported (``core.patching.AfterImport``): it
patches HTTP clients and ``multiprocessing.spawn`` without importing them ahead of time."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from pytest_agentreplay.core.patching import AfterImport


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "late_module_for_test.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("late_module_for_test", None)


def test_the_callback_runs_after_the_module_and_nothing_of_the_finder_stays(module_dir: Path) -> None:
    seen: list[tuple[str, int]] = []
    finder = AfterImport(
        {"late_module_for_test": lambda module: seen.append((module.__name__, module.VALUE))}
    )
    finder.install()
    try:
        module = importlib.import_module("late_module_for_test")
        assert seen == [("late_module_for_test", 1)]  # called once the module had run
        assert sys.meta_path[0] is finder
        # The module holds the loader the other finders gave, not the finder's stand-in.
        assert type(module.__loader__).__module__ != AfterImport.__module__
        assert module.__spec__ is not None and module.__spec__.loader is module.__loader__
        importlib.import_module("json")  # other names pass through untouched
        assert seen == [("late_module_for_test", 1)]
    finally:
        finder.remove()
    assert finder not in sys.meta_path
    importlib.reload(module)
    assert seen == [("late_module_for_test", 1)]  # removed: a module run again calls nothing


def test_a_module_run_again_while_installed_calls_back_again(module_dir: Path) -> None:
    seen: list[ModuleType] = []
    finder = AfterImport({"late_module_for_test": seen.append})
    finder.install()
    try:
        first = importlib.import_module("late_module_for_test")
        del sys.modules["late_module_for_test"]  # as pytester drops the modules an inner session imported
        second = importlib.import_module("late_module_for_test")
    finally:
        finder.remove()
    assert seen == [first, second] and first is not second


def test_two_copies_of_the_finder_ask_each_other_without_recursing(module_dir: Path) -> None:
    seen: list[str] = []
    one = AfterImport({"late_module_for_test": lambda module: seen.append("one")})
    two = AfterImport({"late_module_for_test": lambda module: seen.append("two")})
    one.install()
    two.install()
    try:
        importlib.import_module("late_module_for_test")
    finally:
        two.remove()
        one.remove()
    assert sorted(seen) == ["one", "two"]


def test_a_module_no_finder_finds_is_left_to_the_import_system() -> None:
    finder = AfterImport({"no_such_module_anywhere_xyz": lambda module: None})
    finder.install()
    try:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("no_such_module_anywhere_xyz")
    finally:
        finder.remove()
