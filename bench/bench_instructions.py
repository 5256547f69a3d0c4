"""Per-test replay cost counted in instructions, not timed: the suite-shape rows under valgrind.

    python bench/bench_instructions.py [--tests 5] [--only-ours] [--global-python] [--keep DIR]

On a shared 2-core machine the CPU time of one ``python -m pytest`` process moves by 10-25% from run to
run, while a plugin's cost per test is a few percent of the test's: ``bench_pytest.py``'s "ms per test
over the floor" then moves by more than the figure itself. Instructions executed do not depend on the
machine's load. This script builds the suite-shape projects of ``bench_pytest.py`` (the same workload,
variants and virtualenvs: an agent on the ``openai`` SDK per test, 4 chat completions and 2 GETs each),
records them, and replays each variant twice under ``valgrind --tool=callgrind`` (Debian's ``valgrind``
package), with N and 2N tests. The difference of the two counts, over N, is what one more test costs
(start-up and collection cancel out); a tool's cost per test over its own floor is its figure minus the
floor's, in the same virtualenv.

Instructions are turned into milliseconds at the floor's own rate: the native CPU time of its 2N-test
replay (median of ``--timed`` runs) over its instruction count. That is an estimate, quoted as such; the
instruction counts and their ratios are exact.

Each callgrind run takes a few minutes (about 50 times the native run); they run two at a time (the
counts do not depend on the load).

``--rows a,c,d`` counts bench_pytest's one-test rows instead (one process each: 1,000 GETs + 200 model
calls, 200 calls, 400 calls): each tool's whole process over its floor's, the ratio their target caps at
1.3x, counted rather than timed. Start-up, imports and the cassette's load are in these counts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pytest as bp  # the sibling script: its workload, variants and virtualenvs

PEER_KEYS = ("plugin", "vcr", "cassetter")
ONE_TEST_ROWS = ("a", "b", "c", "d")
FLOOR_KEYS = ("floor", "vcr_floor", "cassetter_floor")


def callgrind(env: bp.Env, folder: Path, args: tuple[str, ...]) -> int | None:
    """Instructions executed by one ``python -m pytest`` replay in ``folder``; None if it failed."""
    with tempfile.TemporaryDirectory(prefix="agentreplay-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--cache-sim=no", f"--callgrind-out-file={out}"]
        command += [env.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        command += [a for name in env.disable for a in ("-p", f"no:{name}")]
        command += list(args)
        # One hash seed for every count: with random seeds, dict and set layouts (and when the collector
        # runs) move a process's count by tens of millions from run to run, more than a change measured.
        environ = {**bp.child_env(True), "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, cwd=folder, env=environ, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0 or not out.exists():
            tail = f"{done.stdout.strip()[-300:]} {done.stderr.strip()[-300:]}"
            bp.log(f"{folder}: callgrind run failed: {tail}")
            return None
        found = re.search(r"^summary:\s*(\d+)", out.read_text(errors="replace"), re.MULTILINE)
        return int(found.group(1)) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tests", type=int, default=5, help="N: the rows have N and 2N tests (default 5)")
    parser.add_argument("--timed", type=int, default=3, help="native runs of the floor, for the ms rate")
    parser.add_argument("--only-ours", action="store_true", help="the floor and ours only (no peers)")
    parser.add_argument(
        "--peers",
        default="vcr,cassetter",
        help="peers counted, among vcr,cassetter (vcrpy's replay of row a runs ~20 min under callgrind)",
    )
    parser.add_argument("--global-python", action="store_true", help="ours in this python, not a virtualenv")
    parser.add_argument("--keep", metavar="DIR", help="build the projects in DIR (emptied first), keep them")
    parser.add_argument("--json-only", action="store_true", help="print the JSON line only")
    parser.add_argument(
        "--rows",
        default="suite",
        help=f"suite (default; N and 2N tests), or one-test rows among {','.join(ONE_TEST_ROWS)}",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    n = args.tests
    if args.rows == "suite":
        sizes = {"s1": bp.Shape("suite", 2, 4, n), "s2": bp.Shape("suite", 2, 4, 2 * n)}
    else:
        rows = [r for r in args.rows.split(",") if r]
        if unknown := sorted(set(rows) - set(ONE_TEST_ROWS)):
            parser.error(f"unknown rows: {', '.join(unknown)} (suite, or among {','.join(ONE_TEST_ROWS)})")
        sizes = {row: bp.ROWS[row] for row in rows}
    # What bench_pytest's project builders and recorder read.
    options = argparse.Namespace(
        rows=list(sizes),
        quick=False,
        global_python=args.global_python,
        only_ours=args.only_ours,
        baseline_tree=None,
        gets_via="client",
        openai_client="sdk",
        cassetter_format="toml",
        bytecode=True,
    )
    peers = [p for p in args.peers.split(",") if p]
    if unknown := sorted(set(peers) - set(bp.PEERS)):
        parser.error(f"unknown peers: {', '.join(unknown)} (choose among {','.join(bp.PEERS)})")
    envs = bp.environments(options, peers)
    chosen = [
        v
        for v in bp.variants(False)
        if v.key in PEER_KEYS + FLOOR_KEYS and v.env in envs and not envs[v.env].error
    ]
    cells = {row: {v.key: bp.Cell() for v in chosen} for row in sizes}
    with tempfile.TemporaryDirectory(prefix="agentreplay-bench-instr-") as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp)
        if args.keep:
            shutil.rmtree(root, ignore_errors=True)
        bp.record(cells, root, envs, chosen, sizes, options)
        jobs = [(row, v) for row in sizes for v in chosen if not cells[row][v.key].note]
        for row, v in jobs:  # bytecode compiled and the page cache warm, as in bench_pytest
            warm = bp.run_pytest(envs[v.env], root / row / v.key, v.args, v.environ, True)
            if not warm.ok:
                cells[row][v.key].note = f"replay failed: {bp.failure(warm)}"
        jobs = [(row, v) for row, v in jobs if not cells[row][v.key].note]

        def count(job: tuple[str, bp.Variant]) -> int | None:
            row, v = job
            return callgrind(envs[v.env], root / row / v.key, v.args)

        with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
            counts = dict(zip([(row, v.key) for row, v in jobs], pool.map(count, jobs), strict=True))
        if args.rows != "suite":
            report_rows(counts, chosen, sizes, args.json_only)
            return
        floor = next(v for v in chosen if v.key == "floor")
        native = [
            bp.run_pytest(envs[floor.env], root / "s2" / "floor", floor.args).cpu for _ in range(args.timed)
        ]
    per_test = {
        key: (counts[("s2", key)] - counts[("s1", key)]) / n
        for key in {v.key for v in chosen}
        if counts.get(("s1", key)) is not None and counts.get(("s2", key)) is not None
    }
    floor_total = counts.get(("s2", "floor"))
    ns_per_instruction = statistics.median(native) * 1e9 / floor_total if floor_total else None
    out: dict[str, object] = {
        "tests": [n, 2 * n],
        "instructions_per_test": per_test,
        "counts": {f"{row}/{key}": value for (row, key), value in counts.items()},
    }
    rows = []
    for v in chosen:
        if v.key not in PEER_KEYS or v.key not in per_test or v.floor not in per_test:
            continue
        over = per_test[v.key] - per_test[v.floor]
        ms = over * ns_per_instruction / 1e6 if ns_per_instruction else None
        share = over / per_test[v.floor]
        out[f"over_floor_{v.key}"] = {"instructions": round(over), "share": share, "ms_estimate": ms}
        rows.append(
            f"| {v.label} | {per_test[v.floor] / 1e6:,.1f} M | {per_test[v.key] / 1e6:,.1f} M | "
            f"{over / 1e6:+,.2f} M ({over / per_test[v.floor]:+.1%}) | "
            + (f"{ms:+.2f} ms" if ms is not None else "n/a")
            + " |"
        )
    ours = out.get("over_floor_plugin")
    for peer in ("vcr", "cassetter"):
        theirs = out.get(f"over_floor_{peer}")
        if isinstance(ours, dict) and isinstance(theirs, dict) and theirs["instructions"] > 0:
            out[f"plugin_over_{peer}"] = ours["instructions"] / theirs["instructions"]
    if not args.json_only:
        print(
            f"instructions per test (replays of {2 * n} and {n} tests under callgrind, difference over {n}); "
            f"ms at the floor's native rate ({statistics.median(native):.2f} s CPU for {2 * n} tests, "
            f"median of {len(native)})\n"
        )
        print("| tool | its floor per test | the tool per test | over its floor | estimate |")
        print("|---|---|---|---|---|")
        print("\n".join(rows))
        for peer in ("vcr", "cassetter"):
            if f"plugin_over_{peer}" in out:
                ratio = out[f"plugin_over_{peer}"]
                print(f"- ours / {peer} (instructions over each one's floor): {ratio:.2f}")
        estimate = ours.get("ms_estimate") if isinstance(ours, dict) else None
        met = isinstance(estimate, float) and estimate <= 5
        print(f"- ours at most 5 ms per test over the floor (estimate): {'met' if met else 'NOT MET'}")
    print(json.dumps(out))


def report_rows(
    counts: dict[tuple[str, str], int | None],
    chosen: list[bp.Variant],
    sizes: dict[str, bp.Shape],
    json_only: bool,
) -> None:
    """One-test rows: each tool's whole process against its own floor's, in instructions."""
    out: dict[str, object] = {"counts": {f"{row}/{key}": value for (row, key), value in counts.items()}}
    lines = []
    for row, shape in sizes.items():
        for v in chosen:
            if v.key not in PEER_KEYS:
                continue
            tool, floor = counts.get((row, v.key)), counts.get((row, v.floor))
            if tool is None or floor is None:
                continue
            out[f"{v.key}_over_floor_{row}"] = tool / floor
            out[f"{v.key}_net_{row}"] = tool - floor
            lines.append(
                f"| {row} | {shape.gets} + {shape.calls} | {v.label} | {floor / 1e9:.2f} G "
                f"| {tool / 1e9:.2f} G | {tool / floor:.2f}x |"
            )
    if not json_only:
        print("whole pytest processes under callgrind, one replay each (instructions)\n")
        print("| row | GETs + model calls | tool | its floor | the tool | x floor |")
        print("|---|---|---|---|---|---|")
        print("\n".join(lines))
        for row in sizes:
            ratio = out.get(f"plugin_over_floor_{row}")
            if isinstance(ratio, float):
                verdict = "met" if ratio <= 1.3 else "NOT MET"
                print(f"- row {row}, ours at most 1.3x the floor: {verdict} ({ratio:.2f}x)")
            ours, theirs = out.get(f"plugin_net_{row}"), out.get(f"cassetter_net_{row}")
            if isinstance(ours, int) and isinstance(theirs, int) and ours > 0:
                verdict = "met" if theirs >= ours else "NOT MET"
                print(f"- row {row}, ahead of cassetter net of floors: {verdict} ({theirs / ours:.2f})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
