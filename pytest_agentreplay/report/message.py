"""The message a test's status carries into every report and JUnit: for a failure the plugin raised, the
whole text the terminal showed (headline, evidence, location, numbered fixes), never one line of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..exceptions import AgentReplayError

LINE_LIMIT = 300


class RunFailures(Protocol):
    """What a message is taken from: a test's run (``session.TestRun``)."""

    @property
    def setup_error(self) -> BaseException | None: ...

    @property
    def failures(self) -> Sequence[BaseException]: ...

    @property
    def error(self) -> BaseException | None: ...


def status_message(shown: str | None, test_run: RunFailures | None, longrepr: str | None) -> str | None:
    """``shown``: what the plugin failed the test with; ``test_run``: the test's run (or None);
    ``longrepr``: pytest's text of a failure the plugin did not raise (the test's own)."""
    if shown is not None:
        return shown
    # The first failure of the run: setup, a refusal, or what ended the body.
    failure = None
    if test_run is not None:
        failure = test_run.setup_error or (test_run.failures[0] if test_run.failures else test_run.error)
    if isinstance(failure, AgentReplayError):
        return str(failure)
    if failure is not None:  # its first line
        text = getattr(failure, "headline", None) or str(failure) or type(failure).__name__
        return str(text).splitlines()[0][:LINE_LIMIT]
    # The test's own failure: its traceback belongs to pytest's report; its last line says what failed.
    last = (longrepr or "").strip().splitlines()[-1:]
    return last[0][:LINE_LIMIT] if last else None
