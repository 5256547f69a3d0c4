"""Comparison of aligned histories under rules (pytest_agentreplay.diff.compare)."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.core.canonical import hash_value
from pytest_agentreplay.diff import RuleSet, compare_histories
from pytest_agentreplay.diff.text import ABSENT


def ev(seq: int, etype: str, **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "run_id": "run-a",
        "seq": seq,
        "ts": f"2025-01-01T00:00:{seq:02d}Z",
        "type": etype,
        "actor": "runtime",
        "class": "decision",
        "trace_id": "t" * 32,
        "span_id": "s" * 16,
        "prev_hash": "0" * 64,
        "data": {},
    }
    event.update(fields)
    return event


REQUEST = {
    "method": "POST",
    "url": "https://api.openai.com/v1/chat/completions",
    "headers": {"content-type": "application/json", "x-request-id": "req_1", "Idempotency-Key": "ik-1"},
    "body": {
        "json": {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are a refund agent."},
                {"role": "user", "content": "Refund order 42"},
            ],
        }
    },
}


def model_call(seq: int, text: str = "I will look up order 42.", request: Any = None) -> dict[str, Any]:
    request = copy.deepcopy(REQUEST if request is None else request)
    return ev(
        seq,
        "model.call",
        actor="model",
        data={
            "provider": "openai",
            "endpoint": "/v1/chat/completions",
            "model": "gpt-4o",
            "decoding": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "tool_choice": "auto"},
            "decision": {
                "text": text,
                "stop_reason": "tool_calls",
                "tool_calls": [{"id": "call_1", "name": "get_order", "arguments": {"id": 42}}],
            },
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
            "latency_ms": 420,
            "response_id": "chatcmpl-1",
        },
        input_ref={"sha256": hash_value(request), "data_class": "internal"},
    )


def history() -> list[dict[str, Any]]:
    return [
        ev(0, "run.start"),
        model_call(1),
        ev(2, "tool.call", tool={"name": "get_order"}, data={"arguments": {"id": 42}, "attempt": 1}),
        ev(3, "tool.result", tool={"name": "get_order"}, data={"result": {"total": 19.99}, "attempt": 1}),
        ev(
            4,
            "retrieval",
            data={
                "query": "refund policy",
                "corpus_version": "v3",
                "document_ids": ["d1", "d2", "d3"],
                "scores": [0.9, 0.8, 0.7],
            },
        ),
        ev(
            5,
            "policy.decision",
            policy_version="2",
            data={"policy": "refund-limit", "verdict": "allow", "reason": "under 50"},
        ),
        ev(6, "approval", data={"status": "granted", "by": "alice", "subject": "refund"}),
        ev(
            7,
            "effect",
            tool={"name": "refund", "idempotency_key": "ik-1"},
            effect={
                "kind": "payment.refund",
                "target": "order-42",
                "receipt": {"id": "re_1"},
                "committed": True,
            },
        ),
        ev(8, "run.end"),
    ]


class Blobs:
    """A resolver over a dict of payloads by sha256 that records what it resolved."""

    def __init__(self, *payloads: Any) -> None:
        self.by_sha = {hash_value(p): p for p in payloads}
        self.calls: list[str] = []

    def __call__(self, ref: Mapping[str, Any]) -> Any:
        self.calls.append(ref["sha256"])
        return self.by_sha[ref["sha256"]]


def summary(result: Any) -> list[tuple[Any, ...]]:
    return [(d.kind, d.seq_recorded, d.path, d.recorded, d.replayed, d.verdict) for d in result.differences]


# -------------------------------------------------------------------------------------------- basics


def test_identical_histories_have_no_drift_and_volatile_fields_are_ignored() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    for n, event in enumerate(replayed):
        event["ts"] = f"2026-02-02T00:00:{n:02d}Z"
        event["trace_id"] = "x" * 32
        event["run_id"] = "run-b"
        event["prev_hash"] = "1" * 64
    replayed[1]["data"]["response_id"] = "chatcmpl-2"
    replayed[1]["data"]["latency_ms"] = 980
    result = compare_histories(recorded, replayed)
    assert result.differences == ()
    assert not result.has_regressions
    assert result.pairs_compared == len(recorded)
    assert result.pairs_equal == len(recorded) - 1  # the model call differs only in ignored fields
    assert result.ignored == 6  # ts, run_id, trace_id, prev_hash, response_id, latency_ms of that pair


def test_each_verdict() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[2]["data"]["arguments"]["id"] = 43  # regression (default)
    replayed[5]["data"]["reason"] = "under the limit"  # expected (project rule)
    replayed[6]["data"]["by"] = "bob"  # ignore (project rule)
    rules = RuleSet.from_layers(
        "regression", project={"policy.decision:data.reason": "expected", "approval:data.by": "ignore"}
    )
    result = compare_histories(recorded, replayed, rules=rules)
    assert summary(result) == [
        ("changed", 2, "data.arguments.id", 42, 43, "regression"),
        ("changed", 5, "data.reason", "under 50", "under the limit", "expected"),
    ]
    assert [d.rule.source for d in result.differences] == ["default", "project"]
    assert result.differences[0].rule.selector == "*:**"
    assert result.differences[1].rule.selector == "policy.decision:data.reason"
    assert result.differences[0].label == "get_order"
    assert result.ignored == 1
    assert result.has_regressions
    assert len(result.regressions) == 1 and len(result.expected) == 1


def test_only_expected_differences_do_not_regress() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["usage"]["completion_tokens"] = 12
    replayed[1]["data"]["usage"]["total_tokens"] = 62
    result = compare_histories(recorded, replayed)
    assert [(d.path, d.verdict) for d in result.differences] == [
        ("data.usage.completion_tokens", "expected"),
        ("data.usage.total_tokens", "expected"),
    ]
    assert not result.has_regressions


def test_bool_versus_int_is_a_difference() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[7]["effect"]["committed"] = 1
    assert summary(compare_histories(recorded, replayed)) == [
        ("changed", 7, "effect.committed", True, 1, "regression")
    ]


def test_added_and_removed_keys_use_absent() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    del replayed[2]["data"]["attempt"]
    replayed[2]["data"]["arguments"]["force"] = True
    result = compare_histories(recorded, replayed)
    assert summary(result) == [
        ("changed", 2, "data.arguments.force", ABSENT, True, "regression"),
        ("changed", 2, "data.attempt", 1, ABSENT, "regression"),
    ]
    as_dict = result.to_dict()["differences"]
    assert as_dict[0]["recorded_absent"] is True and "recorded" not in as_dict[0]
    assert as_dict[1]["replayed_absent"] is True


# ---------------------------------------------------------------------------------------- tolerances


def test_epsilon() -> None:
    recorded = history()
    close = copy.deepcopy(recorded)
    close[4]["data"]["scores"] = [0.905, 0.8, 0.7]
    far = copy.deepcopy(recorded)
    far[4]["data"]["scores"] = [0.95, 0.8, 0.7]
    rules = RuleSet.from_layers("regression", project={"retrieval:data.scores": {"epsilon": 0.01}})
    assert compare_histories(recorded, close, rules=rules).differences == ()
    assert compare_histories(recorded, close, rules=rules).tolerated == 1
    assert summary(compare_histories(recorded, far, rules=rules)) == [
        ("changed", 4, "data.scores[0]", 0.9, 0.95, "regression")
    ]
    assert summary(compare_histories(recorded, close)) == [
        ("changed", 4, "data.scores[0]", 0.9, 0.905, "regression")
    ]


@pytest.mark.parametrize(("recorded", "replayed"), [(10**400, 0.5), (0.5, -(10**400)), (2**1100, 2.0**1000)])
def test_epsilon_between_an_integer_past_every_float_and_a_float(recorded: int, replayed: float) -> None:
    """JSON integers have no bound: one past every float against a float raised OverflowError (int too large
    to convert to float) out of the tolerance. They differ by more than any finite epsilon."""
    rules = RuleSet.from_layers("regression", project={"retrieval:data.scores": {"epsilon": 0.01}})
    events = [[{"seq": 0, "type": "retrieval", "data": {"scores": [v]}}] for v in (recorded, replayed)]
    result = compare_histories(*events, rules=rules)
    assert summary(result) == [("changed", 0, "data.scores[0]", recorded, replayed, "regression")]
    endless = RuleSet.from_layers("regression", project={"retrieval:data.scores": {"epsilon": math.inf}})
    assert compare_histories(*events, rules=endless).tolerated == 1


def test_similarity() -> None:
    recorded = history()
    reworded = copy.deepcopy(recorded)
    reworded[1]["data"]["decision"]["text"] = "I will look up the order 42."
    different = copy.deepcopy(recorded)
    different[1]["data"]["decision"]["text"] = "Refund denied: policy forbids it."
    rules = RuleSet.from_layers(
        "regression", project={"model.call:data.decision.text": {"verdict": "regression", "similarity": 0.8}}
    )
    assert compare_histories(recorded, reworded, rules=rules).differences == ()
    assert [d.path for d in compare_histories(recorded, different, rules=rules).differences] == [
        "data.decision.text"
    ]
    # without the tolerance a rewording is a regression
    assert [d.verdict for d in compare_histories(recorded, reworded).differences] == ["regression"]


def test_order_insensitive_list() -> None:
    recorded = history()
    shuffled = copy.deepcopy(recorded)
    shuffled[4]["data"]["document_ids"] = ["d3", "d1", "d2"]
    changed = copy.deepcopy(recorded)
    changed[4]["data"]["document_ids"] = ["d3", "d1", "d9"]
    grown = copy.deepcopy(recorded)
    grown[4]["data"]["document_ids"] = ["d2", "d1", "d3", "d4"]
    rules = RuleSet.from_layers(
        "regression",
        project={"retrieval:data.document_ids": {"verdict": "regression", "order_insensitive": True}},
    )
    assert compare_histories(recorded, shuffled, rules=rules).differences == ()
    assert summary(compare_histories(recorded, changed, rules=rules)) == [
        ("changed", 4, "data.document_ids[1]", "d2", "d9", "regression")
    ]
    assert summary(compare_histories(recorded, grown, rules=rules)) == [
        ("changed", 4, "data.document_ids[3]", ABSENT, "d4", "regression")
    ]
    # in order, a permutation is three changed positions
    assert len(compare_histories(recorded, shuffled).differences) == 3


def test_regex_normaliser() -> None:
    recorded = history()
    recorded[5]["data"]["reason"] = "checked at 2025-01-01T10:00:00Z by req_abc123"
    replayed = copy.deepcopy(recorded)
    replayed[5]["data"]["reason"] = "checked at 2026-03-04T11:12:13Z by req_zz9"
    worse = copy.deepcopy(recorded)
    worse[5]["data"]["reason"] = "denied at 2026-03-04T11:12:13Z by req_zz9"
    rules = RuleSet.from_layers(
        "regression",
        project={"policy.decision:data.reason": {"normalize": [r"\d{4}-\d{2}-\d{2}T[\d:]+Z", r"req_\w+"]}},
    )
    assert compare_histories(recorded, replayed, rules=rules).differences == ()
    assert [(d.path, d.verdict) for d in compare_histories(recorded, worse, rules=rules).differences] == [
        ("data.reason", "regression")
    ]
    assert len(compare_histories(recorded, replayed).differences) == 1


# ------------------------------------------------------------------------------------------ payloads


def test_equal_refs_are_not_resolved() -> None:
    blobs = Blobs(REQUEST)
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["input_ref"]["size"] = 123  # metadata only: same sha
    assert compare_histories(recorded, replayed, resolve=blobs).differences == ()
    assert blobs.calls == []


def test_differing_refs_are_resolved_and_diffed_by_payload_path() -> None:
    changed = copy.deepcopy(REQUEST)
    changed["body"]["json"]["messages"][1]["content"] = "Refund order 43"
    changed["headers"]["x-request-id"] = "req_2"  # volatile header: ignored
    blobs = Blobs(REQUEST, changed)
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1] = model_call(1, request=changed)
    result = compare_histories(recorded, replayed, resolve=blobs)
    assert summary(result) == [
        (
            "changed",
            1,
            "input_ref.body.json.messages[1].content",
            "Refund order 42",
            "Refund order 43",
            "regression",
        ),
    ]
    assert sorted(blobs.calls) == sorted([hash_value(REQUEST), hash_value(changed)])
    # a changed prompt may be declared expected by payload path
    rules = RuleSet.from_layers(
        "regression", marker={"model.call:input_ref.body.json.messages[*].content": "expected"}
    )
    assert [
        d.verdict for d in compare_histories(recorded, replayed, rules=rules, resolve=blobs).differences
    ] == ["expected"]


def test_changed_idempotency_header_is_a_regression() -> None:
    changed = copy.deepcopy(REQUEST)
    changed["headers"]["Idempotency-Key"] = "ik-2"
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1] = model_call(1, request=changed)
    result = compare_histories(recorded, replayed, resolve=Blobs(REQUEST, changed))
    assert summary(result) == [
        ("changed", 1, "input_ref.headers.Idempotency-Key", "ik-1", "ik-2", "regression")
    ]


def test_inline_refs_and_appended_messages() -> None:
    longer = copy.deepcopy(REQUEST)
    longer["body"]["json"]["messages"].append({"role": "user", "content": "and order 43"})
    recorded = history()
    recorded[1]["input_ref"] = {"inline": REQUEST, "data_class": "internal"}
    replayed = copy.deepcopy(recorded)
    replayed[1]["input_ref"] = {"inline": longer, "data_class": "internal"}
    result = compare_histories(recorded, replayed)
    assert summary(result) == [
        (
            "changed",
            1,
            "input_ref.body.json.messages[2]",
            ABSENT,
            {"role": "user", "content": "and order 43"},
            "regression",
        ),
    ]


def test_without_resolver_differing_blob_refs_compare_by_sha() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["input_ref"]["sha256"] = "f" * 64
    assert [d.path for d in compare_histories(recorded, replayed).differences] == ["input_ref.sha256"]


# ----------------------------------------------------------------------------------- per-mode defaults


def test_changed_model_text_per_mode() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["text"] = "Refund denied."
    replayed[1]["data"]["model"] = "gpt-4.1"
    regression = compare_histories(recorded, replayed, rules=RuleSet.defaults("regression"))
    assert [(d.path, d.verdict) for d in regression.differences] == [
        ("data.decision.text", "regression"),
        ("data.model", "regression"),
    ]
    comparison = compare_histories(recorded, replayed, rules=RuleSet.defaults("model-comparison"))
    assert [(d.path, d.verdict) for d in comparison.differences] == [
        ("data.decision.text", "expected"),
        ("data.model", "expected"),
    ]
    assert not comparison.has_regressions


def test_model_comparison_still_fails_on_tool_choice_and_arguments() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[1]["data"]["decision"]["tool_calls"] = [
        {"id": "call_9", "name": "get_order", "arguments": {"id": 7}}
    ]
    result = compare_histories(recorded, replayed, rules=RuleSet.defaults("model-comparison"))
    assert [(d.path, d.verdict) for d in result.differences] == [
        ("data.decision.tool_calls[0].arguments.id", "regression")
    ]


def test_sandbox_expects_fake_service_results_and_receipts() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[3]["data"]["result"] = {"total": 0.0}
    replayed[7]["effect"]["receipt"] = {"id": "fake_1"}
    sandbox = compare_histories(recorded, replayed, rules=RuleSet.defaults("sandbox"))
    assert [(d.path, d.verdict) for d in sandbox.differences] == [
        ("data.result.total", "expected"),
        ("effect.receipt.id", "expected"),
    ]
    assert compare_histories(recorded, replayed).has_regressions


def test_audit_mode_compares_nothing() -> None:
    recorded = history()
    result = compare_histories(recorded, [], rules=RuleSet.defaults("audit"))
    assert result.differences == () and not result.compared and not result.has_regressions
    assert result.to_dict()["compared"] is False


def test_inserted_http_read_and_state_update_are_expected() -> None:
    recorded = history()
    replayed = [
        *recorded[:3],
        ev(
            90,
            "http",
            data={"method": "GET", "url": "https://x.test/a", "status": 200, "classification": "read"},
        ),
        ev(91, "state.update", state_hash="a" * 64),
        *recorded[3:],
    ]
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.event_type, d.verdict) for d in result.differences] == [
        ("inserted", "http", "expected"),
        ("inserted", "state.update", "expected"),
    ]
    assert not result.has_regressions


@pytest.mark.parametrize("etype_index", [1, 2, 4, 5, 6, 7])
def test_missing_decisions_and_effects_are_regressions(etype_index: int) -> None:
    recorded = history()
    replayed = [e for n, e in enumerate(recorded) if n != etype_index]
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.seq_recorded, d.verdict) for d in result.differences] == [
        ("missing", etype_index, "regression")
    ]


def test_presence_can_be_ignored_by_rule() -> None:
    recorded = history()
    replayed = [e for n, e in enumerate(recorded) if n != 6]
    rules = RuleSet.from_layers("regression", hook=[{"approval:@presence": "ignore"}])
    result = compare_histories(recorded, replayed, rules=rules)
    assert result.differences == () and result.ignored == 1


# ------------------------------------------------------------------------------------------- result


def test_to_dict_is_json_ready() -> None:
    recorded = history()
    replayed = copy.deepcopy(recorded)
    replayed[2]["data"]["arguments"]["id"] = 43
    replayed.insert(3, ev(50, "tool.call", tool={"name": "audit"}, data={"arguments": {}}))
    data = compare_histories(recorded, replayed).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["has_regressions"] is True
    assert data["counts"]["regression"] == 2
    assert data["counts"]["inserted"] == 1 and data["counts"]["changed"] == 1
    assert data["differences"][0] == {
        "kind": "changed",
        "event_type": "tool.call",
        "label": "get_order",
        "path": "data.arguments.id",
        "seq_recorded": 2,
        "seq_replayed": 2,
        "verdict": "regression",
        "rule": {"source": "default", "selector": "*:**"},
        "recorded": 42,
        "replayed": 43,
    }


def test_importing_the_diff_package_does_not_import_deepdiff() -> None:
    code = "import sys, pytest_agentreplay.diff; assert 'deepdiff' not in sys.modules, 'deepdiff imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


_LAZY_DEEPDIFF = """
import sys
from pytest_agentreplay.diff import compare_histories
def ev(seq, **data):
    return {"seq": seq, "ts": f"t{seq}", "type": "http", "data": {"method": "GET", "url": "http://a", **data}}
recorded = [ev(0, status=200, latency_ms=1.0), ev(1, body={"a": [1, 2]})]
replayed = [ev(5, status=200, latency_ms=9.5), ev(6, body={"a": [1, 2]})]
result = compare_histories(recorded, replayed)
assert not result.differences and result.ignored == 3 and result.pairs_equal == 1, result
assert "deepdiff" not in sys.modules, "deepdiff imported for equal and ignored-only pairs"
replayed[1]["data"]["body"]["a"][1] = 3
assert [d.path for d in compare_histories(recorded, replayed).differences] == ["data.body.a[1]"]
assert "deepdiff" in sys.modules
"""


def test_deepdiff_is_imported_by_the_first_pair_that_is_walked() -> None:
    """A replay whose pairs are equal but for the envelope, or differ only where the rules ignore (the
    common CI pass), never loads deepdiff; the first pair that has to be walked does."""
    subprocess.run([sys.executable, "-c", _LAZY_DEEPDIFF], check=True)


class DeepDiffCalls(NamedTuple):
    """What ``diff/structural.py`` asked DeepDiff (its values and options), and the reports to take out
    of the trees it answers."""

    calls: list[tuple[Any, Any, dict[str, Any]]]
    dropped: list[str]


@pytest.fixture
def deepdiff_calls(monkeypatch: pytest.MonkeyPatch) -> DeepDiffCalls:
    from deepdiff import DeepDiff

    from pytest_agentreplay.diff import structural

    seen = DeepDiffCalls([], [])

    class Spy(DeepDiff):
        def __init__(self, t1: Any, t2: Any, **options: Any) -> None:
            seen.calls.append((t1, t2, options))
            super().__init__(t1, t2, **options)
            for report in seen.dropped:
                self.pop(report, None)

    monkeypatch.setattr(structural, "DeepDiff", Spy)
    return seen


def test_the_descent_into_a_differing_pair_is_deepdiffs_tree(deepdiff_calls: DeepDiffCalls) -> None:
    """What differs inside a pair is what DeepDiff's tree view reports, asked with the options that make it
    judge JSON values: it is handed the pair's values, and a report taken out of its tree is no difference
    (a walk of the engine's own would still find it)."""
    args = {"n": 1, "__k": "x", "f": 1, "b": True}
    recorded = [ev(0, "tool.call", tool={"name": "t"}, data={"args": args})]
    replayed = copy.deepcopy(recorded)
    replayed[0]["data"]["args"].update(n=2, __k="y", f=1.0, b=1, new=[1])

    def found() -> list[tuple[str, Any, Any]]:
        return [(d.path, d.recorded, d.replayed) for d in compare_histories(recorded, replayed).differences]

    assert found() == [
        ("data.args.__k", "x", "y"),
        ("data.args.b", True, 1),
        ("data.args.n", 1, 2),
        ("data.args.new", ABSENT, [1]),
    ]
    [(t1, t2, options)] = deepdiff_calls.calls
    assert (t1, t2) == (recorded[0]["data"], replayed[0]["data"])
    assert options["view"] == "tree" and options["threshold_to_diff_deeper"] == 0
    assert options["ignore_private_variables"] is False and options["ignore_type_subclasses"] is True
    deepdiff_calls.dropped.extend(("values_changed", "type_changes"))
    assert found() == [("data.args.new", ABSENT, [1])]


def test_deepdiff_is_handed_only_the_list_items_that_differ(deepdiff_calls: DeepDiffCalls) -> None:
    """Equal items of a list are compared, not walked: of a conversation whose second message changed,
    DeepDiff sees the request and that message, never the others (it would build a level for each)."""
    messages = [{"role": "user", "content": f"q{i}"} for i in range(30)]
    recorded = [ev(0, "tool.call", tool={"name": "t"}, data={"request": {"messages": messages}})]
    replayed = copy.deepcopy(recorded)
    replayed[0]["data"]["request"]["messages"][1]["content"] = "changed"
    assert summary(compare_histories(recorded, replayed)) == [
        ("changed", 0, "data.request.messages[1].content", "q1", "changed", "regression")
    ]
    assert [t1 for t1, _, _ in deepdiff_calls.calls] == [recorded[0]["data"], messages[1]]


def test_lists_of_another_length_pair_their_items_not_their_indexes() -> None:
    """An object put before the others and a duplicated one are one added item each, not a change of every
    later index (DeepDiff's pairing of such lists): the engine pairs them (``list_changes``)."""
    recorded = [ev(0, "retrieval", data={"docs": [{"id": 1}, {"id": 2}]})]
    replayed = [ev(0, "retrieval", data={"docs": [{"id": 0}, {"id": 1}, {"id": 2}, {"id": 2}]})]
    assert summary(compare_histories(recorded, replayed)) == [
        ("changed", 0, "data.docs[0]", ABSENT, {"id": 0}, "regression"),
        ("changed", 0, "data.docs[2]", ABSENT, {"id": 2}, "regression"),
    ]


def test_a_pair_differing_only_where_the_rules_ignore_counts_as_the_walk_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``_Walker.ignored_only`` (a pair whose differences are all ignored scalars is counted, not walked)
    gives the result of the walk, whatever it meets: ignored and judged leaves mixed, ``true`` and ``1``,
    ``1`` and ``1.0``, JSON text in another key order, a value one side lacks, deeper objects, payloads."""
    from pytest_agentreplay.diff import compare

    def http(seq: int, **data: Any) -> dict[str, Any]:
        return ev(seq, "http", data={"method": "GET", "url": "http://svc/a", **data})

    recorded = [http(0, latency_ms=1.0), http(1, latency_ms=1.0, status=200), http(2, n=1), http(3, n=1)]
    recorded += [http(4, t='{"a":1,"b":2}'), http(5, deep={"x": 1}), http(6, latency_ms=2.0, gone=1)]
    recorded += [http(7, n=1.0), {**http(8), "output_ref": {"inline": {"status": 200}}}, http(9, flag=True)]
    replayed = [http(0, latency_ms=2.5), http(1, latency_ms=3.0, status=500), http(2, n=True)]
    replayed += [http(3, n=1.0), http(4, t='{"b":2,"a":1}'), http(5, deep={"x": 2})]
    replayed += [http(6, latency_ms=3.0, new=1), http(7, n=1), {**http(8), "output_ref": {"inline": {}}}]
    replayed += [http(9, flag=1)]
    # Text: empty, a JSON array spaced otherwise, text that opens a document and is none.
    recorded += [http(10, t=""), http(11, t="[1, 2]"), http(12, t="{x"), http(13, t="[]")]
    replayed += [http(10, t="[1,2]"), http(11, t="[1,2]"), http(12, t="{y"), http(14, t="")]
    for i, event in enumerate(replayed):
        event["ts"] = f"2026-01-01T00:00:{i:02d}Z"
    rules = [
        RuleSet.defaults("regression"),
        RuleSet.from_layers(
            "regression", project=dict.fromkeys(("http:data.n", "http:data.flag", "http:data.t"), "ignore")
        ),
        RuleSet.from_layers("regression", project={"http:data.*": "ignore"}),
        RuleSet.from_layers(
            "regression", project={"http:data.new": {"verdict": "ignore", "unrecorded": "expected"}}
        ),
    ]
    for rule_set in rules:
        quick = compare_histories(recorded, replayed, rules=rule_set).to_dict(wire=True)
        with monkeypatch.context() as patched:
            patched.setattr(compare._Walker, "ignored_only", lambda *args: False)
            walked = compare_histories(recorded, replayed, rules=rule_set).to_dict(wire=True)
        assert json.dumps(quick, default=repr) == json.dumps(walked, default=repr)


_SHARED_VALUES: list[Any] = [1, 1.0, True, "a", None, [1], {"k": 1}, {"k": 1.0}]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, len(_SHARED_VALUES) - 1)), max_size=6),
    st.lists(
        st.tuples(st.sampled_from("abcdefg"), st.sampled_from(("same", "copy", "other", "absent"))),
        max_size=7,
    ),
)
def test_keys_told_apart_at_c_level_are_the_keys_a_walk_of_the_items_finds(
    left: list[tuple[str, int]], right: list[tuple[str, str]]
) -> None:
    """``_unshared`` and ``_differing_keys`` find the keys of two objects whose values are not the same
    object (or not the same JSON value) as a walk of the first one's items does, in its order, with the
    other's own keys after them: whatever the key orders, values shared or copied, a key on one side only."""
    from pytest_agentreplay.core.canonical import same_json
    from pytest_agentreplay.diff import compare

    a = {key: _SHARED_VALUES[n] for key, n in left}
    b: dict[str, Any] = {}
    for key, how in right:
        if how == "absent" or key not in a:
            b[key] = _SHARED_VALUES[len(key) % len(_SHARED_VALUES)]
        else:
            b[key] = {"same": a[key], "copy": copy.deepcopy(a[key]), "other": "x"}[how]
    b = dict(reversed(b.items()))  # another key order
    tail = [*(b.keys() - a.keys())] if a.keys() != b.keys() else []
    unshared = [k for k, v in a.items() if v is not b.get(k, ABSENT)]
    assert compare._unshared(a, b) == unshared + tail
    differing = [k for k, v in a.items() if v is not b.get(k, ABSENT) and not same_json(v, b.get(k, ABSENT))]
    assert compare._differing_keys(a, b) == differing + tail
