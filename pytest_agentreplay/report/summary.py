"""The end-of-session summary and the drift report file, from the per-test statuses.

A status is the dict :func:`pytest_agentreplay.report.status.decide` returns: ``nodeid``, ``cassette``,
``status`` (one of ``status.STATUSES``), ``cause`` (why a ``failed`` or ``error`` test failed),
``message``, ``mode``, ``regressions``, ``expected`` (its expected differences), ``drift`` and ``reruns``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .status import CAUSES, RED, STATUSES, write_failed

# Always shown in the headline, even at zero, so a reader sees at a glance what did not happen.
HEADLINE = ("replayed", "recorded", "drifted", "failed", "updated", "audited")
# pytest's own outcomes, in pytest's words, shown when they happened.
PYTEST_WORDS = ("error", "skipped", "xfailed", "xpassed", "rerun")
# Where the regression-verdict differences of a test went, by its status: only red ones fail the run.
REGRESSIONS_BY_STATUS = {"updated": "regressions_accepted", "xfailed": "regressions_xfailed"}


def counts(statuses: Sequence[dict[str, Any]], *, unused: Sequence[str] = ()) -> dict[str, int]:
    """Per-status counts (and ``rerun``: the attempts pytest-rerunfailures ran again), unused cassettes,
    and the differences: ``regressions`` that fail the run (in drifted, failed or errored tests; a green
    run has none), those ``--agentreplay-update`` accepted, those of tests pytest expected to fail, and
    the ``expected_differences`` the rules mark expected."""
    by_status = Counter(str(s.get("status")) for s in statuses)
    out = {status: by_status[status] for status in STATUSES}
    out["rerun"] = sum(int(s.get("reruns") or 0) for s in statuses)
    out["unused"] = len(unused)
    out["tests"] = len(statuses)
    out["regressions"] = out["regressions_accepted"] = out["regressions_xfailed"] = 0
    for s in statuses:
        name = str(s.get("status"))
        key = "regressions" if name in RED else REGRESSIONS_BY_STATUS.get(name)
        if key is not None:
            out[key] += int(s.get("regressions") or 0)
    out["expected_differences"] = sum(int(s.get("expected") or 0) for s in statuses)
    return out


def headline(numbers: dict[str, int]) -> str:
    parts = [f"{numbers[s]} {s}" for s in HEADLINE]
    parts.extend(f"{numbers[s]} {s}" for s in PYTEST_WORDS if numbers.get(s))
    parts.append(f"{numbers['unused']} unused")
    return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def differences_text(numbers: dict[str, int]) -> str:
    """``0 regressions, 26 expected differences`` and, when there are any, the regressions that do not
    fail the run, named for why: the same words in the terminal, Markdown and HTML."""
    parts = [
        _plural(numbers["regressions"], "regression"),
        _plural(numbers["expected_differences"], "expected difference"),
    ]
    if numbers.get("regressions_accepted"):
        parts.append(
            f"{_plural(numbers['regressions_accepted'], 'regression')} accepted by --agentreplay-update"
        )
    if numbers.get("regressions_xfailed"):
        parts.append(f"{_plural(numbers['regressions_xfailed'], 'regression')} in xfailed tests")
    return ", ".join(parts)


def describe(status: dict[str, Any]) -> str:
    """``failed (unmatched-call: a live call has no recorded counterpart)`` or just the status."""
    name = str(status.get("status"))
    cause = status.get("cause")
    if name in ("failed", "error") and cause:
        return f"{name} ({cause}: {CAUSES.get(str(cause), cause)})"
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
    reruns = int(status.get("reruns") or 0)
    parts = [f"{regressions} regression(s), {expected} expected"] if regressions or expected else []
    if reruns:
        parts.append(f"{reruns} rerun")
    return f" ({'; '.join(parts)})" if parts else ""


def summary_lines(statuses: Sequence[dict[str, Any]], *, unused: Sequence[str] = ()) -> list[str]:
    """The terminal summary: counts, every test that failed, drifted or changed a cassette, next steps."""
    numbers = counts(statuses, unused=unused)
    lines = [headline(numbers)]
    if any(numbers[key] for key in ("regressions", "expected_differences", *REGRESSIONS_BY_STATUS.values())):
        lines.append(f"differences: {differences_text(numbers)}")
    for status in statuses:
        name = str(status.get("status"))
        if name in (*RED, "updated", "recorded"):
            lines.append(f"  {describe(status)}: {status['nodeid']} -> {status['cassette']}{_detail(status)}")
        elif name == "replayed" and (status.get("expected") or status.get("reruns")):
            drift = "with expected drift" if status.get("expected") else "after a rerun"
            lines.append(f"  replayed {drift}: {status['nodeid']}{_detail(status)}")
        elif name in ("xfailed", "xpassed") and _detail(status):
            lines.append(f"  {name}: {status['nodeid']}{_detail(status)}")
    for path in unused:
        lines.append(f"  unused: {path}")
    steps = next_steps(statuses, unused=unused)
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return lines
