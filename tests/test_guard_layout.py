"""The guard's place in the layers: a folder of its own right above ``core`` (it imports ``core`` and the
exception tree only), so that every layer that needs it (http, replay, intercept, the plugin) may."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / ".ci" / "check_imports.py"


def _check_with(tmp_path: Path, module: str, planted: str) -> subprocess.CompletedProcess[str]:
    copy = tmp_path / "pytest_agentreplay"
    shutil.copytree(ROOT / "pytest_agentreplay", copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / module
    path.write_text(path.read_text(encoding="utf-8") + planted, encoding="utf-8")
    command = [sys.executable, str(CHECKER), str(copy)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_guard_may_not_import_http(tmp_path: Path) -> None:
    done = _check_with(tmp_path, "guard/decision.py", "\n\nfrom ..http import bodies\n")
    assert done.returncode == 1
    assert (
        "pytest_agentreplay.guard.decision (layer ['guard']) imports pytest_agentreplay.http.bodies"
        in done.stdout
    ), done.stdout
    assert "in no layer" not in done.stdout, done.stdout


def test_core_may_not_import_the_guard(tmp_path: Path) -> None:
    done = _check_with(tmp_path, "core/commands.py", "\n\nfrom ..guard import decision\n")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    line = next(text for text in lines if text.startswith("pytest_agentreplay.core.commands (layer"))
    assert "'core'" in line and "imports pytest_agentreplay.guard.decision" in line, done.stdout
    assert "'guard'" in line.split("imports", 1)[1], done.stdout
