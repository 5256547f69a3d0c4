"""Replay benchmark (a script, not a test): our HTTP replay vs the floor vs vcrpy, side by side.

    python bench/bench_replay.py [--runs 3] [--vcr-limit 60]

Measures CPU seconds (``time.process_time``), medians of ``--runs`` runs:

- replay of 1,000 and 5,000 recorded GET exchanges with httpx and with httpx2 through
  pytest-agentreplay (index built inside the measurement) vs the floor: the same client over a
  ``MockTransport`` handing back canned responses, no cassette at all;
- vcrpy replaying the same exchanges with httpx (vcrpy does not patch httpx2); vcrpy is quadratic,
  so 5,000 runs only if the 1,000 run extrapolates (x25) under ``--vcr-limit`` seconds, else the
  extrapolation is reported;
- 400 model calls to one endpoint (chat completions, a growing conversation as request body, body
  hashed and compared on every call) through httpx2.

Prints a table, then (last line) one JSON object of ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentreplay.core.capture import Recorder, RunContext, pop_active, push_active
from pytest_agentreplay.core.events import Event, RunMeta
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.http.classify import classify_exchange
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse
from pytest_agentreplay.http.recording import emit_exchange
from pytest_agentreplay.intercept import install

HOST = "https://api.bench.example"


class MemoryCassette:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def payload(self, ref: Any) -> Any:
        return None if ref is None else ref.inline


def url_of(i: int) -> str:
    return f"{HOST}/items/{i}?page={i % 7}&q=x"


def body_of(i: int) -> bytes:
    return json.dumps({"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i * 1.5}).encode()


def recorded_reads(n: int) -> list[Event]:
    ctx = RunContext(Recorder(RunMeta(run_id="bench")), mode="capture")
    for i in range(n):
        req = HttpRequest("GET", url_of(i), {"accept": "*/*", "user-agent": "bench"}, b"")
        resp = HttpResponse(
            200,
            {"content-type": "application/json"},
            {"json": json.loads(body_of(i)), "content_type": "application/json"},
        )
        emit_exchange(ctx, req, resp, classify_exchange(req, resp, RunSettings()), 1.0)
    return ctx.recorder.events


def conversation(i: int) -> dict[str, Any]:
    messages = [{"role": "system", "content": "You are a helpful agent."}]
    for k in range(i % 12):
        messages.append({"role": "user", "content": f"step {k}: look up item {k}"})
        messages.append({"role": "assistant", "content": f"item {k} is fine"})
    messages.append({"role": "user", "content": f"question {i}"})
    return {"model": "gpt-4o-mini", "messages": messages, "temperature": 0}


def recorded_model_calls(n: int) -> list[Event]:
    ctx = RunContext(Recorder(RunMeta(run_id="bench")), mode="capture")
    for i in range(n):
        body = json.dumps(conversation(i)).encode()
        req = HttpRequest("POST", f"{HOST}/v1/chat/completions", {"content-type": "application/json"}, body)
        answer = {
            "id": f"chatcmpl-{i}",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"answer {i}"},
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
        }
        resp = HttpResponse(
            200, {"content-type": "application/json"}, {"json": answer, "content_type": "application/json"}
        )
        emit_exchange(ctx, req, resp, classify_exchange(req, resp, RunSettings()), 1.0)
    return ctx.recorder.events


# A benchmark step returns its measured CPU seconds: setup that is not replay (building the client,
# whose default transport loads the CA bundle) stays outside the measurement, for every contender.
Step = Callable[[], float]


def median_cpu(fn: Step, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def ours(mod: Any, events: list[Event], n: int) -> Step:
    def run() -> float:
        urls = [url_of(i) for i in range(n)]
        with mod.Client() as client:
            start = time.process_time()
            # The run (and its index, built on the first call) is part of the measurement.
            ctx = RunContext(
                Recorder(RunMeta(run_id="replay")), mode="regression", recorded=MemoryCassette(events)
            )
            token = push_active(ctx)
            try:
                for url in urls:
                    client.get(url).json()
            finally:
                pop_active(ctx, token)
            spent = time.process_time() - start
        assert not ctx.failures and len(ctx.recorder.events) == n
        return spent

    return run


def floor(mod: Any, n: int) -> Step:
    canned = {url_of(i): body_of(i) for i in range(n)}

    def handler(request: Any) -> Any:
        return mod.Response(
            200, content=canned[str(request.url)], headers={"content-type": "application/json"}
        )

    def run() -> float:
        urls = [url_of(i) for i in range(n)]
        with mod.Client(transport=mod.MockTransport(handler)) as client:
            start = time.process_time()
            for url in urls:
                client.get(url).json()
            return time.process_time() - start

    return run


def write_vcr_cassette(path: Path, n: int) -> None:
    import yaml

    interactions = [
        {
            "request": {"body": None, "headers": {"accept": ["*/*"]}, "method": "GET", "uri": url_of(i)},
            "response": {
                "body": {"string": body_of(i).decode()},
                "headers": {"content-type": ["application/json"]},
                "status": {"code": 200, "message": "OK"},
            },
        }
        for i in range(n)
    ]
    loader_dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump({"interactions": interactions, "version": 1}, Dumper=loader_dumper))


def vcrpy_run(mod: Any, path: Path, n: int) -> Step:
    import vcr

    def run() -> float:
        urls = [url_of(i) for i in range(n)]
        with mod.Client() as client:
            start = time.process_time()
            with vcr.use_cassette(str(path), record_mode="none"):  # loading the cassette counts
                for url in urls:
                    client.get(url).json()
            return time.process_time() - start

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vcr-limit", type=float, default=60.0)
    args = parser.parse_args()

    import httpx
    import httpx2

    uninstall = install()
    rows: list[tuple[str, str]] = []
    ratios: dict[str, Any] = {}
    results: dict[tuple[str, int], dict[str, float]] = {}
    try:
        for n in (1000, 5000):
            events = recorded_reads(n)
            for name, mod in (("httpx", httpx), ("httpx2", httpx2)):
                ours(mod, events, min(n, 50))()  # warm-up (imports, first-use paths)
                t_ours = median_cpu(ours(mod, events, n), args.runs)
                t_floor = median_cpu(floor(mod, n), args.runs)
                results[(name, n)] = {"ours": t_ours, "floor": t_floor}
                rows.append((f"replay {n:>5} GET, {name:<6} ours", f"{t_ours:8.3f} s"))
                rows.append((f"replay {n:>5} GET, {name:<6} floor (MockTransport)", f"{t_floor:8.3f} s"))
                ratios[f"{name}_{n}_ours_vs_floor"] = round(t_ours / t_floor, 3)
        for name in ("httpx", "httpx2"):
            ratios[f"{name}_scaling_5000_over_1000"] = round(
                results[(name, 5000)]["ours"] / results[(name, 1000)]["ours"], 3
            )

        events = recorded_model_calls(400)

        bodies = [conversation(i) for i in range(400)]

        def model_calls() -> float:
            with httpx2.Client() as client:
                start = time.process_time()
                ctx = RunContext(
                    Recorder(RunMeta(run_id="m")), mode="regression", recorded=MemoryCassette(events)
                )
                token = push_active(ctx)
                try:
                    for body in bodies:
                        client.post(f"{HOST}/v1/chat/completions", json=body).json()
                finally:
                    pop_active(ctx, token)
                spent = time.process_time() - start
            recorded_hashes = [e.data["request_hash"] for e in events]
            assert [e.data["request_hash"] for e in ctx.recorder.events] == recorded_hashes  # bodies compared
            assert not ctx.failures
            return spent

        t_model = median_cpu(model_calls, args.runs)
        rows.append(("400 model calls, one endpoint, bodies compared", f"{t_model:8.3f} s"))
        ratios["model_calls_400_seconds"] = round(t_model, 3)
    finally:
        uninstall()

    # vcrpy, same exchanges, httpx only; run uninstalled so the two layers do not stack.
    try:
        import vcr  # noqa: F401

        with tempfile.TemporaryDirectory() as tmp:
            p1000 = Path(tmp) / "c1000.yaml"
            write_vcr_cassette(p1000, 1000)
            t_vcr_1000 = vcrpy_run(httpx, p1000, 1000)()
            rows.append(("replay  1000 GET, httpx  vcrpy (1 run)", f"{t_vcr_1000:8.3f} s"))
            ratios["vcrpy_1000_vs_ours_httpx"] = round(t_vcr_1000 / results[("httpx", 1000)]["ours"], 1)
            estimate = t_vcr_1000 * 25
            if estimate <= args.vcr_limit:
                p5000 = Path(tmp) / "c5000.yaml"
                write_vcr_cassette(p5000, 5000)
                t_vcr_5000 = vcrpy_run(httpx, p5000, 5000)()
                rows.append(("replay  5000 GET, httpx  vcrpy (1 run)", f"{t_vcr_5000:8.3f} s"))
                ratios["vcrpy_5000_vs_ours_httpx"] = round(t_vcr_5000 / results[("httpx", 5000)]["ours"], 1)
            else:
                rows.append(
                    ("replay  5000 GET, httpx  vcrpy", f"skipped: ~{estimate:.0f} s extrapolated (x25)")
                )
                ratios["vcrpy_5000_extrapolated_seconds"] = round(estimate, 1)
    except ImportError:
        rows.append(("vcrpy", "not installed"))

    width = max(len(r[0]) for r in rows)
    print(f"{'work':<{width}}  CPU (median of {args.runs})")
    print("-" * (width + 24))
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(json.dumps(ratios, sort_keys=True))


if __name__ == "__main__":
    main()
