"""Start-up cost of the plugin for a pytest session that never uses it.

Runs ``pytest --collect-only`` on a tiny project with and without ``-p no:pytest_agentreplay``,
alternating the two, and prints the median wall-clock times and the difference (target: <= 30 ms).
Last line: one JSON object of the figures.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main(runs: int = 15) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_plain.py").write_text("def test_one():\n    assert True\n")
        timed([], project)  # warm the file cache and bytecode
        with_plugin: list[float] = []
        without: list[float] = []
        for _ in range(runs):
            with_plugin.append(timed([], project))
            without.append(timed(["-p", "no:pytest_agentreplay"], project))
    a, b = statistics.median(with_plugin), statistics.median(without)
    print(f"{'pytest --collect-only':<40}{'median of ' + str(runs):>16}")
    print(f"{'with pytest_agentreplay':<40}{a * 1000:>13.1f} ms")
    print(f"{'without (-p no:pytest_agentreplay)':<40}{b * 1000:>13.1f} ms")
    print(f"{'added by the plugin':<40}{(a - b) * 1000:>13.1f} ms   (target <= 30 ms)")
    print(
        json.dumps(
            {
                "startup_with_ms": round(a * 1000, 1),
                "startup_without_ms": round(b * 1000, 1),
                "startup_added_ms": round((a - b) * 1000, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
