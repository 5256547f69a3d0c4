"""Cost of runtime values per read: N clock / uuid reads unpatched, inside a recording run, inside a replay.

Prints nanoseconds per read for ``time.time()``, ``datetime.now()`` and ``uuid.uuid4()`` (best of 3 loops
each) and the bytes the ``runtime.values`` event takes per read in the cassette as written.
Last line: one JSON object of the figures.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from pytest_agentreplay.core.canonical import dumps_pretty
from pytest_agentreplay.core.capture import Recorder, RunContext, activate
from pytest_agentreplay.core.events import RunMeta
from pytest_agentreplay.replay.runs import finish, start

N = 200_000


def loop(read: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        read()
    return (time.perf_counter() - start) / n * 1e9


READS: dict[str, tuple[Callable[[], object], int]] = {
    "time.time": (time.time, N),
    "datetime.now": (datetime.datetime.now, N // 4),
    "uuid.uuid4": (uuid.uuid4, N // 10),
}


def best(name: str) -> float:
    read, n = READS[name]
    return min(loop(read, n) for _ in range(3))


class _Recorded:
    def __init__(self, events: list[Any]) -> None:
        self.events = events


def main() -> None:
    unpatched = {name: best(name) for name in READS}
    ctx = RunContext(Recorder(RunMeta(run_id="bench")), mode="record")
    with activate(ctx):
        start(ctx)  # as a test's run: runtime values are recorded from its start to its end
        recorded = {name: best(name) for name in READS}
        finish(ctx)
    (event,) = [e for e in ctx.recorder.events if e.type == "runtime.values"]
    reads = sum(sum(m.values()) for src in ("clock", "uuid") for m in event.data["reads"][src].values())
    clock_reads = sum(sum(m.values()) for m in event.data["reads"]["clock"].values())
    clock_bytes = len(dumps_pretty(event.data["clock"]))
    recording = _Recorded(ctx.recorder.events)
    replay = RunContext(Recorder(RunMeta(run_id="bench")), mode="regression", recorded=recording)
    with activate(replay):
        start(replay)
        replayed = {name: best(name) for name in READS}
        finish(replay)
    print(f"{'ns per read':<16}{'unpatched':>12}{'recording':>12}{'replaying':>12}")
    for name in READS:
        print(f"{name:<16}{unpatched[name]:>12.0f}{recorded[name]:>12.0f}{replayed[name]:>12.0f}")
    per_read = clock_bytes / clock_reads
    print(f"clock offsets in the cassette: {per_read:.2f} bytes per read ({clock_reads} reads)")
    figures = {
        **{f"{n}_unpatched_ns": round(unpatched[n]) for n in READS},
        **{f"{n}_recording_ns": round(recorded[n]) for n in READS},
        **{f"{n}_replaying_ns": round(replayed[n]) for n in READS},
        "clock_bytes_per_read": round(clock_bytes / clock_reads, 2),
        "reads": reads,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
