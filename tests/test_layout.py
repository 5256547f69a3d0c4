"""The package's layout: imports go one way and no file is over 500 lines (``.ci/check_imports.py``, run by
CI), and each folder says what it owns. The checker is tested against planted cycles, upward imports and long
files, so it cannot pass vacuously."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_agentreplay"
CHECKER = ROOT / ".ci" / "check_imports.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), str(package)], capture_output=True, text=True, timeout=120
    )


def test_the_package_imports_one_way() -> None:
    checker = _checker()
    graph = checker.import_graph(PACKAGE)
    assert checker.cycles(graph) == []
    assert checker.layer_problems(graph) == []


def test_the_check_passes_a_package_in_order(tmp_path: Path) -> None:
    package = tmp_path / "pytest_agentreplay"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Facade."""\n', encoding="utf-8")
    (package / "core" / "__init__.py").write_text('"""Core."""\n', encoding="utf-8")
    (package / "core" / "a.py").write_text("from . import b\n", encoding="utf-8")
    (package / "core" / "b.py").write_text("x = 1\n", encoding="utf-8")
    (package / "replay").mkdir()
    (package / "replay" / "__init__.py").write_text("from ..core import a\n", encoding="utf-8")
    done = _run(package)
    assert done.returncode == 0, done.stdout
    assert "no cycle" in done.stdout and "no file over 500 lines" in done.stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "pytest_agentreplay"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_a_planted_cycle_fails_the_check(copy: Path) -> None:
    # canonical is imported by capture; a lazy import back, inside a function, still closes a cycle.
    _append(
        copy / "core" / "canonical.py",
        "\n\ndef _planted() -> object:\n    from . import capture\n\n    return capture\n",
    )
    done = _run(copy)
    assert done.returncode == 1
    assert "import cycle: pytest_agentreplay.core.canonical -> pytest_agentreplay.core.capture" in done.stdout


def test_an_import_of_a_higher_layer_fails_even_for_typing_only(copy: Path) -> None:
    _append(
        copy / "http" / "bodies.py",
        "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..replay.policy import Action\n",
    )
    done = _run(copy)
    assert done.returncode == 1
    assert (
        "pytest_agentreplay.http.bodies" in done.stdout and "pytest_agentreplay.replay.policy" in done.stdout
    )
    assert "sits above it" in done.stdout


def test_a_new_folder_must_be_given_a_layer(copy: Path) -> None:
    (copy / "extras").mkdir()
    (copy / "extras" / "__init__.py").write_text('"""Planted."""\n', encoding="utf-8")
    done = _run(copy)
    assert done.returncode == 1 and "pytest_agentreplay.extras: in no layer" in done.stdout


def test_no_package_file_is_over_500_lines() -> None:
    assert _checker().size_problems(PACKAGE) == []


def test_a_file_over_500_lines_fails_the_check(copy: Path) -> None:
    constants = copy / "core" / "constants.py"
    _append(constants, "# planted\n" * 500)
    length = len(constants.read_text(encoding="utf-8").splitlines())
    done = _run(copy)
    assert done.returncode == 1
    assert (
        f"pytest_agentreplay/core/constants.py: {length} lines, over 500; split it by concern" in done.stdout
    )


def test_the_line_limit_allows_500_lines_and_refuses_501(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "at_limit.py").write_text("x = 1\n" * 500, encoding="utf-8")
    (package / "sub" / "over.py").write_text("x = 1\n" * 501, encoding="utf-8")
    assert _checker().size_problems(package) == ["pkg/sub/over.py: 501 lines, over 500; split it by concern"]


def test_cycles_are_found_with_one_path_through_them() -> None:
    checker = _checker()
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a", "p.d"}, "p.d": set(), "p.e": {"p.e"}}
    assert checker.cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    assert checker.cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_every_folder_says_what_it_owns() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if "__pycache__" in init.parts:
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert docstring and len(docstring.split()) >= 8, f"{init.relative_to(ROOT)} needs a docstring"


def test_every_module_imports_on_its_own_in_a_fresh_interpreter() -> None:
    """Each module, imported first in a process of its own, finds what it needs (no import-order luck)."""
    checker = _checker()
    names = sorted(n for n in checker.modules(PACKAGE) if not n.endswith(".__main__"))
    code = (
        "import importlib, subprocess, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    command = [sys.executable, '-c', f'import {name}']\n"
        "    done = subprocess.run(command, capture_output=True, text=True)\n"
        "    if done.returncode:\n"
        "        failed.append(name + ': ' + done.stderr.strip().splitlines()[-1])\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    optional = {
        "pytest_agentreplay.frameworks.langchain",
        "pytest_agentreplay.frameworks.pydantic_ai",
        "pytest_agentreplay.frameworks.openai_agents",
        "pytest_agentreplay.frameworks.otel",
    }
    done = subprocess.run(
        [sys.executable, "-c", code, *(n for n in names if n not in optional)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout
