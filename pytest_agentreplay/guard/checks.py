"""The gate every patched call goes through: find the guarding runs, decide, refuse if not allowed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .decision import decide
from .reports import refuse
from .runs import RUNS, GuardRun, guarding_runs


def check_address(
    family: int | None, address: object, channel: str, runs: list[GuardRun] | None = None
) -> None:
    """Raise :class:`~pytest_agentreplay.exceptions.NetworkBlockedError` unless ``address`` (of socket
    ``family``; None for a host by name) may be reached now by the guarding runs (or ``runs``)."""
    runs = guarding_runs() if runs is None else runs
    if not runs:
        return
    permitted, resolved = RUNS.allowances(runs)
    verdict = decide(
        family, address, [r.settings.allow_hosts for r in runs], permitted=permitted, resolved=resolved
    )
    if not verdict.allowed:
        refuse(verdict, channel, runs)


@contextmanager
def permitting(host: str) -> Iterator[None]:
    """Let the HTTP layer's own live call to ``host`` through (a mode that sends it on purpose)."""
    key = host.lower()
    with RUNS.lock:
        RUNS.permitted[key] += 1
    try:
        yield
    finally:
        with RUNS.lock:
            RUNS.permitted[key] -= 1
