"""The end-of-session summary and what every report file renders, from the per-test statuses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..core.commands import record_command, update_command
from .status import RED, STATUSES, Cause, Status, TestStatus

if TYPE_CHECKING:
    from .comparison_table import Comparison

# Always shown in the headline, even at zero, so a reader sees at a glance what did not happen.
HEADLINE = ("replayed", "recorded", "drifted", "failed", "updated", "audited")
# pytest's own outcomes, in pytest's words, shown when they happened.
PYTEST_WORDS = ("error", "skipped", "xfailed", "xpassed", "rerun")
# Where the regression-verdict differences of a test went, by its status: only red ones fail the run.
REGRESSIONS_BY_STATUS = {Status.UPDATED: "regressions_accepted", Status.XFAILED: "regressions_xfailed"}


# NamedTuples, not frozen dataclasses: as immutable, and far cheaper to create at start-up.
class NetworkGuard(NamedTuple):
    """Which level guarded the session's network, and what ``--agentreplay-isolate`` did
    (``report/schema.json``'s ``network``)."""

    level: str
    isolation: str
    setting: str
    reason: str | None
    unreachable_hosts: list[str]

    @property
    def isolation_text(self) -> str:
        """What isolation did, and why: ``skipped (the session records)``."""
        return f"{self.isolation} ({self.reason})" if self.reason else self.isolation


class SessionReport(NamedTuple):
    """What every report file renders (``report.build_report``), redacted as a file may show it."""

    tests: list[TestStatus]
    unused: list[str]
    summary: dict[str, int]
    next_steps: list[str]
    network: NetworkGuard | None = None
    # None when no test compared models or replayed.
    comparison: Comparison | None = None


def counts(statuses: Sequence[TestStatus], *, unused: Sequence[str] = ()) -> dict[str, int]:
    """Per-status counts, reruns, unused cassettes, and the differences: ``regressions`` that fail the run
    (only red tests), those accepted by an update or in xfailed tests, and ``expected_differences``."""
    by_status = Counter(s.status for s in statuses)
    out = {status.value: by_status[status] for status in STATUSES}
    out["rerun"] = sum(s.reruns for s in statuses)
    out["unused"] = len(unused)
    out["tests"] = len(statuses)
    out["regressions"] = out["regressions_accepted"] = out["regressions_xfailed"] = 0
    for s in statuses:
        key = "regressions" if s.red else REGRESSIONS_BY_STATUS.get(s.status)
        if key is not None:
            out[key] += s.regressions
    out["expected_differences"] = sum(s.expected for s in statuses)
    return out


def shown_counts(numbers: dict[str, int]) -> tuple[str, ...]:
    """The counts a headline shows, in its order: pytest's own outcomes only when they happened."""
    return (*HEADLINE, *(word for word in PYTEST_WORDS if numbers.get(word)), "unused")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def differences_text(numbers: dict[str, int]) -> str:
    """``0 regressions, 26 expected differences`` and the regressions that do not fail the run, if any."""
    parts = [
        plural(numbers["regressions"], "regression"),
        plural(numbers["expected_differences"], "expected difference"),
    ]
    for key, where in (
        ("regressions_accepted", "accepted by --agentreplay-update"),
        ("regressions_xfailed", "in xfailed tests"),
    ):
        if numbers.get(key):
            parts.append(f"{plural(numbers[key], 'regression')} {where}")
    return ", ".join(parts)


def next_steps(statuses: Sequence[TestStatus], *, unused: Sequence[str] = ()) -> list[str]:
    """The commands to run next, most urgent first (each one works as printed)."""
    steps: list[str] = []
    drifted = [s for s in statuses if s.status == Status.DRIFTED]
    by_mode: dict[str, list[str]] = {}
    for s in drifted:
        by_mode.setdefault(s.mode, []).append(s.nodeid)
    for mode, nodeids in by_mode.items():
        command = update_command(nodeids if len(nodeids) <= 3 else (), mode)
        if command is not None:
            steps.append(
                f"{command}  # accept the drift of {len(nodeids)} test(s) if it is intended, "
                "then review the cassette diff"
            )
    missing = [s for s in statuses if s.status == Status.FAILED and s.cause == Cause.MISSING_CASSETTE]
    if missing:
        target = missing[0].nodeid if len(missing) == 1 else None
        steps.append(
            f"{record_command(target, 'missing')}  # record the {len(missing)} missing cassette(s) "
            "against the real services"
        )
    wrong = [s for s in statuses if s.cause == Cause.WRONG_TEST]
    if wrong:
        steps.append(
            f"{record_command(wrong[0].nodeid, 'all')}  # record the test's own run "
            "(its cassette was recorded for another test)"
        )
    pending = [s.pending for s in statuses if s.pending]
    if pending:
        steps.append(
            f"agentreplay review  # go through the {plural(len(pending), 'pending drift')} one by one: "
            "accept, reject or skip each"
        )
    if any(s.status == Status.UPDATED for s in statuses):
        steps.append("git diff -- '*.json'  # review every updated cassette before committing it")
    if unused:
        steps.append("pytest --agentreplay-update  # remove the unused cassette(s) (run the whole suite)")
    unwritten = [s for s in statuses if s.write_failed]
    if unwritten:
        steps.append(
            f"free disk space or make the folder of {unwritten[0].cassette} writable (or pass a writable "
            "--agentreplay-cassette-dir), then record again  # a cassette could not be written"
        )
    if any(s.cause == Cause.NOT_SAVED and not s.write_failed for s in statuses):
        steps.append(
            "fix the failing test(s) and record again, or keep their cassette with "
            "--agentreplay-save-on-failure"
        )
    return steps


def _detail(status: TestStatus) -> str:
    regressions, expected, reruns = status.regressions, status.expected, status.reruns
    parts = [f"{regressions} regression(s), {expected} expected"] if regressions or expected else []
    if status.rerecorded is not None:
        parts.append(status.rerecorded.line())
    if reruns:
        parts.append(f"{reruns} rerun")
    return f" ({'; '.join(parts)})" if parts else ""


def summary_lines(statuses: Sequence[TestStatus], *, unused: Sequence[str] = ()) -> list[str]:
    """The terminal summary: counts, every test that failed, drifted or changed a cassette, next steps."""
    numbers = counts(statuses, unused=unused)
    lines = [", ".join(f"{numbers[s]} {s}" for s in shown_counts(numbers))]
    if any(numbers[key] for key in ("regressions", "expected_differences", *REGRESSIONS_BY_STATUS.values())):
        lines.append(f"differences: {differences_text(numbers)}")
    for status in statuses:
        name = status.status
        if name in (*RED, Status.UPDATED, Status.RECORDED):
            lines.append(f"  {status.label(why=True)}: {status.nodeid} -> {status.cassette}{_detail(status)}")
            if status.pending:
                lines.append(f"    pending: {status.pending}")
        elif name == Status.REPLAYED and (status.expected or status.reruns):
            drift = "with expected drift" if status.expected else "after a rerun"
            lines.append(f"  replayed {drift}: {status.nodeid}{_detail(status)}")
        elif name in (Status.XFAILED, Status.XPASSED) and _detail(status):
            lines.append(f"  {name}: {status.nodeid}{_detail(status)}")
    for path in unused:
        lines.append(f"  unused: {path}")
    turned = [s.rerecorded for s in statuses if s.rerecorded is not None]
    if turned:  # the session's re-recording from the drift (``--agentreplay-record=drifted``)
        kept, sent = sum(r.calls_kept for r in turned), sum(r.calls_sent for r in turned)
        lines.append(
            f"re-recorded from the drift: {plural(len(turned), 'test')}, {plural(kept, 'call')} kept from "
            f"the cassettes, {plural(sent, 'call')} sent live"
        )
    steps = next_steps(statuses, unused=unused)
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return lines


def tolerated_lines(tolerated: Sequence[tuple[str, str]]) -> list[str]:
    """The (node id, call) pairs refused without failing their test (``tolerated_hosts``), each once."""
    if not tolerated:
        return []
    unique = list(dict.fromkeys(tolerated))
    lines = [f"tolerated: {plural(len(unique), 'call')} refused without failing the test"]
    lines.extend(f"  refused, tolerated: {call} in {nodeid}" for nodeid, call in unique)
    return lines
