"""What users pay for replay, through whole ``python -m pytest`` processes: ours vs the floor and peers.

    python bench/bench_pytest.py [--rows a,b,c,d,s1,s2] [--repeat 3] [--quick] [--no-bytecode]
                                 [--baseline-tree PATH [--only-ours]] [--json-only] [--markdown-readme]

Judging a change of the package against the commit before it, side by side in one run:

    git worktree add /tmp/bench-old COMMIT
    python bench/bench_pytest.py --baseline-tree /tmp/bench-old --only-ours --rows a,c,d,s1,s2
    git worktree remove /tmp/bench-old

The test bodies live in ``bench/_pytest_workload.py``, copied into a temporary project per row and
variant. Rows:

- a-d, one long test: G plain GETs of small JSON items and N OpenAI-style chat-completions POSTs through
  ``httpx``, the conversation resending its whole growing history on every call (system prompt, then
  ~150-byte user message and ~150-byte assistant reply per turn): (a) G=1000 N=200, (b) N=100, (c) N=200,
  (d) N=400 (``--quick``: a tenth of that);
- s1, s2, the shape of a suite: 100 and 200 tests (``--quick``: 10 and 20) in one pytest process, each
  an agent on the ``openai`` SDK making 4 chat completions with a tool call each, and 2 GETs from its
  tools; reported per test (ms per test over the floor).

The floor builds its clients as users do: a real ``httpx.Client()`` and a real ``openai.OpenAI(...)``,
each with its TLS context (``load_verify_locations``); only ``handle_request`` of the
``HTTPTransport`` classes answers from memory. Every tool runs that same test body; no plugin, no
cassette for the floor. Variants, each a separate ``python -m pytest -q -p no:cacheprovider`` process:

- pytest-agentreplay (this checkout, installed as users install it: a wheel without extras, in its own
  virtualenv under ``~/.cache/agentreplay-bench``, reinstalled on every run): recorded once with
  ``--agentreplay-record=all`` against a local HTTP server, then replayed (default mode) with that server
  stopped;
- the same cassettes replayed elsewhere: by clients set up as on another machine (another user agent,
  brotli and zstd accepted), so every request differs from its recording in transport headers, as when
  a developer records and CI replays;
- with ``--baseline-tree PATH``, "ours (baseline)": another checkout of the package (the tree before a
  change: ``git worktree add /tmp/bench-old COMMIT``), installed the same way in a virtualenv of its own
  with the very versions of every other distribution that ours has (``pip freeze`` as constraints), its
  own cassettes recorded by it; its overhead is taken over ours' floor (the same pytest, httpx and
  openai) and printed beside ours with the ratio ours / baseline of the overheads. A virtualenv rather
  than ``PYTHONPATH``: pytest marks for assertion rewriting the modules that the installed distribution
  lists, so a tree put first on the path would be rewritten (or not) by the other tree's file list;
- pytest-recording + vcrpy and cassetter (a Rust-core recorder), each in its own virtualenv under
  ``~/.cache/agentreplay-bench`` (created on first use; a peer that cannot be installed or driven is
  reported as n/a): ``@pytest.mark.vcr``, recorded with ``--record-mode=all``, replayed with
  ``--record-mode=none``. vcrpy's replay of row a takes ~25 s CPU (``--vcr-rows`` picks the rows where
  it is timed; its cassettes are recorded on every row for their size). cassetter writes TOML cassettes
  (``--cassetter-format``): its YAML loader refuses documents of more than 250,000 nodes, which rows a
  and d exceed, and TOML is its faster-loading format anyway.

Each peer's virtualenv times the floor test too (``x own floor``): every tool is compared with the floor
of the same environment, with the same pytest, httpx and openai. ``--global-python`` runs ours in the
running python instead, with the pytest plugins that pytest-agentreplay does not bring along (dev tools:
hypothesis, xdist...) disabled with ``-p no:NAME`` for the floor and for ours; its floor is heavier than a
virtualenv's (more installed distributions to scan for entry points, another pytest).

Compiled modules are cached between runs by default, as on a developer's machine (the recording run
warms the cache); ``--no-bytecode`` sets ``PYTHONDONTWRITEBYTECODE=1`` for every process, as CI images
do, after deleting what pytest rewrote and cached in the virtualenvs in earlier runs (it still reads
those): pytest then rewrites the modules of other plugin packages at every start (ours load without its
rewriting, through ``pytest_agentreplay/plain_import.py``, bar the three it loads first).

GETs of rows a-d go through one shared client by default; ``--gets-via httpx.get`` uses ``httpx.get``
per GET (a client, and its TLS context, per GET; the floor included). ``--openai-client httpx`` hands the
SDK ``http_client=httpx.Client()`` instead of letting it build its own (``httpx2``) client.

Measured per run, from ``os.wait4``: CPU seconds (user + sys) and peak RSS of the pytest process; and the
bytes of each cassette folder (``.blobs`` included). Timed replays are repeated ``--repeat`` times,
round-robin over the variants (the order reversed every other round) so that noise hits all alike;
medians are reported. Whole processes on a shared machine are noisy: judge a change of a few percent
on the full sizes (not ``--quick``), with ``--repeat`` 5 or more, on a machine otherwise idle. Prints
Markdown tables, the targets, then (last line) one JSON object of ratios and raw medians.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pytest_workload import ELSEWHERE_HEADERS, answer

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Shape:
    """What a row's project runs: ``tests`` tests, each making ``gets`` GETs and ``calls`` model calls."""

    kind: str  # "conversation" (rows a-d: one long test) or "suite" (one agent per test)
    gets: int
    calls: int
    tests: int = 1

    @property
    def requests(self) -> int:
        return self.tests * (self.gets + self.calls)


ROWS: dict[str, Shape] = {
    "a": Shape("conversation", 1000, 200),
    "b": Shape("conversation", 0, 100),
    "c": Shape("conversation", 0, 200),
    "d": Shape("conversation", 0, 400),
    "s1": Shape("suite", 2, 4, 100),
    "s2": Shape("suite", 2, 4, 200),
}
QUICK_ROWS: dict[str, Shape] = {
    "a": Shape("conversation", 100, 20),
    "b": Shape("conversation", 0, 10),
    "c": Shape("conversation", 0, 20),
    "d": Shape("conversation", 0, 40),
    "s1": Shape("suite", 2, 4, 10),
    "s2": Shape("suite", 2, 4, 20),
}
CACHE = Path.home() / ".cache" / "agentreplay-bench"
PEERS = {
    "vcr": ["pytest", "pytest-recording", "vcrpy", "httpx", "openai"],
    "cassetter": ["pytest", "cassetter", "httpx", "openai"],
}
OUR_DIST = "pytest-agentreplay-suite"
OUR_PLUGIN = "pytest_agentreplay"
OUR_DEPS = ["httpx", "openai"]  # what the workload needs beside the package
ONLY_OURS = ("floor", "plugin", "baseline")  # --only-ours: what judges a change of the package
RUN_TIMEOUT = 900.0
ELSEWHERE = {"user-agent": "python-httpx/0.99.0", "accept-encoding": "gzip, deflate, br, zstd"}
TARGETS = {
    "plugin_over_floor_a": "<= 1.3",
    "cassetter_over_plugin_a": ">= 1.2",
    "cassetter_over_plugin_a_net_of_floors": ">= 1.0",
    "bytes_plugin_over_vcr_a": "<= 0.25",
    "bytes_plugin_over_vcr_d": "<= 0.25",
    "growth_overhead_200_400": "<= 2.2",
    "growth_overhead_200_400_elsewhere": "<= 2.2",
    "growth_bytes_200_400": "<= 2.2",
    "growth_record_overhead_200_400": "<= 2.2",
    "rss_plugin_below_peers_a": "true",
    "suite_ms_per_test_s1": "<= 5",
    "suite_ms_per_test_s2": "<= 5",
    "suite_plugin_over_cassetter_s1": "<= 0.5",
    "suite_growth_s1_s2": "<= 2.1",
    "suite_bytes_plugin_over_vcr_s1": "<= 1.0",
    "suite_rss_plugin_at_most_peers_s1": "true",
    "baseline_overhead_ratio_s1": "<= 1.1",
    "baseline_overhead_ratio_s2": "<= 1.1",
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
    marker: str  # "" for a floor test; ``{name}``: the test's name
    args: tuple[str, ...]  # replay (or floor) arguments
    record_args: tuple[str, ...] = ()
    replays: str | None = None  # the variant whose recording this one replays (it records none)
    environ: tuple[tuple[str, str], ...] = ()  # for its replays
    floor: str = "floor"  # the floor its overhead is taken over


def variants(baseline: bool) -> list[Variant]:
    out = [
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
    ]
    if baseline:
        out.append(
            Variant(
                "baseline",
                "pytest-agentreplay (baseline)",
                "baseline",
                "agentreplay",
                (),
                ("--agentreplay-record=all",),
            )
        )
    out += [
        Variant(
            "vcr",
            "pytest-recording",
            "vcr",
            "vcr",
            ("--record-mode=none",),
            ("--record-mode=all",),
            floor="vcr_floor",
        ),
        # TOML: cassetter's YAML loader refuses a document of more than 250,000 nodes (rows a and d).
        Variant(
            "cassetter",
            "cassetter",
            "cassetter",
            'vcr("{name}.{cassetter_format}")',
            ("--record-mode=none",),
            ("--record-mode=all",),
            floor="cassetter_floor",
        ),
        Variant("vcr_floor", "floor (vcr env)", "vcr", "", ("-p", "no:recording")),
        Variant("cassetter_floor", "floor (cassetter env)", "cassetter", "", ("-p", "no:cassetter")),
    ]
    return out


def query(python: str, code: str, *argv: str) -> str:
    done = subprocess.run([python, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return done.stdout.strip()


VERSIONS = (
    "import importlib.metadata as m, json, sys; print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
)


def pip(python: str, *argv: str) -> str | None:
    """Runs pip in a virtualenv; the last lines of its complaint if it failed."""
    done = subprocess.run(
        [python, "-m", "pip", *argv], capture_output=True, text=True, timeout=900, cwd=CACHE
    )
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return "pip failed: " + " | ".join(tail)
    return None


def global_env() -> Env:
    """The running python, with every pytest plugin that neither we nor our dependencies bring
    disabled."""
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
    versions = {d: importlib.metadata.version(d) for d in ("pytest", *OUR_DEPS, OUR_DIST)}
    return Env("ours", sys.executable, versions, disable)


def tree_env(name: str, checkout: Path, constraints: Path | None = None) -> Env:
    """A virtualenv under the cache holding a checkout of the package, installed as users install it (a
    wheel, no extras) next to what the workload needs, the checkout reinstalled on every run.
    ``constraints``: the versions every other distribution must have (the baseline takes ours')."""
    venv = CACHE / f"venv-{name}"
    python = str(venv / "bin" / "python")
    pins = ["-c", str(constraints)] if constraints else []
    try:
        if not Path(python).exists():
            log(f"creating {venv} ({checkout}, {' '.join(OUR_DEPS)})")
            CACHE.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        steps = [
            ["install", "-q", *pins, str(checkout), *OUR_DEPS],
            ["install", "-q", "--no-deps", "--force-reinstall", str(checkout)],
        ]
        for step in steps:  # dependencies first, then the checkout's code as it is now
            if error := pip(python, *step):
                return Env(name, python, error=error)
        versions = json.loads(query(python, VERSIONS, "pytest", *OUR_DEPS, OUR_DIST))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return Env(name, python, error=f"{type(exc).__name__}: {exc}")
    return Env(name, python, versions)


def baseline_env(tree: Path, ours: Env) -> Env:
    """The baseline tree in a virtualenv of its own, every other distribution at ours' version."""
    if ours.error:
        return Env("baseline", "", error=f"ours is not available: {ours.error}")
    frozen = subprocess.run(
        [ours.python, "-m", "pip", "freeze", "--exclude", OUR_DIST],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if frozen.returncode:
        return Env("baseline", "", error=f"pip freeze failed: {frozen.stderr.strip()[-300:]}")
    constraints = CACHE / "baseline-constraints.txt"
    # Only pinned names: an editable or URL line would make pip refuse the file as constraints.
    constraints.write_text("".join(line + "\n" for line in frozen.stdout.splitlines() if "==" in line))
    return tree_env("baseline", tree, constraints)


def peer_env(name: str) -> Env:
    """A virtualenv under the cache holding one peer (created, or completed, on first use)."""
    venv = CACHE / f"venv-{name}"
    python = str(venv / "bin" / "python")
    dists = PEERS[name]
    try:
        try:
            versions = json.loads(query(python, VERSIONS, *dists))
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            log(f"creating {venv} ({' '.join(dists)})")
            CACHE.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
            if error := pip(python, "install", "-q", *dists):
                return Env(name, python, error=error)
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


def source_of_test(name: str, marker: str, call: str) -> str:
    decorator = f"@pytest.mark.{marker}\n" if marker else ""
    return f"\n\n{decorator}def {name}():\n    {call}\n"


def write_project(folder: Path, variant: Variant, base: str, shape: Shape, args: argparse.Namespace) -> None:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    shutil.copyfile(BENCH / "_pytest_workload.py", folder / "workload.py")
    floor = not variant.marker
    source = "import pytest\n\nimport workload\n"
    if shape.kind == "conversation":
        names = ["test_workload"]
        calls = [
            f"workload.converse({base!r}, {shape.gets}, {shape.calls}, floor={floor}, "
            f"gets_via={args.gets_via!r})"
        ]
    else:
        names = [f"test_agent_{case:03d}" for case in range(shape.tests)]
        calls = [
            f"workload.agent({base!r}, {case}, floor={floor}, openai_client={args.openai_client!r})"
            for case in range(shape.tests)
        ]
    for name, call in zip(names, calls, strict=True):
        marker = variant.marker.format(name=name, cassetter_format=args.cassetter_format)
        source += source_of_test(name, marker, call)
    (folder / "test_workload.py").write_text(source)


def child_env(write_bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "PYTEST_ADDOPTS"}
    env.pop("PYTEST_PLUGINS", None)
    env.pop("PYTHONPATH", None)  # each virtualenv holds what it runs
    # By default as on a developer's machine: compiled and assertion-rewritten modules are cached between
    # runs (the recording run warms the cache). With PYTHONDONTWRITEBYTECODE set (CI images), pytest
    # rewrites every module of a plugin package at every start, for every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_pytest(
    env: Env,
    folder: Path,
    args: tuple[str, ...],
    environ: tuple[tuple[str, str], ...] = (),
    write_bytecode: bool = True,
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
            env=child_env(write_bytecode) | dict(environ),
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


@dataclass
class Results:
    cells: dict[str, dict[str, Cell]]
    envs: dict[str, Env]
    sizes: dict[str, Shape]
    variants: list[Variant]


def environments(args: argparse.Namespace, peers: Sequence[str] = tuple(PEERS)) -> dict[str, Env]:
    """Ours (and the baseline) and the ``peers``' virtualenvs, built or refreshed; no peer with
    ``--only-ours``."""
    envs = {"ours": global_env() if args.global_python else tree_env("ours", BENCH.parent)}
    if args.baseline_tree:
        envs["baseline"] = baseline_env(args.baseline_tree, envs["ours"])
    for name in () if args.only_ours else peers:
        envs[name] = peer_env(name)
    for name, env in envs.items():
        if env.error:
            log(f"{name}: not available: {env.error}")
    return envs


def record(
    cells: dict[str, dict[str, Cell]],
    root: Path,
    envs: dict[str, Env],
    chosen: list[Variant],
    sizes: dict[str, Shape],
    args: argparse.Namespace,
) -> None:
    """Writes every project and records the variants that record, against the local server."""
    with serving() as server:
        base = f"http://127.0.0.1:{server.server_port}"
        for row in args.rows:
            shape = sizes[row]
            for v in chosen:
                cell = cells[row][v.key]
                folder = root / row / v.key
                write_project(folder, v, base, shape, args)
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
                recorded = run_pytest(envs[v.env], folder, v.record_args, write_bytecode=args.bytecode)
                hits = server.hits - before
                if not recorded.ok or hits != shape.requests:
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


def forget_rewritten(envs: dict[str, Env]) -> None:
    """Deletes the modules pytest rewrote and cached in each virtualenv in earlier runs. With
    ``PYTHONDONTWRITEBYTECODE`` pytest writes none but still reads those it finds, so a virtualenv that ran
    before would be timed as if it had a cache a CI image never has."""
    for env in envs.values():
        venv = Path(env.python).parent.parent
        if env.error or not (venv / "pyvenv.cfg").is_file():  # --global-python: not ours to clean
            continue
        for cached in (venv / "lib").rglob("*-pytest-*.pyc"):
            cached.unlink(missing_ok=True)


def bench(args: argparse.Namespace) -> Results:
    sizes = QUICK_ROWS if args.quick else ROWS
    rows = args.rows
    envs = environments(args)
    if not args.bytecode:
        forget_rewritten(envs)
    chosen = variants(bool(args.baseline_tree))
    cells: dict[str, dict[str, Cell]] = {row: {v.key: Cell() for v in chosen} for row in rows}
    for row in rows:
        for v in chosen:
            env = envs.get(v.env)
            if env is None or (args.only_ours and v.key not in ONLY_OURS):
                cells[row][v.key].note = "not run (--only-ours)"
            elif env.error:
                cells[row][v.key].note = f"n/a ({env.error})"
    vcr_rows = set(args.vcr_rows)
    with tempfile.TemporaryDirectory(prefix="agentreplay-bench-") as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp)
        if args.keep:
            shutil.rmtree(root, ignore_errors=True)
            log(f"projects kept in {root}")
        record(cells, root, envs, chosen, sizes, args)
        # The server is gone: a request a replay does not serve from its cassette fails the test.
        for row in rows:
            for v in chosen:
                cell = cells[row][v.key]
                if v.key == "vcr" and row not in vcr_rows and not cell.note:
                    cell.note = "not timed (--vcr-rows)"
                if cell.note:
                    continue
                # bytecode (unless --no-bytecode), page cache
                warm = run_pytest(envs[v.env], root / row / v.key, v.args, v.environ, args.bytecode)
                if not warm.ok:
                    cell.note = f"replay failed: {failure(warm)}"
                    log(f"row {row} {v.label}: {cell.note}")
        for repeat in range(args.repeats):
            # The order reversed every other round: a variant that always ran right after another (the
            # baseline after ours) would carry a bias of its place in the round on a loaded machine.
            order = chosen if repeat % 2 == 0 else chosen[::-1]
            for row in rows:
                for v in order:
                    cell = cells[row][v.key]
                    if cell.note:
                        continue
                    run = run_pytest(envs[v.env], root / row / v.key, v.args, v.environ, args.bytecode)
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
            for v in chosen:
                cell = cells[row][v.key]
                if cell.bytes is not None and cell.cpu:
                    after = folder_bytes(root / row / v.key / "cassettes")
                    if after != cell.bytes:
                        cell.warning = (
                            f"replay changed the cassette folder: {cell.bytes:,} -> {after:,} bytes"
                        )
                        log(f"row {row} {v.label}: {cell.warning}")
    return Results(cells, envs, sizes, chosen)


# --- reporting ------------------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


class Figures:
    """Medians of a run, and what follows from them (overheads over each variant's own floor)."""

    def __init__(self, results: Results) -> None:
        self.cells = results.cells
        self.sizes = results.sizes
        self.floors = {v.key: v.floor for v in results.variants}

    def cpu(self, row: str, key: str) -> float | None:
        cell = self.cells.get(row, {}).get(key)
        return cell.median_cpu() if cell else None

    def size(self, row: str, key: str) -> int | None:
        cell = self.cells.get(row, {}).get(key)
        return cell.bytes if cell else None

    def rss(self, row: str, key: str) -> float | None:
        cell = self.cells.get(row, {}).get(key)
        return cell.median_rss() if cell else None

    def overhead(self, row: str, key: str = "plugin") -> float | None:
        """CPU seconds over the variant's own floor, for the whole process."""
        tool, floor = self.cpu(row, key), self.cpu(row, self.floors.get(key, "floor"))
        return tool - floor if tool is not None and floor is not None else None

    def ms_per_test(self, row: str, key: str = "plugin") -> float | None:
        over = self.overhead(row, key)
        return None if over is None else round(over * 1000 / self.sizes[row].tests, 2)

    def record_overhead(self, row: str) -> float | None:
        cell = self.cells.get(row, {}).get("plugin")
        ours, floor = (cell.record_cpu if cell else None), self.cpu(row, "floor")
        return ours - floor if ours is not None and floor is not None else None

    def rss_below(self, row: str, strict: bool) -> bool | None:
        ours = self.rss(row, "plugin")
        peers = [p for p in (self.rss(row, "vcr"), self.rss(row, "cassetter")) if p is not None]
        if ours is None or not peers:
            return None
        return all(ours < p if strict else ours <= p for p in peers)

    def summary(self) -> dict[str, Any]:
        return {
            "plugin_over_floor_a": ratio(self.cpu("a", "plugin"), self.cpu("a", "floor")),
            "cassetter_over_plugin_a": ratio(self.cpu("a", "cassetter"), self.cpu("a", "plugin")),
            "cassetter_over_plugin_a_net_of_floors": ratio(
                self.overhead("a", "cassetter"), self.overhead("a")
            ),
            "bytes_plugin_over_vcr_a": ratio(self.size("a", "plugin"), self.size("a", "vcr")),
            "bytes_plugin_over_vcr_d": ratio(self.size("d", "plugin"), self.size("d", "vcr")),
            "growth_overhead_200_400": ratio(self.overhead("d"), self.overhead("c")),
            "growth_overhead_200_400_elsewhere": ratio(
                self.overhead("d", "elsewhere"), self.overhead("c", "elsewhere")
            ),
            "growth_bytes_200_400": ratio(self.size("d", "plugin"), self.size("c", "plugin")),
            "growth_record_overhead_200_400": ratio(self.record_overhead("d"), self.record_overhead("c")),
            "rss_plugin_below_peers_a": self.rss_below("a", strict=True),
            "suite_ms_per_test_s1": self.ms_per_test("s1"),
            "suite_ms_per_test_s2": self.ms_per_test("s2"),
            "suite_plugin_over_cassetter_s1": ratio(self.overhead("s1"), self.overhead("s1", "cassetter")),
            "suite_growth_s1_s2": ratio(self.overhead("s2"), self.overhead("s1")),
            "suite_bytes_plugin_over_vcr_s1": ratio(self.size("s1", "plugin"), self.size("s1", "vcr")),
            "suite_rss_plugin_at_most_peers_s1": self.rss_below("s1", strict=False),
            "baseline_overhead_ratio_s1": ratio(self.overhead("s1"), self.overhead("s1", "baseline")),
            "baseline_overhead_ratio_s2": ratio(self.overhead("s2"), self.overhead("s2", "baseline")),
            "baseline_overhead_ratio": {
                row: ratio(self.overhead(row), self.overhead(row, "baseline")) for row in self.cells
            },
            "ms_per_test": {
                row: {
                    key: self.ms_per_test(row, key)
                    for key in ("plugin", "elsewhere", "baseline", "vcr", "cassetter")
                }
                for row, shape in self.sizes.items()
                if row in self.cells and shape.kind == "suite"
            },
        }


def verdict(key: str, value: Any) -> str:
    if value is None:
        return "n/a"
    target = TARGETS[key]
    if target == "true":
        return "met" if value else "NOT MET"
    op, bound = target.split()
    return "met" if (value <= float(bound) if op == "<=" else value >= float(bound)) else "NOT MET"


def fmt_missing(cell: Cell) -> str:
    note = cell.note or ""
    return "skipped" if note.startswith("not ") else "FAILED" if "failed" in note else "n/a"


def fmt_cpu(cell: Cell, floor: Cell | None) -> str:
    value = cell.median_cpu()
    if value is None:
        return fmt_missing(cell)
    own_floor = floor.median_cpu() if floor else None
    return f"{value:.2f} ({value / own_floor:.2f}x)" if own_floor else f"{value:.2f}"


def fmt_ms(figures: Figures, row: str, key: str) -> str:
    value = figures.ms_per_test(row, key)
    return fmt_missing(figures.cells[row][key]) if value is None else f"{value:.1f}"


def fmt_rss(cell: Cell) -> str:
    value = cell.median_rss()
    return "-" if value is None else f"{value:.0f}"


def fmt_record(cell: Cell) -> str:
    return "-" if cell.record_cpu is None else f"{cell.record_cpu:.2f}"


def fmt_bytes(cell: Cell) -> str:
    if cell.bytes is None:
        return "-"
    return f"{cell.bytes / 1e6:.2f} MB" if cell.bytes >= 1e6 else f"{cell.bytes:,}"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def conversation_table(results: Results, figures: Figures) -> list[str]:
    baseline = any(v.key == "baseline" for v in results.variants)
    head = "| row | GETs + model calls | floor CPU s | pytest-agentreplay CPU s (x floor) "
    head += "| replayed elsewhere (x floor) "
    if baseline:
        head += "| ours (baseline) CPU s (x floor) | overhead ours / baseline "
    head += (
        "| pytest-recording CPU s (x own floor) | cassetter CPU s (x own floor) "
        "| peak RSS MB floor / ours / vcr / cassetter | cassette bytes ours | pytest-recording | cassetter "
        "| ours, recording CPU s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row, c in results.cells.items():
        shape = results.sizes[row]
        if shape.kind != "conversation":
            continue
        rss = " / ".join(fmt_rss(c[k]) for k in ("floor", "plugin", "vcr", "cassetter"))
        line = f"| {row} | {shape.gets} + {shape.calls} | {fmt_cpu(c['floor'], None)} "
        line += f"| {fmt_cpu(c['plugin'], c['floor'])} | {fmt_cpu(c['elsewhere'], c['floor'])} "
        if baseline:
            line += f"| {fmt_cpu(c['baseline'], c['floor'])} "
            line += f"| {fmt_ratio(ratio(figures.overhead(row), figures.overhead(row, 'baseline')))} "
        line += (
            f"| {fmt_cpu(c['vcr'], c['vcr_floor'])} | {fmt_cpu(c['cassetter'], c['cassetter_floor'])} "
            f"| {rss} | {fmt_bytes(c['plugin'])} | {fmt_bytes(c['vcr'])} | {fmt_bytes(c['cassetter'])} "
            f"| {fmt_record(c['plugin'])} |"
        )
        lines.append(line)
    return lines if len(lines) > 2 else []


def suite_table(results: Results, figures: Figures) -> list[str]:
    baseline = any(v.key == "baseline" for v in results.variants)
    head = "| row | tests (model calls + GETs each) | floor ms per test (process CPU / tests) "
    head += "| pytest-agentreplay ms per test over floor | replayed elsewhere "
    if baseline:
        head += "| ours (baseline) | overhead ours / baseline "
    head += (
        "| pytest-recording (over own floor) | cassetter (over own floor) "
        "| peak RSS MB floor / ours / vcr / cassetter | cassette bytes ours / pytest-recording / cassetter |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row, c in results.cells.items():
        shape = results.sizes[row]
        if shape.kind != "suite":
            continue
        floor = c["floor"].median_cpu()
        floor_ms = fmt_missing(c["floor"]) if floor is None else f"{floor * 1000 / shape.tests:.1f}"
        rss = " / ".join(fmt_rss(c[k]) for k in ("floor", "plugin", "vcr", "cassetter"))
        sizes = " / ".join(fmt_bytes(c[k]) for k in ("plugin", "vcr", "cassetter"))
        line = f"| {row} | {shape.tests} ({shape.calls} + {shape.gets}) | {floor_ms} "
        line += f"| {fmt_ms(figures, row, 'plugin')} | {fmt_ms(figures, row, 'elsewhere')} "
        if baseline:
            line += f"| {fmt_ms(figures, row, 'baseline')} "
            line += f"| {fmt_ratio(ratio(figures.overhead(row), figures.overhead(row, 'baseline')))} "
        line += f"| {fmt_ms(figures, row, 'vcr')} | {fmt_ms(figures, row, 'cassetter')} | {rss} | {sizes} |"
        lines.append(line)
    return lines if len(lines) > 2 else []


TARGET_NAMES = {
    "plugin_over_floor_a": "CPU, ours / floor, row a",
    "cassetter_over_plugin_a": "CPU, cassetter / ours, row a (>1: we are faster)",
    "cassetter_over_plugin_a_net_of_floors": "CPU over own floor, cassetter / ours, row a (>1: we lead)",
    "bytes_plugin_over_vcr_a": "bytes, ours / pytest-recording, row a",
    "bytes_plugin_over_vcr_d": "bytes, ours / pytest-recording, row d",
    "growth_overhead_200_400": "CPU over floor, ours, N=400 / N=200",
    "growth_overhead_200_400_elsewhere": "CPU over floor, ours replayed elsewhere, N=400 / N=200",
    "growth_bytes_200_400": "bytes, ours, N=400 / N=200",
    "growth_record_overhead_200_400": "recording CPU over the floor, ours, N=400 / N=200 (one run each)",
    "rss_plugin_below_peers_a": "peak RSS, ours below every peer, row a",
    "suite_ms_per_test_s1": "suite shape s1, ours, ms per test over the floor",
    "suite_ms_per_test_s2": "suite shape s2, ours, ms per test over the floor",
    "suite_plugin_over_cassetter_s1": "suite shape s1, overhead ours / cassetter's",
    "suite_growth_s1_s2": "suite shape, overhead of ours, s2 / s1 (twice the tests)",
    "suite_bytes_plugin_over_vcr_s1": "suite shape s1, bytes, ours / pytest-recording",
    "suite_rss_plugin_at_most_peers_s1": "suite shape s1, peak RSS, ours at most every peer's",
    "baseline_overhead_ratio_s1": "suite shape s1, overhead ours / ours (baseline)",
    "baseline_overhead_ratio_s2": "suite shape s2, overhead ours / ours (baseline)",
}


def target_lines(out: dict[str, Any]) -> list[str]:
    lines = []
    for key, name in TARGET_NAMES.items():
        value = out[key]
        if value is None and key.startswith("baseline_"):
            continue  # no --baseline-tree
        shown = "n/a" if value is None else str(value).lower() if isinstance(value, bool) else f"{value:.3f}"
        lines.append(f"- {name}: {shown} (target {TARGETS[key]}): {verdict(key, value)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"rows to run, among {','.join(ROWS)}")
    parser.add_argument(
        "--repeat",
        "--repeats",
        dest="repeats",
        type=int,
        default=None,
        help="timed replays per variant (default 3)",
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes, 1 repeat: a smoke run")
    parser.add_argument(
        "--vcr-rows", default=",".join(ROWS), help="rows where pytest-recording's replay is timed"
    )
    parser.add_argument("--cassetter-format", choices=["toml", "yaml"], default="toml")
    parser.add_argument("--gets-via", choices=["client", "httpx.get"], default="client")
    parser.add_argument(
        "--openai-client",
        choices=["sdk", "httpx"],
        default="sdk",
        help="suite rows: the SDK builds its own client (sdk), or gets http_client=httpx.Client() (httpx)",
    )
    parser.add_argument(
        "--no-bytecode",
        dest="bytecode",
        action="store_false",
        help="PYTHONDONTWRITEBYTECODE=1 for every process, as CI images set it",
    )
    parser.add_argument(
        "--baseline-tree",
        metavar="PATH",
        type=Path,
        help="also run ours from this checkout (e.g. a git worktree of the commit before a change)",
    )
    parser.add_argument(
        "--only-ours",
        action="store_true",
        help="the floor, ours and the baseline only (no peers, no replay elsewhere): judging a change",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="build the projects in DIR (emptied first) and keep them"
    )
    parser.add_argument(
        "--global-python",
        action="store_true",
        help="run ours in this python (other pytest plugins disabled) rather than in its own virtualenv",
    )
    parser.add_argument("--json-only", action="store_true", help="print the JSON line only")
    parser.add_argument("--markdown-readme", action="store_true", help="print the tables and targets only")
    args = parser.parse_args()
    args.rows = [r for r in args.rows.split(",") if r]
    args.vcr_rows = [r for r in args.vcr_rows.split(",") if r]
    if unknown := sorted(set(args.rows) - set(ROWS)):
        parser.error(f"unknown rows: {', '.join(unknown)} (choose among {','.join(ROWS)})")
    if args.baseline_tree:
        args.baseline_tree = args.baseline_tree.resolve()
        if not (args.baseline_tree / "pyproject.toml").is_file():
            parser.error(f"--baseline-tree {args.baseline_tree}: no pyproject.toml (not a checkout?)")
        if args.global_python:
            parser.error("--baseline-tree installs both trees in virtualenvs: drop --global-python")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    started = time.perf_counter()
    results = bench(args)
    wall = time.perf_counter() - started
    figures = Figures(results)
    out = figures.summary()
    medians = {
        row: {
            key: {"cpu_s": cell.median_cpu(), "peak_rss_mb": cell.median_rss(), "bytes": cell.bytes}
            | ({"note": cell.note} if cell.note else {})
            | ({"warning": cell.warning} if cell.warning else {})
            for key, cell in c.items()
        }
        for row, c in results.cells.items()
    }
    for c in medians.values():
        for m in c.values():
            for k in ("cpu_s", "peak_rss_mb"):
                m[k] = None if m[k] is None else round(m[k], 3)
    envs = results.envs
    out |= {
        "targets": TARGETS,
        "medians": medians,
        "sizes": {
            row: {"tests": shape.tests, "gets": shape.gets, "calls": shape.calls}
            for row, shape in results.sizes.items()
            if row in results.cells
        },
        "repeats": args.repeats,
        "quick": args.quick,
        "bytecode": args.bytecode,
        "gets_via": args.gets_via,
        "openai_client": args.openai_client,
        "baseline_tree": str(args.baseline_tree) if args.baseline_tree else None,
        "versions": {name: env.versions for name, env in envs.items()},
        "disabled_plugins": envs["ours"].disable,
        "wall_s": round(wall, 1),
    }
    if not args.json_only:
        tables = [*conversation_table(results, figures), "", *suite_table(results, figures), ""]
        lines = [*tables, *target_lines(out)]
        if not args.markdown_readme:
            head = (
                f"whole pytest processes, replay, medians of {args.repeats} (CPU: user + sys of the "
                f"process); GETs via {args.gets_via}; openai client: {args.openai_client}; "
                f"PYTHONDONTWRITEBYTECODE={'unset' if args.bytecode else '1'}; wall {wall:.0f} s"
            )
            if args.baseline_tree:
                head += f"; baseline: {args.baseline_tree}"
            versions = "; ".join(
                f"{name}: " + (env.error or ", ".join(f"{d} {v}" for d, v in env.versions.items()))
                for name, env in envs.items()
            )
            notes = list(
                dict.fromkeys(
                    f"- {key}: {text}" if text.startswith("n/a") else f"- row {row}, {key}: {text}"
                    for row, c in results.cells.items()
                    for key, cell in c.items()
                    for text in (cell.note, cell.warning)
                    if text and not text.startswith("not ")
                )
            )
            top = [head, versions]
            if envs["ours"].disable:
                top.append(f"disabled in the global python: {' '.join(envs['ours'].disable)}")
            lines = [*top, "", *lines, *notes]
        print("\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1])))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
