"""The end-of-session summary and the drift report file, from the per-test statuses.

A status is the dict :func:`pytest_agentreplay.report.status.decide` returns: ``nodeid``, ``cassette``,
``status`` (recorded | replayed | drifted | failed | updated | audited | skipped), ``cause`` (why a
``failed`` test failed), ``message``, ``mode``, ``regressions``, ``expected`` and ``drift``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .status import CAUSES, STATUSES, write_failed

# Always shown in the headline, even at zero, so a reader sees at a glance what did not happen.
HEADLINE = ("replayed", "recorded", "drifted", "failed", "updated", "audited")


def counts(statuses: Sequence[dict[str, Any]], *, unused: Sequence[str] = ()) -> dict[str, int]:
    """Per-status counts plus unused cassettes, regressions and expected differences."""
    by_status = Counter(str(s.get("status")) for s in statuses)
    out = {status: by_status[status] for status in STATUSES}
    out["unused"] = len(unused)
    out["tests"] = len(statuses)
    out["regressions"] = sum(int(s.get("regressions") or 0) for s in statuses)
    out["expected"] = sum(int(s.get("expected") or 0) for s in statuses)
    return out


def headline(numbers: dict[str, int]) -> str:
    parts = [f"{numbers[s]} {s}" for s in HEADLINE]
    if numbers["skipped"]:
        parts.append(f"{numbers['skipped']} skipped")
    parts.append(f"{numbers['unused']} unused")
    return ", ".join(parts)


def describe(status: dict[str, Any]) -> str:
    """``failed (unmatched-call: a live call has no recorded counterpart)`` or just the status."""
    name = str(status.get("status"))
    cause = status.get("cause")
    if name == "failed" and cause:
        return f"failed ({cause}: {CAUSES.get(str(cause), cause)})"
    return name


def next_steps(statuses: Sequence[dict[str, Any]], *, unused: Sequence[str] = ()) -> list[str]:
    """The commands to run next, most urgent first (each one works as printed)."""
    from ..core.commands import record_command, update_command

    steps: list[str] = []
    drifted = [s for s in statuses if s.get("status") == "drifted"]
    by_mode: dict[str, list[str]] = {}
    for s in drifted:
        by_mode.setdefault(str(s.get("mode")), []).append(str(s["nodeid"]))
    for mode, nodeids in by_mode.items():
        command = update_command(nodeids if len(nodeids) <= 3 else (), mode)
        if command is not None:
            steps.append(
                f"{command}  # accept the drift of {len(nodeids)} test(s) if it is intended, "
                "then review the cassette diff"
            )
    missing = [s for s in statuses if s.get("status") == "failed" and s.get("cause") == "missing-cassette"]
    if missing:
        target = str(missing[0]["nodeid"]) if len(missing) == 1 else None
        steps.append(
            f"{record_command(target, 'missing')}  # record the {len(missing)} missing cassette(s) "
            "against the real services"
        )
    wrong = [s for s in statuses if s.get("cause") == "wrong-test"]
    if wrong:
        steps.append(
            f"{record_command(str(wrong[0]['nodeid']), 'all')}  # record the test's own run "
            "(its cassette was recorded for another test)"
        )
    if any(s.get("status") == "updated" for s in statuses):
        steps.append("git diff -- '*.json'  # review every updated cassette before committing it")
    if unused:
        steps.append("pytest --agentreplay-update  # remove the unused cassette(s) (run the whole suite)")
    unwritten = [s for s in statuses if write_failed(s)]
    if unwritten:
        steps.append(
            f"free disk space or make the folder of {unwritten[0]['cassette']} writable (or pass a writable "
            "--agentreplay-cassette-dir), then record again  # a cassette could not be written"
        )
    if any(s.get("cause") == "not-saved" and not write_failed(s) for s in statuses):
        steps.append(
            "fix the failing test(s) and record again, or keep their cassette with "
            "--agentreplay-save-on-failure"
        )
    return steps


def _detail(status: dict[str, Any]) -> str:
    regressions, expected = int(status.get("regressions") or 0), int(status.get("expected") or 0)
    if not (regressions or expected):
        return ""
    return f" ({regressions} regression(s), {expected} expected)"


def summary_lines(statuses: Sequence[dict[str, Any]], *, unused: Sequence[str] = ()) -> list[str]:
    """The terminal summary: counts, every test that failed, drifted or changed a cassette, next steps."""
    numbers = counts(statuses, unused=unused)
    lines = [headline(numbers)]
    for status in statuses:
        name = str(status.get("status"))
        if name in ("drifted", "failed", "updated", "recorded"):
            lines.append(f"  {describe(status)}: {status['nodeid']} -> {status['cassette']}{_detail(status)}")
        elif name == "replayed" and status.get("expected"):
            lines.append(f"  replayed with expected drift: {status['nodeid']}{_detail(status)}")
    for path in unused:
        lines.append(f"  unused: {path}")
    steps = next_steps(statuses, unused=unused)
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return lines
