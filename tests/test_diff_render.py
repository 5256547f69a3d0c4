"""The drift report a developer reads (pytest_agentreplay.diff.render)."""

from __future__ import annotations

import copy
import tomllib
from typing import Any

import pytest

from pytest_agentreplay.diff import RuleSet, compare_histories, render_drift
from pytest_agentreplay.diff.text import MAX_FIELD_LINES, focused_diff, similarity, visible

NODEID = "tests/test_refunds.py::test_refund_small_order"
CASSETTE = "cassettes/tests/test_refunds/test_refund_small_order.json"


def ev(seq: int, etype: str, **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "seq": seq,
        "ts": f"2025-01-01T00:00:{seq:02d}Z",
        "type": etype,
        "actor": "runtime",
        "class": "decision",
        "data": {},
    }
    event.update(fields)
    return event


def history() -> list[dict[str, Any]]:
    return [
        ev(0, "run.start"),
        ev(
            1,
            "model.call",
            data={
                "provider": "openai",
                "endpoint": "/v1/chat/completions",
                "model": "gpt-4o",
                "decision": {"text": "Looking up order 42.", "tool_calls": []},
                "usage": {"total_tokens": 60},
            },
        ),
        ev(2, "tool.call", tool={"name": "get_order"}, data={"arguments": {"id": 42}}),
        ev(3, "policy.decision", data={"policy": "refund-limit", "verdict": "allow"}),
        ev(
            4,
            "effect",
            tool={"name": "refund", "idempotency_key": "ik-1"},
            effect={"kind": "payment.refund", "target": "order-42", "committed": True},
        ),
        ev(5, "run.end"),
    ]


def small_drift() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["usage"]["total_tokens"] = 64
    replayed[2]["data"]["arguments"]["id"] = 43
    replayed[3]["data"]["verdict"] = "deny"
    del replayed[4]
    replayed.insert(4, ev(4, "approval", data={"status": "requested", "subject": "refund"}))
    return recorded, replayed


EXPECTED_SMALL = """\
tests/test_refunds.py::test_refund_small_order: 4 regressions, 1 expected difference \
(cassette cassettes/tests/test_refunds/test_refund_small_order.json, mode regression)

seq 1 -> 1  model.call gpt-4o (openai /v1/chat/completions)
  data.usage.total_tokens: 60 -> 64  [expected, default rule *:data.usage]

seq 2 -> 2  tool.call get_order
  data.arguments.id: 42 -> 43  [regression, default rule *:**]

seq 3 -> 3  policy.decision refund-limit
  data.verdict: "allow" -> "deny"  [regression, default rule *:**]

seq 4 -> -  effect payment.refund -> order-42 [key ik-1]
  missing: recorded, not replayed  [regression, default rule *:@presence]

seq - -> 4  approval refund
  inserted: replayed, not recorded  [regression, default rule *:@presence]

How to fix:
  1. If the new behaviour is intended, accept it (rewrites the cassette from this run):
       pytest --agentreplay-update tests/test_refunds.py::test_refund_small_order
  2. If these differences should not fail, mark them expected in pyproject.toml:
       [tool.agentreplay.rules]
       "tool.call:data.arguments.id" = "expected"
       "policy.decision:data.verdict" = "expected"
       "effect:@presence" = "expected"
       "approval:@presence" = "expected"
     (or pass rules= to @pytest.mark.agentreplay for this test only)"""


def test_small_drift_exact_text() -> None:
    recorded, replayed = small_drift()
    result = compare_histories(recorded, replayed)
    text = render_drift(result, test=NODEID, cassette=CASSETTE, mode="regression")
    assert text == EXPECTED_SMALL


def test_render_is_deterministic() -> None:
    recorded, replayed = small_drift()
    first = render_drift(
        compare_histories(recorded, replayed), test=NODEID, cassette=CASSETTE, mode="regression"
    )
    second = render_drift(
        compare_histories(copy.deepcopy(recorded), copy.deepcopy(replayed)),
        test=NODEID,
        cassette=CASSETTE,
        mode="regression",
    )
    assert first == second


def test_no_drift_and_only_expected() -> None:
    recorded = history()
    result = compare_histories(recorded, copy.deepcopy(recorded))
    assert render_drift(result, test="t", cassette="c.json", mode="regression") == (
        "t: no drift (cassette c.json, mode regression)"
    )
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["text"] = "Checking order 42 now."
    text = render_drift(
        compare_histories(recorded, replayed, rules=RuleSet.defaults("model-comparison")),
        test="t",
        cassette="c.json",
        mode="model-comparison",
    )
    assert (
        text.splitlines()[0]
        == "t: 0 regressions, 1 expected difference (cassette c.json, mode model-comparison)"
    )
    assert "How to fix" not in text
    assert (
        '  data.decision.text: "Looking up order 42." -> "Checking order 42 now."  [expected, default rule '
        in text
    )


def test_audit_headline() -> None:
    result = compare_histories(history(), [], rules=RuleSet.defaults("audit"))
    assert (
        render_drift(result, test="t", cassette="c", mode="audit")
        == "t: not compared (cassette c, mode audit)"
    )


def test_nodeid_with_parameters_is_shell_quoted() -> None:
    recorded, replayed = small_drift()
    text = render_drift(compare_histories(recorded, replayed), test="tests/t.py::test_x[a b]", cassette="c")
    assert "pytest --agentreplay-update 'tests/t.py::test_x[a b]'" in text


def test_suggestions_generalise_list_indexes() -> None:
    recorded = history()
    recorded[1]["data"]["decision"]["tool_calls"] = [{"name": "get_order", "arguments": {"id": 1}}]
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["tool_calls"][0]["arguments"]["id"] = 2
    text = render_drift(compare_histories(recorded, replayed), test="t", cassette="c")
    assert "  data.decision.tool_calls[0].arguments.id: 1 -> 2  [regression, default rule *:**]" in text
    assert '       "model.call:data.decision.tool_calls[*].arguments.id" = "expected"' in text


# --------------------------------------------------------------------------------------- long values


def long_text(changed_line: int | None = None) -> str:
    lines = [f"Paragraph {n}: the customer asked about refund eligibility for order {n}." for n in range(200)]
    if changed_line is not None:
        lines[changed_line] = f"Paragraph {changed_line}: the customer is NOT eligible for a refund."
    return "\n".join(lines)


def test_long_multiline_text_shows_a_focused_unified_diff() -> None:
    recorded = history()
    recorded[1]["data"]["decision"]["text"] = long_text()
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["text"] = long_text(changed_line=120)
    text = render_drift(compare_histories(recorded, replayed), test="t", cassette="c")
    lines = text.splitlines()
    start = lines.index("  data.decision.text:  [regression, default rule *:**]")
    body = lines[start + 1 : lines.index("", start)]
    assert body == [
        "      @@ -119,5 +119,5 @@",
        "       Paragraph 118: the customer asked about refund eligibility for order 118.",
        "       Paragraph 119: the customer asked about refund eligibility for order 119.",
        "      -Paragraph 120: the customer asked about refund eligibility for order 120.",
        "      +Paragraph 120: the customer is NOT eligible for a refund.",
        "       Paragraph 121: the customer asked about refund eligibility for order 121.",
        "       Paragraph 122: the customer asked about refund eligibility for order 122.",
    ]
    assert "Paragraph 0:" not in text and "Paragraph 199" not in text


def test_long_single_line_shows_a_window_around_the_first_difference() -> None:
    prefix = "word " * 400
    recorded = history()
    recorded[1]["data"]["decision"]["text"] = (
        prefix + "refund approved for order 42, thank you" + " tail" * 100
    )
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["text"] = prefix + "refund DENIED for order 42, thank you" + " tail" * 100
    text = render_drift(compare_histories(recorded, replayed), test="t", cassette="c")
    body = text.split("  data.decision.text:  [regression, default rule *:**]\n", 1)[1].split("\n\n", 1)[0]
    assert body.splitlines() == [
        "      first difference at character 2007 (lengths 2539 -> 2537):",
        "      - ...rd word word word word refund approved for order 42, thank you ...",
        "      + ...rd word word word word refund DENIED for order 42, thank you ...",
    ]


def test_focused_diff_is_capped() -> None:
    a = "\n".join(f"line {n}" for n in range(500))
    b = "\n".join(f"line {n} changed" for n in range(500))
    lines = focused_diff(a, b)
    assert len(lines) == MAX_FIELD_LINES + 1
    assert lines[-1].startswith("... (") and lines[-1].endswith(" more lines)")


def test_long_structures_are_diffed_as_pretty_json() -> None:
    a = {"items": [{"sku": f"s{n}", "qty": n} for n in range(30)]}
    b = copy.deepcopy(a)
    b["items"][7]["qty"] = 70
    lines = focused_diff(a, b)
    assert '-      "qty": 7,' in lines and '+      "qty": 70,' in lines
    assert len(lines) <= MAX_FIELD_LINES


def test_inserted_long_value_is_truncated() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[2]["data"]["arguments"]["note"] = long_text()
    text = render_drift(compare_histories(recorded, replayed), test="t", cassette="c")
    field = text.split("  data.arguments.note:  [regression, default rule *:**]\n", 1)[1].split("\n\n", 1)[0]
    assert (
        field.splitlines()[0]
        == "      + Paragraph 0: the customer asked about refund eligibility for order 0."
    )
    assert field.splitlines()[-1] == "      ... (180 more lines)"


def test_similarity_is_word_based() -> None:
    assert similarity("the cat sat", "the cat sat") == 1.0
    assert 0.7 < similarity("I will look up order 42.", "I will look up the order 42.") < 1.0
    assert similarity("yes", "no") == 0.0


def test_control_characters_reach_the_terminal_escaped() -> None:
    """A policy named, a key spelled and a long text holding an escape sequence (ESC [2J clears the screen)
    or a line break: the failure text printed them raw, where they acted on the terminal or broke the line."""
    recorded = history()
    replayed = copy.deepcopy(recorded)
    for events in (recorded, replayed):
        events[3]["data"]["policy"] = "refund\x1b[2J-limit"
    replayed[3]["data"]["verdict\x1b[31m"] = "deny"
    replayed[3]["data"]["reason"] = "a" * 100 + "\x1b[2J\x07"
    text = render_drift(compare_histories(recorded, replayed), test="t", cassette="c.json", mode="regression")
    assert "\x1b" not in text and "\x07" not in text
    assert "policy.decision refund\\u001b[2J-limit" in text
    assert 'data.verdict\\u001b[31m: <absent> -> "deny"' in text
    assert "\\u001b[2J\\u0007" in text
    assert visible("line\nbreak\u0085") == "line\\nbreak\\u0085"


@pytest.mark.parametrize(
    "keys",
    [
        ["C\\temp\\new", 'say "hi"', "tab\there", "back\\slash\\u0041"],
        ["C:\\temp", "v1.2", "a[0]", ""],
    ],
    ids=["escaped", "unspellable"],
)
def test_a_suggested_rule_is_toml_that_marks_the_change_expected(keys: list[str]) -> None:
    """Keys with a backslash (a Windows path, a regex), a quote, a tab, or what a rule's path cannot spell
    (``:``, ``.``, ``[``, an empty key): each suggestion is a TOML line, and pasted into
    ``[tool.agentreplay.rules]`` it marks its change expected. A backslash went unescaped (``\\t`` read
    back as a tab, another key) and a ``:`` made a rule the parser refuses."""
    recorded = history()
    replayed = copy.deepcopy(recorded)
    for key in keys:
        replayed[3]["data"][key] = "deny"
    result = compare_histories(recorded, replayed)
    text = render_drift(result, test="t", cassette="c.json", mode="regression")
    lines = [line.strip() for line in text.splitlines() if line.strip().endswith('= "expected"')]
    table = tomllib.loads("\n".join(lines))
    assert len(table) == len(keys)
    if all(key and not any(c in key for c in ".[]:") for key in keys):
        assert set(table) == {f"policy.decision:data.{key}" for key in keys}
    accepted = compare_histories(recorded, replayed, rules=RuleSet.from_layers("regression", project=table))
    assert not accepted.regressions and len(accepted.differences) == len(keys)
