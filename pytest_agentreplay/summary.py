"""The end-of-session summary and the drift report file, from the per-test outcomes.

An outcome is the dict a test reports (``TestOutcome.to_dict()``): ``nodeid``, ``cassette``,
``action`` (recorded | replayed | drifted | updated | audited | not-saved | missing), ``mode``,
``regressions``, ``expected`` and ``drift`` (``DriftResult.to_dict()`` or None).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ACTIONS = ("recorded", "replayed", "drifted", "updated", "audited", "not-saved")
# Always shown in the headline, even at zero, so a reader sees at a glance what did not happen.
HEADLINE = ("replayed", "recorded", "drifted", "updated", "audited")


def counts(
    outcomes: Sequence[dict[str, Any]], *, unused: Sequence[str] = (), missing: Sequence[str] = ()
) -> dict[str, int]:
    """Per-action counts plus ``unused``/``missing`` cassettes, regressions and expected differences."""
    by_action = Counter(str(o.get("action")) for o in outcomes)
    out = {action: by_action[action] for action in (*ACTIONS, "missing")}
    out["missing"] += len(missing)
    out["unused"] = len(unused)
    out["tests"] = len(outcomes)
    out["regressions"] = sum(int(o.get("regressions") or 0) for o in outcomes)
    out["expected"] = sum(int(o.get("expected") or 0) for o in outcomes)
    return out


def headline(numbers: dict[str, int]) -> str:
    parts = [f"{numbers[a]} {a}" for a in HEADLINE]
    parts.append(f"{numbers['unused']} unused")
    for extra in ("not-saved", "missing"):
        if numbers[extra]:
            parts.append(f"{numbers[extra]} {extra}")
    return ", ".join(parts)


def _quote(nodeid: str) -> str:
    return "'" + nodeid.replace("'", "'\"'\"'") + "'"


def next_steps(
    outcomes: Sequence[dict[str, Any]], *, unused: Sequence[str] = (), missing: Sequence[str] = ()
) -> list[str]:
    """The commands to run next, most urgent first."""
    numbers = counts(outcomes, unused=unused, missing=missing)
    steps: list[str] = []
    if numbers["drifted"]:
        drifted = [str(o["nodeid"]) for o in outcomes if o.get("action") == "drifted"]
        target = " " + _quote(drifted[0]) if len(drifted) == 1 else ""
        steps.append(
            f"pytest --agentreplay-update{target}  # accept the drift of {numbers['drifted']} test(s) "
            "if it is intended, then review the cassette diff"
        )
    if numbers["missing"]:
        steps.append(
            "pytest --agentreplay-record=missing  # record the missing cassette(s) against the real services"
        )
    if numbers["updated"]:
        steps.append("git diff -- '*.json'  # review every updated cassette before committing it")
    if numbers["unused"]:
        steps.append("pytest --agentreplay-update  # remove the unused cassette(s) (run the whole suite)")
    if numbers["not-saved"]:
        steps.append(
            "fix the failing test(s) and record again, or keep their cassette with "
            "--agentreplay-save-on-failure"
        )
    return steps


def _detail(outcome: dict[str, Any]) -> str:
    regressions, expected = int(outcome.get("regressions") or 0), int(outcome.get("expected") or 0)
    if not (regressions or expected):
        return ""
    return f" ({regressions} regression(s), {expected} expected)"


def summary_lines(
    outcomes: Sequence[dict[str, Any]], *, unused: Sequence[str] = (), missing: Sequence[str] = ()
) -> list[str]:
    """The terminal summary: counts, every cassette that changed or drifted, and what to run next."""
    numbers = counts(outcomes, unused=unused, missing=missing)
    lines = [headline(numbers)]
    for outcome in outcomes:
        action = str(outcome.get("action"))
        if action in ("drifted", "updated", "recorded", "not-saved", "missing"):
            lines.append(f"  {action}: {outcome['nodeid']} -> {outcome['cassette']}{_detail(outcome)}")
        elif action == "replayed" and outcome.get("expected"):
            lines.append(f"  replayed with expected drift: {outcome['nodeid']}{_detail(outcome)}")
    for nodeid in missing:
        lines.append(f"  missing: {nodeid}")
    for path in unused:
        lines.append(f"  unused: {path}")
    steps = next_steps(outcomes, unused=unused, missing=missing)
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return lines


def write_report(
    path: Path,
    outcomes: Sequence[dict[str, Any]],
    *,
    unused: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> None:
    """Write the session drift report (format by suffix: .md, .json, .html); see ``report``."""
    from .report import write_report as _write

    _write(Path(path), outcomes, unused=unused, missing=missing)
