"""A model-comparison test run N times (``repeat``): one pytest item whose body runs N times, each in a
run of its own against the live model, judged once on all N (``replay/repeats.py``).

One item, not N: the verdict (a rate and its interval against ``min_agreement``) belongs to the N runs
together, and N items could land on different xdist workers. The fixtures are shared by the N runs; each
run begins from the cassette again. A run's own failure is its data (a run off the recorded path); only
the verdict fails the test, skips it as inconclusive or lets it pass, and an exceeded budget fails it.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import suppress
from typing import NamedTuple, NoReturn, Protocol

import pytest
from _pytest.outcomes import OutcomeException

from ..core import settings_check as check
from ..core.setting_keys import BY_NAME
from ..exceptions import AgentReplayError, ComparisonError
from ..replay.repeats import FAIL, INCONCLUSIVE, aggregate, verdict_line
from ..report.status import Action, Cause, TestOutcome
from .session import TestRun


class TestLife(Protocol):
    """What the loop needs of ``life.TestLife`` (a protocol: the life imports this module)."""

    item: pytest.Item

    def fail(self, cause: Cause, message: str) -> NoReturn: ...

    def guard_to_run(self) -> None: ...


class ComparisonSettings(NamedTuple):
    """One test's comparison settings, resolved."""

    repeat: int
    min_agreement: float
    live_reads: bool


def comparison_settings_of(run: TestRun) -> ComparisonSettings:
    """The test's repeat, min_agreement and live_reads: the marker's and fixture's over the session's (a
    command-line value wins), each checked here, where only a replayed model comparison reads them."""
    settings, extra = run.settings, run.plan.test.extra
    place = f"@pytest.mark.agentreplay on {run.plan.nodeid} (or its agentreplay_config fixture)"
    values = {key: getattr(settings, key) for key in ComparisonSettings._fields}
    for key in values:
        checker = BY_NAME[key].check
        if extra.get(key) is not None and checker is not None:
            value = checker(extra[key], check.Origin(key, place))
            if key not in settings.overriding:
                values[key] = value
    return ComparisonSettings(**values)


def repeated_call(
    life: TestLife, run: TestRun, wanted: ComparisonSettings
) -> Generator[None, object, object]:
    comparisons = []
    result: object = None
    try:
        result = yield
        error: BaseException | None = None
    except (OutcomeException, KeyboardInterrupt, SystemExit):
        raise  # a skip, an xfail or an interrupt ends the test, as in a single run
    except BaseException as exc:
        error = exc
    comparisons.append(_end(life, run, error))
    for _ in range(wanted.repeat - 1):
        try:
            run.begin()
        except AgentReplayError as exc:
            life.fail(Cause.CONFIG, str(run.located(exc)))
        error = None
        try:
            life.item.runtest()
        except (OutcomeException, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            error = exc
        comparisons.append(_end(life, run, error))
    assert run.ctx is not None
    judged = aggregate(comparisons, wanted.min_agreement)
    run.ctx.comparison = judged
    plan = run.plan
    run.outcome = TestOutcome(plan.nodeid, str(plan.cassette), Action.REPLAYED, plan.test.mode)
    problems = judged.get("budget_problems") or []
    if judged["verdict"] == FAIL or problems:
        headline = f"{plan.nodeid}: {verdict_line(judged) if judged['verdict'] == FAIL else 'over budget'}"
        paths = [
            f"{p['runs']} x {p['path']}" + (" (recorded)" if p["recorded"] else "") for p in judged["paths"]
        ]
        error = ComparisonError(
            headline,
            evidence=[*paths, *problems],
            cassette=str(plan.cassette),
            mode=plan.test.mode,
            fixes=["see the agentreplay comparison section of the report for each run"],
        )
        life.fail(Cause.TEST, str(error))
    if judged["verdict"] == INCONCLUSIVE:
        pytest.skip(f"agentreplay model comparison {verdict_line(judged)}")
    return result


def _end(life: TestLife, run: TestRun, error: BaseException | None) -> dict[str, object]:
    """End one run and return its comparison; the run's own failures are its data, not the test's."""
    life.guard_to_run()
    with suppress(AgentReplayError):
        run.end(passed=error is None, exc=error)
    assert run.ctx is not None and run.ctx.comparison is not None, "a model-comparison run without comparison"
    return run.ctx.comparison
