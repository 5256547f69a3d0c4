"""Load-time benchmark: load_cassette of a ~6 MB cassette vs json.loads of the same bytes.

Run: python bench/bench_load.py   (prints the ratio; target <= 2.0)
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta

TARGET_BYTES = 6_000_000


def build_events(n: int) -> list[Event]:
    events = []
    for seq in range(n):
        text = f"message {seq}: " + "lorem ipsum dolor sit amet " * 20
        request = {
            "method": "POST",
            "url": "https://api.example.com/v1/messages",
            "headers": {"content-type": "application/json", "x-request-id": f"req-{seq}"},
            "body": {
                "json": {"model": "m", "messages": [{"role": "user", "content": text}]},
                "content_type": "application/json",
            },
        }
        response = {
            "status": 200,
            "headers": {"content-type": "application/json"},
            "body": {
                "json": {
                    "id": f"msg_{seq}",
                    "content": [{"type": "text", "text": text}],
                    "usage": {"input_tokens": 10, "output_tokens": 20},
                },
                "content_type": "application/json",
            },
        }
        events.append(
            Event.model_validate(
                {
                    "run_id": "run-1",
                    "seq": seq,
                    "ts": f"2025-01-01T00:00:{seq % 60:02d}Z",
                    "type": "model.call",
                    "actor": "model",
                    "class": "decision",
                    "input_ref": PayloadRef(inline=request),
                    "output_ref": PayloadRef(inline=response),
                    "data": {"model": "m", "attempt": 1, "latency_s": 0.25},
                }
            )
        )
    return events


def best_of(fn: Callable[[], object], repeat: int = 9) -> float:
    timings = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cassettes" / "big.json"
        n = 500
        while True:
            save_cassette(path, RunMeta(run_id="run-1"), build_events(n))
            size = path.stat().st_size
            if size >= TARGET_BYTES:
                break
            n = int(n * TARGET_BYTES / size) + 10
        data = path.read_bytes()
        # Interleaved so that background load on the machine hits both sides alike.
        t_json = t_load = float("inf")
        for _ in range(9):
            t_json = min(t_json, best_of(lambda: json.loads(data), 1))
            t_load = min(t_load, best_of(lambda: load_cassette(path), 1))
        print(f"cassette: {len(data) / 1e6:.1f} MB, {n} events")
        print(f"json.loads: {t_json * 1000:.1f} ms; load_cassette: {t_load * 1000:.1f} ms")
        print(f"ratio: {t_load / t_json:.2f} (target <= 2.0)")


if __name__ == "__main__":
    main()
