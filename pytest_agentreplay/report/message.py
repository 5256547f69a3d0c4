"""The message a test's status carries into every report and JUnit: for a failure the plugin raised, the
whole text the terminal showed (headline, evidence, location, numbered fixes), never one line of it."""

from __future__ import annotations

from typing import Any

LINE_LIMIT = 300


def first_failure(test_run: Any) -> BaseException | None:
    """The first failure of a test's run (a ``session.TestRun``): setup, a refusal, or what ended the body."""
    if test_run is None:
        return None
    if test_run.setup_error is not None:
        return test_run.setup_error  # type: ignore[no-any-return]
    if test_run.ctx is not None and test_run.ctx.failures:
        return test_run.ctx.failures[0]  # type: ignore[no-any-return]
    return test_run.error  # type: ignore[no-any-return]


def status_message(shown: str | None, test_run: Any, longrepr: str | None) -> str | None:
    """``shown``: what the plugin failed the test with; ``test_run``: the test's ``session.TestRun`` (or
    None); ``longrepr``: pytest's text of a failure the plugin did not raise (the test's own)."""
    if shown is not None:
        return shown
    failure = first_failure(test_run)
    from ..exceptions import AgentReplayError

    if isinstance(failure, AgentReplayError):
        return str(failure)
    if failure is not None:
        from .status import headline_of

        return headline_of(failure)
    # The test's own failure: its traceback belongs to pytest's report; its last line says what failed.
    last = (longrepr or "").strip().splitlines()[-1:]
    return last[0][:LINE_LIMIT] if last else None
