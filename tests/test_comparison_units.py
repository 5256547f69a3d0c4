"""The model comparison's parts on their own: the Wilson interval against published values and an
independent formula, the verdicts, the aggregate of repeated runs, the price table, the comparison-only rule
options, paths under the rules and stored judge verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.core import settings_check as check
from pytest_agentreplay.core.prices import BUILT_IN, PriceTable, parse_prices
from pytest_agentreplay.core.settings_check import Origin
from pytest_agentreplay.diff.rules import RuleSet, default_rules, parse_rules
from pytest_agentreplay.exceptions import ConfigError
from pytest_agentreplay.replay.comparison import Judging, compare_decisions
from pytest_agentreplay.replay.judge import STORE_DIR, Judge, _parse, verdict_key
from pytest_agentreplay.replay.repeats import aggregate, runs_needed, verdict, wilson

# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Statistics in Medicine 17,
# table I, method 3 (the Wilson score interval without continuity correction).
PUBLISHED = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
]


@pytest.mark.parametrize(("k", "n", "low", "high"), PUBLISHED)
def test_the_wilson_interval_gives_the_published_values(k: int, n: int, low: float, high: float) -> None:
    assert wilson(k, n) == pytest.approx((low, high), abs=5e-5)


def _quadratic_roots(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    # (p^ - p)^2 = z^2 p (1 - p) / n, i.e. (n + z^2) p^2 - (2 n p^ + z^2) p + n p^2^ = 0.
    p = k / n
    a, b, c = n + z * z, -(2 * n * p + z * z), n * p * p
    root = math.sqrt(b * b - 4 * a * c)
    return ((-b - root) / (2 * a), (-b + root) / (2 * a))


def test_the_wilson_interval_is_the_root_pair_of_its_defining_equation() -> None:
    for n in range(1, 60):
        for k in range(n + 1):
            assert wilson(k, n) == pytest.approx(_quadratic_roots(k, n), abs=1e-12)


def test_the_verdict_is_the_intervals_place_against_the_minimum() -> None:
    assert verdict(wilson(10, 10), 0.9) == "inconclusive"  # 0.72-1.00
    assert verdict(wilson(10, 10), 0.7) == "pass"
    assert verdict(wilson(7, 10), 0.9) == "fail"  # 0.40-0.89
    assert verdict(wilson(8, 10), 0.9) == "inconclusive"  # 0.49-0.94
    # About 35 agreeing runs out of 35 clear 0.9: the smallest n whose interval lies above it.
    n = runs_needed(1.0, 0.9)
    assert n is not None and wilson(n, n)[0] >= 0.9 > wilson(n - 1, n - 1)[0]
    assert runs_needed(0.9, 0.9) is None


def _run(path: str, recorded: bool, equivalent: bool, live_tokens: int = 20) -> dict[str, Any]:
    return {
        "path": path,
        "recorded_path": "a > b",
        "path_agrees": recorded,
        "answer": {"equivalent": equivalent, "by": "equality"},
        "tokens": {"recorded": {"input": 10, "output": 10}, "live": {"input": live_tokens, "output": 0}},
        "latency_ms": {"recorded": 5.0, "live": 7.0},
        "cost": {"recorded": 0.001, "live": 0.002},
        "budget_problems": ["call 1: too much"] if live_tokens > 20 else [],
        "agree": recorded,
    }


def test_the_aggregate_counts_runs_paths_answers_and_budgets() -> None:
    runs = [_run("a > b", True, True)] * 7 + [_run("a > c", False, False, 40)] * 3
    out = aggregate(runs, 0.6)
    assert (out["runs"], out["agreement"], out["agreeing_runs"]) == (10, 0.7, 7)
    assert out["interval"] == [round(x, 4) for x in wilson(7, 10)]
    assert out["paths"] == [
        {"path": "a > b", "runs": 7, "recorded": True},
        {"path": "a > c", "runs": 3, "recorded": False},
    ]
    assert out["answers"]["agreeing"] == 7
    assert out["tokens"]["live"] == {"input": 26.0, "output": 0.0}  # the mean of a run
    assert out["budget_problems"] == ["call 1: too much"]  # once, not once per run
    assert out["verdict"] == "inconclusive"
    single = aggregate([_run("a > c", False, False)], 0.9)
    assert (single["runs"], single["verdict"]) == (1, "fail")


def test_the_price_table_finds_models_by_prefix_and_takes_the_projects_prices() -> None:
    table = PriceTable()
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert table.cost("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.15 + 0.6)
    assert table.cost("gpt-4o-2024-08-06", usage) == pytest.approx(2.5 + 10)
    assert table.cost("us.anthropic.claude-3-5-haiku-20241022-v1:0", usage) == pytest.approx(0.8 + 4)
    assert table.cost("claude-sonnet-4-5-20250929", usage) == pytest.approx(3 + 15)
    assert table.cost("mistral-large-latest", usage) == pytest.approx(2 + 6)
    assert table.cost("my-own-model", usage) is None
    # OpenAI counts cached input inside the input; Anthropic counts cache reads beside it.
    assert table.cost("gpt-4o", {"input_tokens": 1_000_000, "cached_input_tokens": 1_000_000}) == 1.25
    assert table.cost("claude-3-5-haiku", {"input_tokens": 0, "cache_read_input_tokens": 1_000_000}) == 0.08
    project = parse_prices({"my-own-model": {"input": 1, "output": 2}}, Origin("prices", "pyproject.toml"))
    assert PriceTable(project).cost("my-own-model-v2", usage) == 3.0
    # The built-in table as it is, or under the project's (which win, a built-in name included).
    assert dict(PriceTable().prices) == dict(PriceTable({}).prices) == dict(BUILT_IN)
    ours = parse_prices({"gpt-4o": {"input": 1, "output": 2}}, Origin("prices", "pyproject.toml"))
    assert PriceTable(ours).cost("gpt-4o", usage) == 3.0 and table.cost("gpt-4o", usage) == 12.5
    assert list(PriceTable(ours).prices) == list(BUILT_IN)


@pytest.mark.parametrize(
    "value",
    [{"m": {"input": 1}}, {"m": {"input": 1, "output": -2}}, {"m": {"input": 1, "output": 2, "x": 3}}, 3],
)
def test_a_bad_price_names_the_model_and_the_form(value: object) -> None:
    with pytest.raises(ConfigError, match=r"invalid prices.* in \[tool.agentreplay\]") as caught:
        parse_prices(value, Origin("prices", "[tool.agentreplay] of pyproject.toml"))
    assert "input = 2.5" in str(caught.value) or "dollars" in str(caught.value)


def test_comparison_settings_are_checked_where_they_are_given() -> None:
    origin = Origin("repeat", "the marker")
    assert check.repeat("12", origin) == 12
    assert check.share("90%", origin) == pytest.approx(0.9)
    for bad in (0, "ten", 201, True):
        with pytest.raises(ConfigError, match="from 1 to 200"):
            check.repeat(bad, origin)
    with pytest.raises(ConfigError, match="a rate from 0 to 1"):
        check.share(1.5, origin)


def test_the_comparison_rule_options_parse_and_refuse_bad_values() -> None:
    rules = parse_rules(
        {
            "model.call:@usage": {"max_increase": "25%"},
            "model.call:@latency": {"max_increase": 1},
            "model.call:data.decision.text": {"judge": {"rubric": "same refund", "model": "gpt-4o-mini"}},
        },
        source="project",
    )
    assert [r.max_increase for r in rules] == [0.25, 1.0, None]
    assert rules[2].judge == ("same refund", "gpt-4o-mini")
    assert "judge=gpt-4o-mini" in rules[2].describe()
    for bad, words in (
        ({"judge": {"rubric": "x"}}, "judge must be a table of rubric and model"),
        ({"judge": "be nice"}, "judge must be a table"),
        ({"max_increase": "a lot"}, "max_increase must be a share"),
        ({"max_increase": -0.5}, "max_increase must be a share"),
    ):
        with pytest.raises(ConfigError, match=words):
            parse_rules({"model.call:data.decision.text": bad}, source="project")


class _Event:
    type = "model.call"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], text: str | None = None) -> None:
        self.data = {
            "model": "gpt-4o-mini",
            "decision": {"text": text, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]},
            "usage": {"input_tokens": 100, "output_tokens": 10},
            "latency_ms": 3.0,
        }


def _rules(spec: dict[str, object]) -> RuleSet:
    return RuleSet(
        "model-comparison", [*default_rules("model-comparison"), *parse_rules(spec, source="project")]
    )


def test_the_path_leaves_out_arguments_the_rules_ignore() -> None:
    recorded: list[Any] = [_Event([("refund", {"order_id": "A1", "note": "x"})]), _Event([], "done")]
    live: list[Any] = [_Event([("refund", {"order_id": "A1", "note": "y"})]), _Event([], "done")]
    assert compare_decisions(recorded, live)["path_agrees"] is False
    ignoring = Judging(_rules({"model.call:data.decision.tool_calls[*].arguments.note": "ignore"}))
    out = compare_decisions(recorded, live, ignoring)
    assert out["path_agrees"] is True and out["path"] == "refund(order_id='A1')"
    assert out["cost"]["recorded"] == pytest.approx(2 * (100 * 0.15 + 10 * 0.6) / 1e6)


def test_a_stored_verdict_decides_a_judged_argument_without_a_call(tmp_path: Path) -> None:
    rubric, model = "says the same", "gpt-4o-mini"
    key = verdict_key("late parcel", "parcel is late", rubric, model)
    store = tmp_path / STORE_DIR
    store.mkdir()
    (store / f"{key}.json").write_text(json.dumps({"pass": True, "reason": "same meaning"}))
    # No provider and no URL: a judge call would fail, so passing proves the stored verdict was used.
    judge = Judge(tmp_path, None, None)
    rules = _rules(
        {
            "model.call:data.decision.tool_calls[*].arguments.reason": {
                "judge": {"rubric": rubric, "model": model}
            }
        }
    )
    recorded: list[Any] = [_Event([("escalate", {"reason": "late parcel"})])]
    live: list[Any] = [_Event([("escalate", {"reason": "parcel is late"})])]
    out = compare_decisions(recorded, live, Judging(rules, judge))
    assert out["path_agrees"] is True and judge.asked == 0
    assert out["judged"] == [
        {"field": "tool call 1 escalate.reason", "pass": True, "reason": "same meaning", "stored": True}
    ]
    other: list[Any] = [_Event([("escalate", {"reason": "customer is angry"})])]
    with pytest.raises(ConfigError, match="a judge rule needs the run's model calls to go to an OpenAI"):
        compare_decisions(recorded, other, Judging(rules, judge))


def test_a_judge_answer_that_is_no_verdict_fails_saying_so() -> None:
    assert _parse('Sure! {"pass": true, "reason": "ok"}') == (True, "ok")
    passed, reason = _parse("I think it is fine")
    assert not passed and "did not answer with a verdict" in reason
