"""The end-of-session summary and the drift report file, from the per-test outcomes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .atomic import atomic_write_bytes
from .canonical import dumps_pretty

ACTIONS = ("recorded", "replayed", "drifted", "updated", "audited", "not-saved")


def summary_lines(outcomes: Sequence[dict[str, Any]]) -> list[str]:
    counts = Counter(o["action"] for o in outcomes)
    line = ", ".join(f"{counts[a]} {a}" for a in ACTIONS if counts[a])
    lines = [line]
    for outcome in outcomes:
        if outcome["action"] in ("updated", "recorded", "drifted", "not-saved"):
            detail = ""
            if outcome["regressions"] or outcome["expected"]:
                detail = f" ({outcome['regressions']} regressions, {outcome['expected']} expected)"
            lines.append(f"  {outcome['action']}: {outcome['cassette']}{detail}")
    if counts["drifted"]:
        lines.append("if the drift is intended, accept it: pytest --agentreplay-update  (then review the cassette diff)")
    if counts["not-saved"]:
        lines.append("cassettes of failing tests were not written; fix the test or pass --agentreplay-save-on-failure")
    return lines


def write_report(path: Path, outcomes: Sequence[dict[str, Any]]) -> None:
    if path.suffix == ".json":
        body = dumps_pretty({"format": "pytest-agentreplay-report", "version": 1, "tests": list(outcomes)})
    else:
        rows = ["| test | cassette | mode | result | regressions | expected |", "|---|---|---|---|---|---|"]
        for o in outcomes:
            rows.append(
                f"| `{o['nodeid']}` | `{o['cassette']}` | {o['mode']} | {o['action']} | {o['regressions']} "
                f"| {o['expected']} |"
            )
        text = "# Agent replay report\n\n" + "\n".join(summary_lines(outcomes)) + "\n\n" + "\n".join(rows) + "\n"
        if path.suffix == ".html":
            import html

            text = f"<!doctype html><meta charset=utf-8><title>Agent replay report</title><pre>{html.escape(text)}</pre>"
        body = text
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, body.encode("utf-8"))
