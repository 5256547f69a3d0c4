"""What one more replayed GET costs, counted in instructions under callgrind, per checkout (a script).

    python bench/bench_per_get.py TREE [TREE ...]

For each TREE (a checkout of this repository, its package imported through ``PYTHONPATH``) the script
replays 200 and then 1,200 recorded GETs through one real ``httpx.Client()`` (default transport, its TLS
context included) in two processes under ``valgrind --tool=callgrind`` (``PYTHONHASHSEED=0``, after one
unmeasured run that compiles the bytecode). Both processes build the same 1,200 recorded exchanges, so
start-up, imports and the recording cancel out: (I(1,200) - I(200)) / 1,000 is the cost of one GET, the
client's own work included. Trees side by side give what a change of the interception costs per request
(docs/numbers.md, "httpx through respx": the respx prototype against the transport patch).

Prints one line per tree, then (last line) one JSON object: tree -> instructions per GET.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SIZES = (200, 1200)


def play(n: int) -> None:
    """In the child: replay the first ``n`` of 1,200 recorded GETs (the tree's package is already first)."""
    import httpx

    # The tree's package first: bench_replay puts this script's checkout on sys.path, which must not win.
    from pytest_agentreplay.core.capture import Recorder, RunContext, pop_active, push_active
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.intercept import install

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_replay import MemoryCassette, recorded_reads, url_of

    events = recorded_reads(SIZES[-1])
    uninstall = install()
    ctx = RunContext(Recorder(RunMeta(run_id="replay")), mode="regression", recorded=MemoryCassette(events))
    token = push_active(ctx)
    try:
        with httpx.Client() as client:
            for i in range(n):
                assert client.get(url_of(i)).json()["id"] == i
    finally:
        pop_active(ctx, token)
        uninstall()
    assert not ctx.failures, list(ctx.failures)


def counted(tree: Path, n: int) -> int:
    """Instructions of one child process replaying ``n`` GETs from ``tree``."""
    with tempfile.TemporaryDirectory(prefix="agentreplay-per-get-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--cache-sim=no", f"--callgrind-out-file={out}"]
        command += [sys.executable, __file__, "--play", str(n)]
        environ = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
        subprocess.run(command, env=environ, check=True, capture_output=True)
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no total in the callgrind output of {tree}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--play", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.play is not None:
        play(args.play)
        return
    figures: dict[str, float] = {}
    for tree in args.trees:
        counted(tree, SIZES[0])  # compiles the bytecode: not counted
        small, large = (counted(tree, n) for n in SIZES)
        figures[str(tree)] = per_get = (large - small) / (SIZES[1] - SIZES[0])
        print(f"{tree}: {small:,} and {large:,} instructions, {per_get:,.0f} per GET", flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
