"""What users pay for replay, through whole ``python -m pytest`` processes: ours vs the floor and peers.

    python bench/bench_pytest.py [--rows a,b,c,d] [--repeats 3] [--quick] [--json-only] [--markdown-readme]

One test module (``bench/_pytest_workload.py``, copied into a temporary project per row and variant)
makes G plain GETs of small JSON items and N OpenAI-style chat-completions POSTs through httpx, the
conversation resending its whole growing history on every call (system prompt, then ~150-byte user
message and ~150-byte assistant reply per turn). Rows: (a) G=1000 N=200, (b) N=100, (c) N=200,
(d) N=400 (``--quick``: a tenth of that). Variants, each a separate ``python -m pytest -q -p
no:cacheprovider`` process:

- floor: the same test body, every request answered by an ``httpx.MockTransport``; no plugin, no cassette;
- pytest-agentreplay (this checkout, installed as users install it: a wheel without extras, in its own
  virtualenv under ``~/.cache/agentreplay-bench``, reinstalled on every run): recorded once with
  ``--agentreplay-record=all`` against a local HTTP server, then replayed (default mode) with that server
  stopped;
- the same cassettes replayed elsewhere: by clients set up as on another machine (another user agent,
  brotli and zstd accepted), so every request differs from its recording in transport headers, as when
  a developer records and CI replays;
- pytest-recording + vcrpy and cassetter (a Rust-core recorder), each in its own virtualenv under
  ``~/.cache/agentreplay-bench`` (created on first use; a peer that cannot be installed or driven is
  reported as n/a): ``@pytest.mark.vcr``, recorded with ``--record-mode=all``, replayed with
  ``--record-mode=none``. vcrpy's replay of row a takes ~25 s CPU (``--vcr-rows`` picks the rows where
  it is timed; its cassettes are recorded on every row for their size). cassetter writes TOML cassettes
  (``--cassetter-format``): its YAML loader refuses documents of more than 250,000 nodes, which rows a
  and d exceed, and TOML is its faster-loading format anyway.

Each virtualenv times the floor test too (``x own floor`` in the table): every tool is compared with
the floor of the same environment, with the same pytest and httpx. ``--global-python`` runs ours in the
running python instead, with the pytest plugins that pytest-agentreplay does not bring along (dev tools:
hypothesis, xdist...) disabled with ``-p no:NAME`` for the floor and for ours; its floor is heavier than a
virtualenv's (more installed distributions to scan for entry points, another pytest).

GETs go through one shared client by default; ``--gets-via httpx.get`` uses ``httpx.get`` per GET as
written in the issue (each call builds an SSL context, ~25 ms CPU here, which then dominates every
variant, the floor included).

Measured per run, from ``os.wait4``: CPU seconds (user + sys) and peak RSS of the pytest process; and the
bytes of each cassette folder (``.blobs`` included). Timed replays are repeated ``--repeats`` times,
round-robin over the variants so that noise hits all alike; medians are reported. Prints a Markdown table,
the targets, then (last line) one JSON object of ratios and raw medians.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pytest_workload import ELSEWHERE_HEADERS, answer

BENCH = Path(__file__).resolve().parent
ROWS: dict[str, tuple[int, int]] = {"a": (1000, 200), "b": (0, 100), "c": (0, 200), "d": (0, 400)}
QUICK_ROWS: dict[str, tuple[int, int]] = {"a": (100, 20), "b": (0, 10), "c": (0, 20), "d": (0, 40)}
CACHE = Path.home() / ".cache" / "agentreplay-bench"
PEERS = {
    "vcr": ["pytest", "pytest-recording", "vcrpy", "httpx"],
    "cassetter": ["pytest", "cassetter", "httpx"],
}
OUR_DIST = "pytest-agentreplay-suite"
OUR_PLUGIN = "pytest_agentreplay"
RUN_TIMEOUT = 900.0
ELSEWHERE = {"user-agent": "python-httpx/0.99.0", "accept-encoding": "gzip, deflate, br, zstd"}
TARGETS = {
    "plugin_over_floor_a": "<= 1.3",
    "cassetter_over_plugin_a": ">= 1.2",
    "bytes_plugin_over_vcr_a": "<= 0.25",
    "growth_overhead_200_400": "<= 2.2",
    "growth_overhead_200_400_elsewhere": "<= 2.2",
    "growth_bytes_200_400": "<= 2.2",
    "growth_record_overhead_200_400": "<= 2.2",
    "rss_plugin_below_peers_a": "true",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the recording server -------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = -1  # one send per response (flushed by the base class), and no Nagle wait on the socket
    disable_nagle_algorithm = True
    server: CountingServer

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        status, content = answer(self.command, self.path, body)
        with self.server.lock:
            self.server.hits += 1
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits = 0
        self.lock = threading.Lock()


@contextmanager
def serving() -> Iterator[CountingServer]:
    server = CountingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- environments and variants --------------------------------------------------------------------


@dataclass
class Env:
    name: str
    python: str
    versions: dict[str, str] = field(default_factory=dict)
    disable: list[str] = field(default_factory=list)  # ``-p no:NAME`` for plugins that are not under test
    error: str | None = None


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    env: str
    marker: str  # "" for a floor test
    args: tuple[str, ...]  # replay (or floor) arguments
    record_args: tuple[str, ...] = ()
    replays: str | None = None  # the variant whose recording this one replays (it records none)
    environ: tuple[tuple[str, str], ...] = ()  # for its replays


VARIANTS = [
    Variant("floor", "floor", "ours", "", ("-p", f"no:{OUR_PLUGIN}")),
    Variant("plugin", "pytest-agentreplay", "ours", "agentreplay", (), ("--agentreplay-record=all",)),
    # The same cassettes replayed by a client that another machine set up: other transport headers on
    # every request (a newer SDK's user agent, brotli and zstd installed), as when a developer records
    # and CI replays.
    Variant(
        "elsewhere",
        "pytest-agentreplay, replayed elsewhere",
        "ours",
        "agentreplay",
        (),
        replays="plugin",
        environ=((ELSEWHERE_HEADERS, json.dumps(ELSEWHERE)),),
    ),
    Variant("vcr", "pytest-recording", "vcr", "vcr", ("--record-mode=none",), ("--record-mode=all",)),
    # TOML: cassetter's YAML loader refuses a document of more than 250,000 nodes (rows a and d).
    Variant(
        "cassetter",
        "cassetter",
        "cassetter",
        'vcr("test_workload.{cassetter_format}")',
        ("--record-mode=none",),
        ("--record-mode=all",),
    ),
    Variant("vcr_floor", "floor (vcr env)", "vcr", "", ("-p", "no:recording")),
    Variant("cassetter_floor", "floor (cassetter env)", "cassetter", "", ("-p", "no:cassetter")),
]


def query(python: str, code: str, *argv: str) -> str:
    done = subprocess.run([python, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return done.stdout.strip()


VERSIONS = (
    "import importlib.metadata as m, json, sys; print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
)


def our_env(global_python: bool) -> Env:
    """A virtualenv under the cache holding this checkout, installed as users install it (a wheel, no
    extras) next to httpx, and reinstalled on every run; or, with ``global_python``, the running python
    with every pytest plugin that neither we nor our dependencies bring disabled."""
    if global_python:
        dist = importlib.metadata.distribution(OUR_DIST)
        keep = {OUR_DIST.lower()}
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                keep.add(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-"))
        disable = sorted(
            {
                ep.name
                for ep in importlib.metadata.entry_points(group="pytest11")
                if ep.dist is None or ep.dist.name.lower().replace("_", "-") not in keep
            }
        )
        versions = {d: importlib.metadata.version(d) for d in ("pytest", "httpx", OUR_DIST)}
        return Env("ours", sys.executable, versions, disable)
    venv = CACHE / "venv-ours"
    python = str(venv / "bin" / "python")
    checkout = str(BENCH.parent)
    try:
        if not Path(python).exists():
            log(f"creating {venv} (this checkout, httpx)")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
            steps = [["install", "-q", checkout, "httpx"]]
        else:
            steps = [
                ["install", "-q", checkout, "httpx"],
                ["install", "-q", "--no-deps", "--force-reinstall", checkout],
            ]
        for step in steps:  # dependencies first, then this checkout's code as it is now
            done = subprocess.run(
                [python, "-m", "pip", *step], capture_output=True, text=True, timeout=900, cwd=CACHE
            )
            if done.returncode:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return Env("ours", python, error="pip install failed: " + " | ".join(tail))
        versions = json.loads(query(python, VERSIONS, "pytest", "httpx", OUR_DIST))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return Env("ours", python, error=f"{type(exc).__name__}: {exc}")
    return Env("ours", python, versions)


def peer_env(name: str) -> Env:
    """A virtualenv under the cache holding one peer (created, or completed, on first use)."""
    venv = CACHE / f"venv-{name}"
    python = str(venv / "bin" / "python")
    dists = PEERS[name]
    try:
        try:
            versions = json.loads(query(python, VERSIONS, *dists))
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            log(f"creating {venv} ({' '.join(PEERS[name])})")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
            done = subprocess.run(
                [python, "-m", "pip", "install", "-q", *PEERS[name]],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return Env(name, python, error="pip install failed: " + " | ".join(tail))
            versions = json.loads(query(python, VERSIONS, *dists))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return Env(name, python, error=f"{type(exc).__name__}: {exc}")
    return Env(name, python, versions)


# --- projects and runs ----------------------------------------------------------------------------


@dataclass
class Run:
    cpu: float
    rss_mb: float
    ok: bool
    output: str


def write_project(folder: Path, variant: Variant, base: str, sizes: tuple[int, int], args: Any) -> None:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    shutil.copyfile(BENCH / "_pytest_workload.py", folder / "workload.py")
    marker = variant.marker.format(cassetter_format=args.cassetter_format)
    floor = not marker
    (folder / "test_workload.py").write_text(
        "import pytest\n\nimport workload\n\n\n"
        + (f"@pytest.mark.{marker}\n" if marker else "")
        + "def test_workload():\n"
        + f"    workload.converse({base!r}, {sizes[0]}, {sizes[1]}, floor={floor}, "
        + f"gets_via={args.gets_via!r})\n"
    )


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "PYTEST_ADDOPTS"}
    env.pop("PYTEST_PLUGINS", None)
    # As on a developer's machine: compiled and assertion-rewritten modules are cached between runs (the
    # recording run warms the cache). With PYTHONDONTWRITEBYTECODE set, pytest rewrites every module of a
    # plugin package at every start: ~0.3 s more for pytest-agentreplay's ~50 modules, for every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_pytest(
    env: Env, folder: Path, args: tuple[str, ...], environ: tuple[tuple[str, str], ...] = ()
) -> Run:
    """One ``python -m pytest`` process in ``folder``: its CPU seconds and peak RSS from ``os.wait4``."""
    command = [env.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += [a for name in env.disable for a in ("-p", f"no:{name}")]
    command += list(args)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            command,
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env() | dict(environ),
            start_new_session=True,
        )
        timer = threading.Timer(RUN_TIMEOUT, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode(errors="replace")
    return Run(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode == 0, output)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def failure(run: Run) -> str:
    """The test's error lines (``E ...``) and pytest's closing line."""
    lines = [line.strip() for line in run.output.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return " / ".join([*errors[-3:], *lines[-1:]])[:600]


# --- the benchmark --------------------------------------------------------------------------------


@dataclass
class Cell:
    cpu: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    bytes: int | None = None
    record_cpu: float | None = None  # the one recording run (against the local server)
    note: str | None = None  # why the cell has no figures
    warning: str | None = None

    def median_cpu(self) -> float | None:
        return statistics.median(self.cpu) if self.cpu else None

    def median_rss(self) -> float | None:
        return statistics.median(self.rss) if self.rss else None


def bench(args: argparse.Namespace) -> tuple[dict[str, dict[str, Cell]], dict[str, Env], dict[str, Any]]:
    sizes = QUICK_ROWS if args.quick else ROWS
    rows = args.rows
    envs = {"ours": our_env(args.global_python)}
    for name in ("vcr", "cassetter"):
        envs[name] = peer_env(name)
        if envs[name].error:
            log(f"{name}: not available: {envs[name].error}")
    cells: dict[str, dict[str, Cell]] = {row: {v.key: Cell() for v in VARIANTS} for row in rows}
    for row in rows:
        for v in VARIANTS:
            error = envs[v.env].error
            if error:
                cells[row][v.key].note = f"n/a ({error})"
    vcr_rows = set(args.vcr_rows)
    with tempfile.TemporaryDirectory(prefix="agentreplay-bench-") as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp)
        if args.keep:
            shutil.rmtree(root, ignore_errors=True)
            log(f"projects kept in {root}")
        with serving() as server:
            base = f"http://127.0.0.1:{server.server_port}"
            for row in rows:
                gets, calls = sizes[row]
                for v in VARIANTS:
                    cell = cells[row][v.key]
                    folder = root / row / v.key
                    write_project(folder, v, base, sizes[row], args)
                    if v.replays is not None:
                        source = cells[row][v.replays]
                        if source.bytes is None:
                            cell.note = cell.note or f"n/a (no recording of {v.replays})"
                        else:
                            shutil.copytree(root / row / v.replays / "cassettes", folder / "cassettes")
                    if cell.note or not v.marker or v.replays is not None:
                        continue
                    before = server.hits
                    started = time.perf_counter()
                    recorded = run_pytest(envs[v.env], folder, v.record_args)
                    hits = server.hits - before
                    if not recorded.ok or hits != gets + calls:
                        cell.note = f"record failed ({hits} requests served): {failure(recorded)}"
                        log(f"row {row} {v.label}: {cell.note}")
                        continue
                    cell.bytes = folder_bytes(folder / "cassettes")
                    cell.record_cpu = recorded.cpu
                    log(
                        f"row {row} {v.label}: recorded {hits} exchanges in "
                        f"{time.perf_counter() - started:.1f} s ({recorded.cpu:.2f} s CPU), "
                        f"{cell.bytes:,} bytes"
                    )
        # The server is gone: a request a replay does not serve from its cassette fails the test.
        for row in rows:
            for v in VARIANTS:
                cell = cells[row][v.key]
                if v.key == "vcr" and row not in vcr_rows and not cell.note:
                    cell.note = "not timed (--vcr-rows)"
                if cell.note:
                    continue
                warm = run_pytest(envs[v.env], root / row / v.key, v.args, v.environ)  # bytecode, page cache
                if not warm.ok:
                    cell.note = f"replay failed: {failure(warm)}"
                    log(f"row {row} {v.label}: {cell.note}")
        for repeat in range(args.repeats):
            for row in rows:
                for v in VARIANTS:
                    cell = cells[row][v.key]
                    if cell.note:
                        continue
                    run = run_pytest(envs[v.env], root / row / v.key, v.args, v.environ)
                    if not run.ok:  # no figures from a variant that does not replay reliably
                        cell.note = f"replay failed: {failure(run)}"
                        cell.cpu.clear()
                        cell.rss.clear()
                        log(f"row {row} {v.label}: {cell.note}")
                        continue
                    cell.cpu.append(run.cpu)
                    cell.rss.append(run.rss_mb)
                    log(f"repeat {repeat + 1}/{args.repeats} row {row} {v.label}: {run.cpu:.2f} s CPU")
        for row in rows:
            for v in VARIANTS:
                cell = cells[row][v.key]
                if cell.bytes is not None and cell.cpu:
                    after = folder_bytes(root / row / v.key / "cassettes")
                    if after != cell.bytes:
                        cell.warning = (
                            f"replay changed the cassette folder: {cell.bytes:,} -> {after:,} bytes"
                        )
                        log(f"row {row} {v.label}: {cell.warning}")
    return cells, envs, sizes


# --- reporting ------------------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def figures(cells: dict[str, dict[str, Cell]]) -> dict[str, Any]:
    def cpu(row: str, key: str) -> float | None:
        return cells[row][key].median_cpu() if row in cells else None

    def size(row: str, key: str) -> int | None:
        return cells[row][key].bytes if row in cells else None

    def overhead(row: str, key: str = "plugin") -> float | None:
        ours, floor = cpu(row, key), cpu(row, "floor")
        return ours - floor if ours is not None and floor is not None else None

    def record_overhead(row: str) -> float | None:
        ours = cells[row]["plugin"].record_cpu if row in cells else None
        floor = cpu(row, "floor")
        return ours - floor if ours is not None and floor is not None else None

    rss_ours = cells["a"]["plugin"].median_rss() if "a" in cells else None
    peers = [cells["a"][k].median_rss() for k in ("vcr", "cassetter")] if "a" in cells else []
    known = [p for p in peers if p is not None]
    below = all(rss_ours < p for p in known) if rss_ours is not None and known else None
    out: dict[str, Any] = {
        "plugin_over_floor_a": ratio(cpu("a", "plugin"), cpu("a", "floor")),
        "cassetter_over_plugin_a": ratio(cpu("a", "cassetter"), cpu("a", "plugin")),
        "bytes_plugin_over_vcr_a": ratio(size("a", "plugin"), size("a", "vcr")),
        "growth_overhead_200_400": ratio(overhead("d"), overhead("c")),
        "growth_overhead_200_400_elsewhere": ratio(overhead("d", "elsewhere"), overhead("c", "elsewhere")),
        "growth_bytes_200_400": ratio(size("d", "plugin"), size("c", "plugin")),
        "growth_record_overhead_200_400": ratio(record_overhead("d"), record_overhead("c")),
        "rss_plugin_below_peers_a": below,
    }
    overhead_cassetter = None
    if cpu("a", "cassetter") is not None and cpu("a", "cassetter_floor") is not None:
        overhead_cassetter = cpu("a", "cassetter") - cpu("a", "cassetter_floor")  # type: ignore[operator]
    out["cassetter_over_plugin_a_net_of_floors"] = ratio(overhead_cassetter, overhead("a"))
    return out


def verdict(key: str, value: Any) -> str:
    if value is None:
        return "n/a"
    target = TARGETS[key]
    if target == "true":
        return "met" if value else "NOT MET"
    op, bound = target.split()
    return "met" if (value <= float(bound) if op == "<=" else value >= float(bound)) else "NOT MET"


def fmt_cpu(cell: Cell, floor: Cell | None) -> str:
    value = cell.median_cpu()
    if value is None:
        note = cell.note or ""
        return "skipped" if note.startswith("not timed") else "FAILED" if "failed" in note else "n/a"
    own_floor = floor.median_cpu() if floor else None
    return f"{value:.2f} ({value / own_floor:.2f}x)" if own_floor else f"{value:.2f}"


def fmt_rss(cell: Cell) -> str:
    value = cell.median_rss()
    return "-" if value is None else f"{value:.0f}"


def fmt_record(cell: Cell) -> str:
    return "-" if cell.record_cpu is None else f"{cell.record_cpu:.2f}"


def fmt_bytes(cell: Cell) -> str:
    if cell.bytes is None:
        return "-"
    return f"{cell.bytes / 1e6:.2f} MB" if cell.bytes >= 1e6 else f"{cell.bytes:,}"


def table(cells: dict[str, dict[str, Cell]], sizes: dict[str, tuple[int, int]]) -> list[str]:
    lines = [
        "| row | GETs + model calls | floor CPU s | pytest-agentreplay CPU s (x floor) "
        "| replayed elsewhere (x floor) "
        "| pytest-recording CPU s (x own floor) | cassetter CPU s (x own floor) "
        "| peak RSS MB floor / ours / vcr / cassetter | cassette bytes ours | pytest-recording | cassetter "
        "| ours, recording CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row, c in cells.items():
        gets, calls = sizes[row]
        rss = " / ".join(fmt_rss(c[k]) for k in ("floor", "plugin", "vcr", "cassetter"))
        lines.append(
            f"| {row} | {gets} + {calls} | {fmt_cpu(c['floor'], None)} | {fmt_cpu(c['plugin'], c['floor'])} "
            f"| {fmt_cpu(c['elsewhere'], c['floor'])} "
            f"| {fmt_cpu(c['vcr'], c['vcr_floor'])} | {fmt_cpu(c['cassetter'], c['cassetter_floor'])} "
            f"| {rss} | {fmt_bytes(c['plugin'])} | {fmt_bytes(c['vcr'])} | {fmt_bytes(c['cassetter'])} "
            f"| {fmt_record(c['plugin'])} |"
        )
    return lines


def target_lines(out: dict[str, Any]) -> list[str]:
    names = {
        "plugin_over_floor_a": "CPU, ours / floor, row a",
        "cassetter_over_plugin_a": "CPU, cassetter / ours, row a (>1: we are faster)",
        "bytes_plugin_over_vcr_a": "bytes, ours / pytest-recording, row a",
        "growth_overhead_200_400": "CPU over floor, ours, N=400 / N=200",
        "growth_overhead_200_400_elsewhere": "CPU over floor, ours replayed elsewhere, N=400 / N=200",
        "growth_bytes_200_400": "bytes, ours, N=400 / N=200",
        "growth_record_overhead_200_400": "recording CPU over the floor, ours, N=400 / N=200 (one run each)",
        "rss_plugin_below_peers_a": "peak RSS, ours below every peer, row a",
    }
    lines = []
    for key, name in names.items():
        value = out[key]
        shown = "n/a" if value is None else str(value).lower() if isinstance(value, bool) else f"{value:.3f}"
        lines.append(f"- {name}: {shown} (target {TARGETS[key]}): {verdict(key, value)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", default="a,b,c,d", help="rows to run, among a,b,c,d")
    parser.add_argument("--repeats", type=int, default=None, help="timed replays per variant (default 3)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes, 1 repeat: a smoke run")
    parser.add_argument("--vcr-rows", default="a,b,c,d", help="rows where pytest-recording's replay is timed")
    parser.add_argument("--cassetter-format", choices=["toml", "yaml"], default="toml")
    parser.add_argument("--gets-via", choices=["client", "httpx.get"], default="client")
    parser.add_argument(
        "--keep", metavar="DIR", help="build the projects in DIR (emptied first) and keep them"
    )
    parser.add_argument(
        "--global-python",
        action="store_true",
        help="run ours in this python (other pytest plugins disabled) rather than in its own virtualenv",
    )
    parser.add_argument("--json-only", action="store_true", help="print the JSON line only")
    parser.add_argument("--markdown-readme", action="store_true", help="print the table and targets only")
    args = parser.parse_args()
    args.rows = [r for r in args.rows.split(",") if r]
    args.vcr_rows = [r for r in args.vcr_rows.split(",") if r]
    if unknown := sorted(set(args.rows) - set(ROWS)):
        parser.error(f"unknown rows: {', '.join(unknown)} (choose among a,b,c,d)")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    started = time.perf_counter()
    cells, envs, sizes = bench(args)
    wall = time.perf_counter() - started
    out = figures(cells)
    medians = {
        row: {
            key: {"cpu_s": cell.median_cpu(), "peak_rss_mb": cell.median_rss(), "bytes": cell.bytes}
            | ({"note": cell.note} if cell.note else {})
            | ({"warning": cell.warning} if cell.warning else {})
            for key, cell in c.items()
        }
        for row, c in cells.items()
    }
    for c in medians.values():
        for m in c.values():
            for k in ("cpu_s", "peak_rss_mb"):
                m[k] = None if m[k] is None else round(m[k], 3)
    out |= {
        "targets": TARGETS,
        "medians": medians,
        "sizes": {row: {"gets": sizes[row][0], "calls": sizes[row][1]} for row in cells},
        "repeats": args.repeats,
        "quick": args.quick,
        "gets_via": args.gets_via,
        "versions": {name: env.versions for name, env in envs.items()},
        "disabled_plugins": envs["ours"].disable,
        "wall_s": round(wall, 1),
    }
    if not args.json_only:
        lines = [*table(cells, sizes), "", *target_lines(out)]
        if not args.markdown_readme:
            head = (
                f"whole pytest processes, replay, medians of {args.repeats} (CPU: user + sys of the "
                f"process); GETs via {args.gets_via}; wall {wall:.0f} s"
            )
            versions = "; ".join(
                f"{name}: " + (env.error or ", ".join(f"{d} {v}" for d, v in env.versions.items()))
                for name, env in envs.items()
            )
            notes = list(
                dict.fromkeys(
                    f"- {key}: {text}" if text.startswith("n/a") else f"- row {row}, {key}: {text}"
                    for row, c in cells.items()
                    for key, cell in c.items()
                    for text in (cell.note, cell.warning)
                    if text and not text.startswith("not timed")
                )
            )
            lines = [head, versions]
            if envs["ours"].disable:
                lines.append(f"disabled in the global python: {' '.join(envs['ours'].disable)}")
            lines.append("")
            lines += [*table(cells, sizes), "", *target_lines(out), *notes]
        print("\n".join(lines))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
