"""model-comparison end to end: model calls go live (to a second local model server, optionally with
``--agentreplay-model``), tool reads, ``@tool`` results and writes are served from the cassette, and
the comparison report (per test section and session summary) says where the two models differ. A live
decision the cassette holds no tool result for is reported with the closest recorded call, not run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from servers import LLMServer, ModelReply
from test_modes_regression import Lab, make_lab, script

from pytest_agentreplay.replay.comparison import compare_decisions, render_comparison, summary_lines


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, flaky=False)


@pytest.fixture
def second_model(lab: Lab) -> Iterator[LLMServer]:
    """The recording is made with ``lab.llm``; the comparison talks to another model server."""
    lab.record()
    other = LLMServer().start()
    lab.monkeypatch.setenv("LLM_URL", other.url)
    try:
        yield other
    finally:
        other.stop()


def run_comparison(lab: Lab, *args: str) -> pytest.RunResult:
    lab.kit.CALLED.clear()
    return lab.run("--agentreplay-mode=model-comparison", *args)


def test_same_decisions_pass_and_the_report_says_so(lab: Lab, second_model: LLMServer) -> None:
    second_model.queue(
        "chat",
        ModelReply(
            text=None,
            tool_calls=[("lookup_order", {"order_id": "A1"}), ("get_policy", {"topic": "late delivery"})],
            input_tokens=30,
        ),
        ModelReply(text=None, tool_calls=[("create_ticket", {"title": "Late parcel A1", "order_id": "A1"})]),
        ModelReply(text="Your order A1 shipped with DHL and I opened a ticket.", output_tokens=20),
    )
    before = lab.seen()
    result = run_comparison(lab, "--agentreplay-model=gpt-5-mini")
    result.assert_outcomes(passed=1)
    # Only the live model was called; tools and writes came from the cassette.
    assert lab.seen() == before
    assert lab.kit.CALLED == []
    assert [r.json()["model"] for r in second_model.log] == ["gpt-5-mini"] * 3
    result.stdout.fnmatch_lines(
        [
            "*- agentreplay comparison -*",
            "model comparison: recorded gpt-4o-mini vs live gpt-5-mini",
            "  model calls: recorded 3, live 3",
            "  tool choice agreement: 100%   argument equality: 100%",
            "  final answer similarity: *",
            "  tokens in/out: recorded 240/36, live *",
            "    1. recorded lookup_order(order_id='A1'), get_policy(topic='late delivery')  ==  live *",
            "  the live model decided the same as the recorded one",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*= agentreplay =*",
            "*",
            "model comparison (gpt-4o-mini -> gpt-5-mini): 1 test(s), 1 decided the same, 0 differ",
            "  tool choice agreement 3/3, argument equality 3/3, mean final answer similarity *",
        ]
    )


def test_another_tool_choice_is_reported_and_not_executed(lab: Lab, second_model: LLMServer) -> None:
    script(second_model, second="escalate")
    before = lab.seen()
    result = run_comparison(lab)
    result.assert_outcomes(failed=1)
    assert lab.seen() == before, "a tool call or write reached the tools service"
    assert lab.kit.CALLED == [], "the escalate tool ran"
    assert len(second_model.log) == 2  # the agent stopped at the unserved tool call
    result.stdout.fnmatch_lines(
        [
            "*tool call escalate(order_id='A1', reason='late parcel', key=*) has no recorded result*",
            "*recorded tools: get_policy, notify_customer*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*- agentreplay comparison -*",
            "  tool choice agreement: 33%   argument equality: 33%",
            "    2. recorded create_ticket(order_id='A1', title='Late parcel A1')  !=  "
            "live escalate(order_id='A1', reason='late parcel')",
            "    3. recorded answer 'Order A1 has shipped with DHL; I opened a ticket for you.'  !=  "
            "live (none)",
            "  where they differ:",
            "    - call 2: recorded chose create_ticket(order_id='A1', title='Late parcel A1'), live chose "
            "escalate(order_id='A1', reason='late parcel')",
            "    - call 3: only the recorded model made it",
            "  not executed: tool call escalate(*) has no recorded result",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "model comparison (gpt-4o-mini -> gpt-4o-mini): 1 test(s), 0 decided the same, 1 differ",
            "  differs: test_agent.py::test_support: call 2: recorded chose create_ticket*",
        ]
    )


def test_changed_arguments_are_reported_with_the_closest_recorded_call(
    lab: Lab, second_model: LLMServer
) -> None:
    second_model.queue(
        "chat",
        ModelReply(
            text=None, tool_calls=[("lookup_order", {"order_id": "A1"}), ("get_policy", {"topic": "refunds"})]
        ),
    )
    before = lab.seen()
    result = run_comparison(lab, "--agentreplay-report=report.json")
    result.assert_outcomes(failed=1)
    assert lab.seen() == before and lab.kit.CALLED == []
    result.stdout.fnmatch_lines(
        [
            "*tool call get_policy(topic='refunds') has no recorded result*",
            "*recorded: get_policy(topic='late delivery')  ?seq *, unplayed?*",
            "*call 1: same tool, other arguments: recorded lookup_order(order_id='A1'), "
            "get_policy(topic='late "
            "delivery'), live lookup_order(order_id='A1'), get_policy(topic='refunds')*",
        ]
    )


def test_model_calls_are_the_only_live_calls(lab: Lab, second_model: LLMServer) -> None:
    """A read the cassette does not hold is not sent in model-comparison: it fails, closest shown."""
    script(second_model)
    lab.monkeypatch.setenv("AGENT_VARIANT", "changed_url")
    before = lab.seen()
    result = lab.pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-mode=model-comparison")
    result.assert_outcomes(failed=1)
    assert lab.seen() == before
    result.stdout.fnmatch_lines(["*no recorded HTTP exchange matches GET http://127.0.0.1:*/v2/orders/A1*"])


# -- the comparison functions on their own -------------------------------------------------------------


class _Event:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.type = "model.call"


def _call(tools: list[tuple[str, dict[str, Any]]], text: str | None = None, model: str = "m1") -> _Event:
    return _Event(
        {
            "model": model,
            "decision": {
                "text": text,
                "tool_calls": [{"id": "x", "name": n, "arguments": a} for n, a in tools],
            },
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "latency_ms": 2.5,
        }
    )


def test_compare_decisions_counts_agreement_tokens_and_latency() -> None:
    # Stand-ins with the two attributes the comparison reads (type, data).
    recorded: list[Any] = [_call([("a", {"x": 1})]), _call([("b", {})]), _call([], "done, all good")]
    live: list[Any] = [
        _call([("a", {"x": 2})], model="m2"),
        _call([("c", {})], model="m2"),
        _call([], "done, all fine", "m2"),
    ]
    out = compare_decisions(recorded, live)
    assert out["tool_choice_agreement"] == round(2 / 3, 3)
    assert out["argument_equality"] == round(1 / 3, 3)
    assert out["tokens"] == {"recorded": {"input": 30, "output": 15}, "live": {"input": 30, "output": 15}}
    assert out["latency_ms"] == {"recorded": 7.5, "live": 7.5}
    assert 0.5 < out["final_answer"]["similarity"] < 1
    assert out["differences"] == [
        "call 1: same tool, other arguments: recorded a(x=1), live a(x=2)",
        "call 2: recorded chose b(), live chose c()",
    ]
    json.dumps(out)  # JSON-able: it travels in report properties (xdist)
    text = render_comparison({**out, "unserved_tool_calls": []})
    assert "recorded m1 vs live m2" in text
    lines = summary_lines(
        [{**out, "test": "t::a"}, {**compare_decisions(recorded, recorded), "test": "t::b"}]
    )
    assert lines[0] == "model comparison (m1 -> m1, m1 -> m2): 2 test(s), 1 decided the same, 1 differ"
    assert lines[-1] == "  differs: t::a: call 1: same tool, other arguments: recorded a(x=1), live a(x=2)"
