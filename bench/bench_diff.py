"""Benchmark: drift comparison of agent histories, ours vs DeepDiff 9.1 on the whole lists, same run.

Scenarios (DESIGN section 5):

1. two 10,000-event histories with 1% of the leaf fields changed, in order
   (ours: ``compare_histories``; DeepDiff: ``DeepDiff(a, b)``);
2. 1,000 events compared order-insensitively: the replay is the recording shuffled, with 1% of the
   fields changed (ours: every event type order-insensitive via ``"*:@order"`` rule, matched as a
   multiset by content hash; DeepDiff: ``DeepDiff(a, b, ignore_order=True)``).

Ours: median of several runs. DeepDiff: one run in a subprocess with a timeout (default 120 s); when it
times out the script measures it at a smaller size and extrapolates (quadratic for ignore_order, linear
otherwise) and says so in the table.

Run: ``python bench/bench_diff.py [--quick]``. Prints a table, then one JSON line of ratios (last line).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentreplay.diff import RuleSet, compare_histories

TARGET_S = 0.5


def make_history(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """A realistic history: model call -> tool call/result -> retrieval/policy/state/effect, repeated."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    cycle = [
        "model.call",
        "tool.call",
        "tool.result",
        "retrieval",
        "policy.decision",
        "state.update",
        "effect",
        "http",
    ]
    for seq in range(n):
        etype = cycle[seq % len(cycle)]
        ev: dict[str, Any] = {
            "run_id": "run-1",
            "seq": seq,
            "ts": f"2025-01-01T00:{seq // 3600 % 60:02d}:{seq % 60:02d}Z",
            "type": etype,
            "actor": "model" if etype == "model.call" else "runtime",
            "class": "decision",
            "trace_id": f"{rng.getrandbits(128):032x}",
            "span_id": f"{rng.getrandbits(64):016x}",
            "prev_hash": f"{rng.getrandbits(256):064x}",
            "data": {},
        }
        tool = f"tool_{seq % 13}"
        if etype == "model.call":
            ev["data"] = {
                "provider": "openai",
                "endpoint": "/v1/chat/completions",
                "model": "gpt-4o-2024-08-06",
                "decoding": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "tool_choice": "auto"},
                "tools_hash": f"{seq % 5:064x}",
                "streamed": False,
                "decision": {
                    "text": f"Step {seq}: I will call {tool} to look up the order status for the customer.",
                    "tool_calls": [
                        {"id": f"call_{seq}", "name": tool, "arguments": {"order": seq, "q": "status"}}
                    ],
                    "stop_reason": "tool_calls",
                },
                "usage": {"prompt_tokens": 100 + seq, "completion_tokens": 20, "total_tokens": 120 + seq},
                "latency_ms": rng.randint(100, 900),
                "response_id": f"chatcmpl-{seq}",
            }
            ev["input_ref"] = {"sha256": f"{seq * 7919:064x}", "data_class": "internal"}
            ev["output_ref"] = {"sha256": f"{seq * 104729:064x}", "data_class": "internal"}
        elif etype == "tool.call":
            ev["tool"] = {"name": tool, "schema_version": "1"}
            ev["data"] = {"arguments": {"order": seq, "q": "status", "limit": 10}, "attempt": 1}
        elif etype == "tool.result":
            ev["tool"] = {"name": tool, "schema_version": "1"}
            ev["data"] = {
                "result": {"status": "shipped", "items": [seq, seq + 1], "eta_days": 2},
                "attempt": 1,
            }
        elif etype == "retrieval":
            ev["data"] = {
                "query": f"refund policy {seq}",
                "corpus_version": "2025-01",
                "document_ids": [f"doc-{seq}", f"doc-{seq + 1}"],
                "scores": [0.91, 0.87],
            }
        elif etype == "policy.decision":
            ev["policy_version"] = "3"
            ev["data"] = {"policy": "refund-limit", "verdict": "allow", "reason": "under limit"}
        elif etype == "state.update":
            ev["state_hash"] = f"{seq * 31:064x}"
        elif etype == "effect":
            ev["tool"] = {"name": "create_ticket", "idempotency_key": f"idem-{seq}"}
            ev["effect"] = {
                "kind": "ticket.create",
                "target": "helpdesk",
                "receipt": {"id": f"T-{seq}"},
                "committed": True,
            }
        else:
            ev["data"] = {
                "method": "GET",
                "url": f"https://api.example.com/orders/{seq}",
                "status": 200,
                "classification": "read",
            }
        events.append(ev)
    return events


_VOLATILE = {"seq", "ts", "run_id", "trace_id", "span_id", "prev_hash"}


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [path]


def mutate(
    history: list[dict[str, Any]], fraction: float, seed: int = 11
) -> tuple[list[dict[str, Any]], int]:
    """A deep copy with ``fraction`` of the (non-envelope) leaf fields changed."""
    rng = random.Random(seed)
    out = copy.deepcopy(history)
    leaves = [
        (n, path)
        for n, ev in enumerate(out)
        for path in _leaves(ev)
        if path[0] not in _VOLATILE and path[0] != "type"  # the type is what the event is, not a field
    ]
    chosen = rng.sample(leaves, max(1, int(len(leaves) * fraction)))
    for n, path in chosen:
        parent: Any = out[n]
        for key in path[:-1]:
            parent = parent[key]
        old = parent[path[-1]]
        if isinstance(old, bool):
            parent[path[-1]] = not old
        elif isinstance(old, int | float):
            parent[path[-1]] = old + 1
        elif isinstance(old, str):
            parent[path[-1]] = old + " (changed)"
        else:
            parent[path[-1]] = "changed"
    return out, len(chosen)


def _median(fn: Any, runs: int) -> tuple[float, Any]:
    times: list[float] = []
    result = None
    for _ in range(runs):
        t0 = time.process_time()
        result = fn()
        times.append(time.process_time() - t0)
    return statistics.median(times), result


def _deepdiff_worker(n: int, ignore_order: bool, shuffle: bool, queue: Any) -> None:
    from deepdiff import DeepDiff

    a = make_history(n)
    b, _ = mutate(a, 0.01)
    if shuffle:
        random.Random(3).shuffle(b)
    t0 = time.process_time()
    diff = DeepDiff(a, b, ignore_order=ignore_order)
    elapsed = time.process_time() - t0
    queue.put((elapsed, len(diff.get("values_changed", {})) + len(diff.get("iterable_item_added", {}))))


def time_deepdiff(n: int, *, ignore_order: bool, shuffle: bool, timeout: float) -> tuple[float | None, int]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_deepdiff_worker, args=(n, ignore_order, shuffle, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None, 0
    elapsed, count = queue.get()
    return float(elapsed), int(count)


def deepdiff_seconds(n: int, *, ignore_order: bool, shuffle: bool, timeout: float) -> tuple[float, str]:
    """DeepDiff CPU seconds at size ``n``: measured, or extrapolated from a smaller size on timeout."""
    seconds, _ = time_deepdiff(n, ignore_order=ignore_order, shuffle=shuffle, timeout=timeout)
    if seconds is not None:
        return seconds, "measured"
    size = n
    exponent = 2 if ignore_order else 1
    while size > 50:
        size //= 2
        small, _ = time_deepdiff(size, ignore_order=ignore_order, shuffle=shuffle, timeout=timeout)
        if small is not None:
            return small * (n / size) ** exponent, f"extrapolated from n={size} (x{n // size}^{exponent})"
    return float("nan"), "timed out"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of ours (median)")
    parser.add_argument("--timeout", type=float, default=120.0, help="DeepDiff timeout per run, seconds")
    parser.add_argument("--quick", action="store_true", help="skip DeepDiff (ours only)")
    args = parser.parse_args()

    rows: list[tuple[str, float, float | None, str, str]] = []

    # 1. 10,000 events, 1% of fields changed, in order.
    a = make_history(10_000)
    b, changed = mutate(a, 0.01)
    ours, result = _median(lambda: compare_histories(a, b), args.runs)
    found = len(result.differences)
    dd = (
        None
        if args.quick
        else deepdiff_seconds(10_000, ignore_order=False, shuffle=False, timeout=args.timeout)
    )
    kinds = Counter(d.kind for d in result.differences)
    rows.append(
        (
            "10,000 events, 1% fields changed",
            ours,
            dd[0] if dd else None,
            dd[1] if dd else "skipped",
            f"{changed} fields changed, {found} reported ({kinds['inserted']} inserted "
            f"+ {kinds['missing']} missing: renamed steps), {result.ignored} ignored",
        ),
    )

    # 2. 1,000 events, order-insensitive (shuffled), 1% of fields changed.
    a = make_history(1_000)
    b, changed = mutate(a, 0.01)
    random.Random(3).shuffle(b)
    rules = RuleSet.from_layers("regression", project={"*:@order": {"order_insensitive": True}})
    ours2, result2 = _median(lambda: compare_histories(a, b, rules=rules), args.runs)
    dd2 = (
        None if args.quick else deepdiff_seconds(1_000, ignore_order=True, shuffle=True, timeout=args.timeout)
    )
    rows.append(
        (
            "1,000 events, order-insensitive",
            ours2,
            dd2[0] if dd2 else None,
            dd2[1] if dd2 else "skipped",
            f"{changed} fields changed, {len(result2.differences)} reported, "
            f"{sum(d.kind == 'moved' for d in result2.differences)} moved",
        ),
    )

    print(f"{'scenario':36} {'ours (median)':>14} {'DeepDiff':>10} {'speed-up':>9}  target  notes")
    ratios: dict[str, Any] = {}
    for (name, mine, theirs, how, note), key in zip(rows, ("history_10k", "unordered_1k"), strict=True):
        speedup = theirs / mine if theirs and mine else None
        ok = "ok" if mine <= TARGET_S else "MISS"
        theirs_s = f"{theirs:9.2f}s" if theirs is not None else "        -"
        speed_s = f"{speedup:8.0f}x" if speedup else "        -"
        print(f"{name:36} {mine:13.3f}s {theirs_s} {speed_s}  {ok:6}  DeepDiff {how}; {note}")
        ratios[key] = {
            "ours_s": round(mine, 4),
            "deepdiff_s": None if theirs is None else round(theirs, 2),
            "deepdiff": how,
            "speedup": None if speedup is None else round(speedup, 1),
            "target_s": TARGET_S,
            "ours_over_target": round(mine / TARGET_S, 3),
        }
    print(json.dumps(ratios, sort_keys=True))


if __name__ == "__main__":
    main()
