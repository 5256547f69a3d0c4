"""What ``--agentreplay-isolate`` costs a replay session: whole ``python -m pytest`` processes, with, without.

A temporary project of ``--tests`` replaying tests (each three HTTP calls through a real ``httpx.Client``,
recorded once against a local server) is replayed ``--runs`` times with ``--agentreplay-isolate=off`` and
as many with ``=auto``, alternating. Each process's CPU (user + system, from ``wait4``) and wall time are
measured; the medians and the difference are printed (target: at most 5% more CPU). Every isolated run
must say it entered its namespace, and every run must pass. Last line: one JSON object of the figures.

Where this machine refuses namespaces, the bench says why and prints ``{"skipped": reason}``.

    python bench/bench_isolation.py [--runs 15] [--tests 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agentreplay.guard.session_namespace import kernel_refusal  # noqa: E402

TESTS = """
import os

import httpx
import pytest


@pytest.mark.parametrize("n", range(int(os.environ.get("BENCH_TESTS", "20"))))
@pytest.mark.agentreplay
def test_agent(agent_replay, n):
    with httpx.Client() as client:
        for turn in range(3):
            reply = client.post(os.environ["AGENT_URL"], json={"test": n, "turn": turn})
            assert reply.json()["echo"]["turn"] == turn
"""


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        payload = json.dumps({"echo": json.loads(body)}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


def run(project: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """One pytest process: (CPU seconds, wall seconds, its output)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    output = child.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} failed:\n{output}")
    return usage.ru_utime + usage.ru_stime, wall, output


ENTER = """
import json, resource, time
from pytest_agentreplay.guard import session_namespace as sn
def spent():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
cpu, wall = spent(), time.perf_counter()
assert sn.refusal() is None
sn.enter(sn.NAMESPACES.session_flags or sn._CLONE_NEWUSER | sn._CLONE_NEWNET)
print(json.dumps([spent() - cpu, time.perf_counter() - wall]))
"""


def entering(runs: int, env: dict[str, str]) -> tuple[float, float]:
    """The probe (a forked child) and the entering alone, in fresh processes: medians of (CPU, wall)."""
    figures = [
        json.loads(
            subprocess.run([sys.executable, "-c", ENTER], env=env, capture_output=True, check=True).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(f[0] for f in figures), statistics.median(f[1] for f in figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tests", type=int, default=20)
    options = parser.parse_args()
    refused = kernel_refusal()
    if refused is not None:
        print(f"skipped: this machine refuses network namespaces: {refused}")
        print(json.dumps({"skipped": refused}))
        return
    env = {**os.environ, "BENCH_TESTS": str(options.tests), "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_AGENTREPLAY_NETNS", None)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_agent.py").write_text(TESTS, encoding="utf-8")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env["AGENT_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1/agent"
        try:
            run(project, ["--agentreplay-record=all"], env)
        finally:
            server.shutdown()
            server.server_close()
        # Replays need no server: the cassettes answer. A warm-up of each kind fills the caches.
        figures: dict[str, tuple[list[float], list[float]]] = {"off": ([], []), "auto": ([], [])}
        for isolate in ("off", "auto"):
            run(project, [f"--agentreplay-isolate={isolate}"], env)
        for _ in range(options.runs):
            for isolate in ("off", "auto"):
                cpu, wall, output = run(project, [f"--agentreplay-isolate={isolate}"], env)
                if isolate == "auto" and "network isolation: namespace entered" not in output:
                    raise SystemExit(f"the isolated run did not enter its namespace:\n{output}")
                figures[isolate][0].append(cpu)
                figures[isolate][1].append(wall)
    enter_cpu, enter_wall = entering(options.runs, env)
    cpu_off, cpu_on = (statistics.median(figures[k][0]) for k in ("off", "auto"))
    wall_off, wall_on = (statistics.median(figures[k][1]) for k in ("off", "auto"))
    cpu_added = (cpu_on - cpu_off) / cpu_off * 100
    wall_added = (wall_on - wall_off) / wall_off * 100
    title = f"replay session, {options.tests} tests x 3 calls"
    print(f"{title:<44}{'CPU (median)':>14}{'wall (median)':>16}")
    print(f"{'--agentreplay-isolate=off':<44}{cpu_off * 1000:>11.0f} ms{wall_off * 1000:>13.0f} ms")
    print(
        f"{'--agentreplay-isolate=auto (namespace)':<44}{cpu_on * 1000:>11.0f} ms{wall_on * 1000:>13.0f} ms"
    )
    print(f"{'added by isolation':<44}{cpu_added:>12.1f} %{wall_added:>14.1f} %   (target: CPU <= 5 %)")
    print(
        f"{'of which: probe + entering, alone':<44}{enter_cpu * 1000:>11.1f} ms{enter_wall * 1000:>13.1f} ms"
    )
    print(
        json.dumps(
            {
                "runs": options.runs,
                "tests": options.tests,
                "cpu_off_ms": round(cpu_off * 1000, 1),
                "cpu_isolated_ms": round(cpu_on * 1000, 1),
                "cpu_added_pct": round(cpu_added, 2),
                "wall_off_ms": round(wall_off * 1000, 1),
                "wall_isolated_ms": round(wall_on * 1000, 1),
                "wall_added_pct": round(wall_added, 2),
                "enter_cpu_ms": round(enter_cpu * 1000, 2),
                "enter_wall_ms": round(enter_wall * 1000, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
