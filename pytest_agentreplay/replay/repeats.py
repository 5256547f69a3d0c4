"""A test run N times against a live model (``repeat``), judged as one: the rates of the recorded decision
path and of equivalent final answers, each with a Wilson 95% interval, the distinct paths with their counts,
and the verdict against ``min_agreement`` (docs/comparison.md, Repeated runs).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

from ..core.documents import Document

# The normal quantile of a two-sided 95% interval.
Z95: Final = 1.959963984540054

PASS: Final = "pass"
FAIL: Final = "fail"
INCONCLUSIVE: Final = "inconclusive"


def wilson(successes: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``runs`` (E. B. Wilson, 1927): unlike the normal
    approximation it stays inside [0, 1] and is not empty at 0 or ``runs`` successes."""
    if runs <= 0:
        return (0.0, 1.0)
    p = successes / runs
    z2 = z * z
    denominator = 1 + z2 / runs
    centre = (p + z2 / (2 * runs)) / denominator
    half = z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / denominator
    # Rounding must not push a bound past the rate it bounds (0/n has lower bound 0 exactly).
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def verdict(interval: Sequence[float], minimum: float) -> str:
    low, high = interval
    if high < minimum:
        return FAIL
    if low >= minimum:
        return PASS
    return INCONCLUSIVE


def _rate(successes: int, runs: int) -> Document:
    low, high = wilson(successes, runs)
    return {
        "agreeing": successes,
        "rate": round(successes / runs, 4) if runs else 0.0,
        "interval": [round(low, 4), round(high, 4)],
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def aggregate(runs: Sequence[Document], min_agreement: float) -> Document:
    """One test's comparison over its runs (each a ``comparison.comparison_for`` document): the first run's
    details, with the rates, intervals, paths, answers, means and the verdict of all of them."""
    assert runs, "no run to aggregate"
    n = len(runs)
    first = runs[0]
    path_ok = sum(1 for r in runs if r["path_agrees"])
    answer_ok = sum(1 for r in runs if r["answer"]["equivalent"])
    paths = Counter(r["path"] for r in runs)
    recorded_path = first["recorded_path"]
    agreement = _rate(path_ok, n)
    out: Document = {
        **first,
        "runs": n,
        "agreement": agreement["rate"],
        "interval": agreement["interval"],
        "agreeing_runs": path_ok,
        "answers": _rate(answer_ok, n),
        "paths": [
            {"path": path, "runs": count, "recorded": path == recorded_path}
            for path, count in sorted(paths.items(), key=lambda item: (-item[1], item[0]))
        ],
        "min_agreement": min_agreement,
    }
    if n > 1:
        out["verdict"] = verdict(agreement["interval"], min_agreement)
        out["agree"] = out["verdict"] == PASS
        out["runs_detail"] = [
            {
                "run": i + 1,
                "path": r["path"],
                "path_agrees": r["path_agrees"],
                "answer_equivalent": r["answer"]["equivalent"],
                "diverged": r.get("diverged"),
            }
            for i, r in enumerate(runs)
        ]
        # The live side of one run on average: comparable with the one recorded run.
        live_tokens = [r["tokens"]["live"] for r in runs]
        out["tokens"] = {
            "recorded": first["tokens"]["recorded"],
            "live": {side: round(_mean([t[side] for t in live_tokens]), 1) for side in ("input", "output")},
        }
        out["latency_ms"] = {
            "recorded": first["latency_ms"]["recorded"],
            "live": round(_mean([r["latency_ms"]["live"] for r in runs]), 1),
        }
        costs = [r["cost"]["live"] for r in runs]
        out["cost"] = {
            "recorded": first["cost"]["recorded"],
            "live": None if any(c is None for c in costs) else round(_mean(costs), 6),
        }
        problems = {p: None for r in runs for p in r.get("budget_problems") or []}
        out["budget_problems"] = list(problems)
    else:
        out["verdict"] = PASS if first.get("agree") else FAIL
    return out


def render_repeats(comparison: Document) -> list[str]:
    """The lines of a repeated test's report section: rates, intervals, paths and the verdict."""
    c = comparison
    n = c["runs"]
    low, high = c["interval"]
    answers = c["answers"]
    lines = [
        f"  runs: {n}; recorded path taken {c['agreeing_runs']}/{n} = {c['agreement']:.0%} "
        f"(95% interval {low:.2f}-{high:.2f})",
        f"  equivalent final answer {answers['agreeing']}/{n} = {answers['rate']:.0%} "
        f"(95% interval {answers['interval'][0]:.2f}-{answers['interval'][1]:.2f})",
        "  distinct paths:",
    ]
    for path in c["paths"]:
        mark = " (recorded)" if path["recorded"] else ""
        lines.append(f"    {path['runs']:>3} x {path['path']}{mark}")
    lines.append(f"  verdict: {verdict_line(c)}")
    return lines


def verdict_line(c: Document) -> str:
    low, high = c["interval"]
    minimum = c["min_agreement"]
    shown = f"agreement {c['agreeing_runs']}/{c['runs']}, interval {low:.2f}-{high:.2f}"
    if c["verdict"] == PASS:
        return f"passed: {shown} lies wholly above min_agreement {minimum:g}"
    if c["verdict"] == FAIL:
        return f"failed: {shown} lies wholly below min_agreement {minimum:g}"
    needed = runs_needed(c["agreement"], minimum)
    more = f" (about {needed} runs at this rate)" if needed else ""
    return (
        f"inconclusive: {shown} straddles min_agreement {minimum:g}: more repeats needed{more}, "
        "e.g. --agentreplay-repeat"
    )


def runs_needed(rate: float, minimum: float) -> int | None:
    """The fewest runs at which ``rate`` would clear ``minimum`` (None: never, or over 1000)."""
    if rate == minimum:
        return None
    for n in range(2, 1001):
        k = round(rate * n)
        if verdict(wilson(k, n), minimum) != INCONCLUSIVE:
            return n
    return None
