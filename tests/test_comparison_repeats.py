"""Model comparison that answers "can we switch to model X?", end to end: a refund agent on the official
OpenAI SDK records against a local model that agrees, then is compared with models that answer otherwise
(``comparison_servers.py``): repeated runs judged by Wilson intervals against ``min_agreement``, a judge
whose verdicts are stored, a usage budget, live reads past a divergence, the suite's table in the reports
and what replay did not spend."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_modes_regression  # noqa: F401 (imports the package and the clients before any inner session)
from comparison_servers import ComparisonModel, RefundTools, agent_module

from pytest_agentreplay.report import validate_report

ORDERS = ["A1", "A2", "A3", "A4", "A5"]


@dataclass
class Suite:
    pytester: pytest.Pytester
    model: ComparisonModel
    tools: RefundTools
    orders: list[str]

    def run(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-rA", *args)

    def record(self) -> None:
        self.model.mode = "agree"
        self.run("--agentreplay-record=all").assert_outcomes(passed=len(self.orders))
        self.model.model_calls = 0
        self.tools.log.clear()  # from here on, every write the service sees was sent by a replay

    def compare(self, *args: str) -> pytest.RunResult:
        return self.run("--agentreplay-mode=model-comparison", *args)

    def report(self, name: str = "report.json") -> Any:
        return json.loads((self.pytester.path / name).read_text(encoding="utf-8"))

    def rules(self, rules: str) -> None:
        self.pytester.makefile(".toml", pyproject=f"[tool.agentreplay.rules]\n{rules}\n")


def make_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, orders: list[str]
) -> Iterator[Suite]:
    pytester.makepyfile(test_agent=agent_module(orders))
    model, tools = ComparisonModel(), RefundTools()
    monkeypatch.setenv("LLM_URL", model.url)
    monkeypatch.setenv("TOOLS_URL", tools.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    try:
        yield Suite(pytester, model, tools, orders)
    finally:
        model.stop()
        tools.stop()


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Suite]:
    yield from make_suite(pytester, monkeypatch, ORDERS)


@pytest.fixture
def one(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Suite]:
    yield from make_suite(pytester, monkeypatch, ["A1"])


def reference_wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval as the roots of (p^ - p)^2 = z^2 p (1 - p) / n, solved for p: written out apart
    from the plugin's centre-and-half-width form, so a slip in either shows."""
    z = 1.959963984540054
    p = k / n
    root = z * math.sqrt(z * z + 4 * n * p * (1 - p))
    return ((2 * n * p + z * z - root) / (2 * (n + z * z)), (2 * n * p + z * z + root) / (2 * (n + z * z)))


def by_test(report: Any) -> dict[str, Any]:
    return {row["test"].split("[")[1].rstrip("]"): row for row in report["comparison"]["tests"]}


# -- repeats ---------------------------------------------------------------------------------------------


def test_repeated_runs_give_the_seeded_agreement_and_the_intervals_decide(suite: Suite) -> None:
    suite.record()
    suite.model.mode = "seeded"
    suite.model.shares = {"A1": 0.0, "A2": 0.1, "A3": 0.5, "A4": 0.8, "A5": 1.0}
    # Under xdist: a repeated test is one item, so its runs stay together on one worker.
    result = suite.compare(
        "--agentreplay-repeat=10", "-o", "agentreplay_min_agreement=0.7", "--agentreplay-report=report.json",
        "-n", "2",
    )  # fmt: skip
    report = suite.report()
    assert validate_report(report) == []
    rows = by_test(report)
    outcomes = {"pass": 0, "fail": 0, "inconclusive": 0}
    for order in ORDERS:
        choices = suite.model.choices[order]
        assert len(choices) == 10, order
        agreeing = sum(choices)
        row = rows[order]
        assert row["runs"] == 10
        assert row["agreement"] == agreeing / 10
        low, high = reference_wilson(agreeing, 10)
        assert row["interval"] == pytest.approx([low, high], abs=1e-4)
        expected = "fail" if high < 0.7 else "pass" if low >= 0.7 else "inconclusive"
        assert row["verdict"] == expected, order
        outcomes[expected] += 1
        recorded = f"lookup_order(order_id='{order}') > refund(amount=20, order_id='{order}')"
        paths = {p["path"]: p["runs"] for p in row["paths"]}
        assert paths.get(recorded, 0) == agreeing
        assert sum(paths.values()) == 10
    # The seed gives each verdict at least once: 10/10 passes, 8/10 is inconclusive, the rest fail.
    assert outcomes == {"pass": 1, "fail": 3, "inconclusive": 1}
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED*inconclusive: agreement 8/10, interval 0.49-0.94 straddles min_agreement 0.7: "
            "more repeats needed*",
        ]
    )
    result.stdout.fnmatch_lines(["*test_refund?A5?: failed: agreement 0/10, interval 0.00-0.28 lies wholly*"])
    assert suite.tools.writes() == [], "a write reached the tools service"


def test_a_marker_sets_repeat_and_min_agreement_of_one_test(one: Suite) -> None:
    one.record()
    one.pytester.makepyfile(
        conftest="import pytest\n\n@pytest.fixture\ndef agentreplay_config():\n"
        "    return {'repeat': 4, 'min_agreement': '50%'}\n"
    )
    one.model.mode = "agree"
    result = one.compare("--agentreplay-report=report.json")
    result.assert_outcomes(passed=1)
    row = one.report()["comparison"]["tests"][0]
    assert (row["runs"], row["agreement"], row["verdict"], row["min_agreement"]) == (4, 1.0, "pass", 0.5)
    assert one.model.model_calls == 4 * 3
    result.stdout.fnmatch_lines(["  verdict: passed: agreement 4/4, interval 0.51-1.00 lies wholly above*"])


def test_a_bad_repeat_fails_the_test_naming_the_setting(one: Suite) -> None:
    one.record()
    one.pytester.makepyfile(
        conftest="import pytest\n\n@pytest.fixture\ndef agentreplay_config():\n    return {'repeat': 0}\n"
    )
    result = one.compare()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*invalid repeat 0 in @pytest.mark.agentreplay*", "*from 1 to 200*"])


# -- judged answers ----------------------------------------------------------------------------------------


THREE_RUNS = ("--agentreplay-repeat=3", "-o", "agentreplay_min_agreement=0.4")
JUDGE_RULE = '"model.call:data.decision.text" = {judge = {rubric = "RUBRIC", model = "gpt-4o-mini"}}'


def test_a_judge_is_asked_once_per_pair_and_its_verdicts_are_stored(one: Suite) -> None:
    one.record()
    one.model.mode = "agree"
    one.model.answer_text = "Your order {order} got its refund: 20 EUR, issued today."
    without = one.compare(*THREE_RUNS, "--agentreplay-report=report.json")
    # Without a judge the default rule's similarity decides: the reworded answer is not equivalent.
    assert one.report()["comparison"]["tests"][0]["answers"]["equivalent"] == 0
    without.stdout.fnmatch_lines(["*equivalent final answer 0/3*"])

    one.rules(JUDGE_RULE.replace("RUBRIC", "the same refund and amount"))
    agent_calls = one.model.model_calls
    first = one.compare(*THREE_RUNS, "--agentreplay-report=report.json")
    assert one.model.judge_calls == 1, "one distinct (recorded, live) pair: one judge call"
    assert one.model.model_calls - agent_calls == 9, "the judge's call is no model call of the agent"
    row = one.report()["comparison"]["tests"][0]
    assert row["answers"]["equivalent"] == 3 and row["judged"] == 1
    first.stdout.fnmatch_lines(["*judged final answer: pass (judge): names the refund and its amount"])
    stored = list((one.pytester.path / "cassettes" / ".agentreplay-judge").glob("*.json"))
    assert len(stored) == 1
    verdict = json.loads(stored[0].read_text())
    assert verdict == {
        "judge_model": "gpt-4o-mini",
        "pass": True,
        "reason": "names the refund and its amount",
        "rubric": "the same refund and amount",
    }

    again = one.compare(*THREE_RUNS)
    assert one.model.judge_calls == 1, "a stored verdict is served without a call"
    again.stdout.fnmatch_lines(["*judged final answer: pass (stored verdict)*"])

    one.rules(JUDGE_RULE.replace("RUBRIC", "the same refund, amount and currency"))
    one.compare(*THREE_RUNS)
    assert one.model.judge_calls == 2, "a changed rubric asks again"
    # The judge's calls never reach the agent's history, nor a cassette.
    cassette = (one.pytester.path / "cassettes" / "test_agent" / "test_refund[A1].json").read_text()
    assert "grade" not in cassette


# -- usage, cost, latency ----------------------------------------------------------------------------------


def test_three_times_the_tokens_fails_a_usage_budget_naming_the_call(one: Suite) -> None:
    one.record()
    one.rules('"model.call:@usage" = {max_increase = "25%"}')
    one.model.mode = "agree"
    one.model.token_factor = 3
    result = one.compare()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*3 live model call(s) of test_agent.py::test_refund[[]A1[]] over a budget rule*",
            "  call 1: usage 660 tokens live vs 220 tokens recorded (+200%), over project rule "
            '"model.call:@usage" (max_increase=25%)',
        ]
    )
    one.model.token_factor = 1
    one.compare().assert_outcomes(passed=1)


def test_replay_says_what_it_did_not_spend(suite: Suite) -> None:
    suite.record()
    result = suite.run("--agentreplay-report=report.json")
    result.assert_outcomes(passed=5)
    # gpt-4o-mini: $0.15 in, $0.60 out per million; each call 200 in, 20 out; 15 calls.
    result.stdout.fnmatch_lines(
        ["not spent: 15 model call(s) served from cassettes, 3300 tokens, $0.0006 at the price table of *"]
    )
    spent = suite.report()["comparison"]["not_spent"]
    assert spent["model_calls"] == 15 and spent["cost"] == pytest.approx(15 * 42e-6)
    suite.pytester.makefile(
        ".toml", pyproject='[tool.agentreplay.prices]\n"gpt-4o-mini" = {input = 1.0, output = 2.0}\n'
    )
    result = suite.run()
    result.stdout.fnmatch_lines(["not spent: 15 model call(s)*, $0.0036 at the price table*"])


# -- past the first divergence ------------------------------------------------------------------------------


def test_live_reads_take_a_diverged_run_to_its_end_and_never_send_a_write(one: Suite) -> None:
    one.record()
    one.model.mode = "seeded"
    one.model.shares = {"A1": 1.0}
    before = len(one.tools.log)
    result = one.compare("-o", "agentreplay_live_reads=true", "--agentreplay-report=report.json")
    # The run diverged at its 2nd decision (a search instead of the refund) and went on to its end.
    result.stdout.fnmatch_lines(
        [
            "    2. recorded refund(amount=20, order_id='A1')  !=  live search_policy(query='refund A1')",
            "    3. recorded answer 'Refund of 20 EUR issued for order A1.'  !=  live refund(*)",
            "    4. recorded (none)  !=  live answer 'Refund of 20 EUR issued for order A1.'",
        ]
    )
    assert one.tools.log[before:] == [("GET", "/policy?q=refund+A1")], "only the read went live"
    row = one.report()["comparison"]["tests"][0]
    assert row["answers"]["equivalent"] == 1

    one.model.mode = "other_write"
    result = one.compare("-o", "agentreplay_live_reads=true")
    result.assert_outcomes(failed=1)
    assert one.tools.writes() == [], "a divergent write was sent"
    result.stdout.fnmatch_lines(["*diverged at call 2: unrecorded write*"])

    # Without live_reads the diverged run stops at the read, which is never sent.
    one.model.mode = "seeded"
    before = len(one.tools.log)
    one.compare().assert_outcomes(failed=1)
    assert one.tools.log[before:] == []


# -- the reports ------------------------------------------------------------------------------------------


def test_the_html_and_markdown_reports_hold_the_comparison_table(one: Suite) -> None:
    one.record()
    one.model.mode = "agree"
    one.compare("--agentreplay-repeat=2", "--agentreplay-report=report.html").assert_outcomes(skipped=1)
    page = (one.pytester.path / "report.html").read_text()
    assert "<table class=comparison>" in page and "addEventListener('click'" in page
    assert '<td data-sort="1.0">100%</td>' in page and "inconclusive" in page
    one.compare("--agentreplay-repeat=2", "--agentreplay-report=report.md")
    markdown = (one.pytester.path / "report.md").read_text()
    assert "| test | recorded model | live model | runs | agreement | interval |" in markdown
    assert "| test_agent.py::test_refund[A1] | gpt-4o-mini | gpt-4o-mini | 2 | 100% | 0.34-1.00 |" in markdown


def test_the_report_schema_describes_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentreplay.cli import main

    assert main(["schema", "--report"]) == 0
    schema = json.loads(capsys.readouterr().out)
    row = schema["$defs"]["comparison"]
    assert {"agreement", "interval", "runs", "paths"} <= set(row["required"])
    assert "comparison" in schema["properties"]


def test_the_package_documents_the_price_table_date() -> None:
    from pytest_agentreplay.core.prices import PRICES_DATE

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"price table of {PRICES_DATE}" in readme


def test_live_reads_go_to_the_tests_sandbox_service_when_it_names_one(
    one: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    one.record()
    sandbox = RefundTools()
    try:
        one.pytester.makepyfile(
            conftest="import os, pytest\n\n@pytest.fixture\ndef agentreplay_config():\n"
            "    urls = {os.environ['TOOLS_URL']: os.environ['SANDBOX_URL']}\n"
            "    return {'live_reads': True, 'sandbox': urls}\n"
        )
        monkeypatch.setenv("SANDBOX_URL", sandbox.url)
        one.model.mode = "seeded"
        one.model.shares = {"A1": 1.0}
        before = len(one.tools.log)
        result = one.compare()
        result.stdout.fnmatch_lines(
            ["*4. recorded (none)  !=  live answer 'Refund of 20 EUR issued for order A1.'"]
        )
        assert sandbox.log == [("GET", "/policy?q=refund+A1")]
        assert one.tools.log[before:] == [], "the read reached the recorded host instead of the sandbox"
    finally:
        sandbox.stop()
