"""The benchmark scripts in ``bench/`` stay runnable: each imports against the package as it is now (a
moved module breaks a script nobody runs in CI), and the cheap ones run to their JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_there_are_benchmarks() -> None:
    assert {p.stem for p in SCRIPTS} >= {"bench_pytest", "bench_load", "bench_replay", "bench_runtime_values"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_bench_script_imports(script: Path) -> None:
    """Importing a script runs its imports, not its benchmark (each guards ``main`` with ``__main__``)."""
    code = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        f"spec = importlib.util.spec_from_file_location('bench_under_test', {str(script)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['bench_under_test'] = module  # dataclasses look their module up\n"
        "spec.loader.exec_module(module)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_runtime_values_bench_runs_to_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_runtime_values.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["reads"] > 0 and figures["time.time_recording_ns"] > 0
