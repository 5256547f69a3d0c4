"""Diff rules: parsing, validation, precedence and per-mode defaults (pytest_agentreplay.diff.rules)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentreplay.diff.rules import Rule, RuleSet, default_rules, parse_rules
from pytest_agentreplay.exceptions import ConfigError

# ------------------------------------------------------------------------------------------- parsing


def test_shorthand_mapping() -> None:
    rules = parse_rules(
        {"model.call:data.decision.text": "expected", "ts": "ignore", "http": "regression"}, source="project"
    )
    assert [(r.event, r.path, r.verdict, r.source) for r in rules] == [
        ("model.call", "data.decision.text", "expected", "project"),
        ("*", "ts", "ignore", "project"),
        ("http", "**", "regression", "project"),
    ]


def test_table_values_and_list_of_dicts() -> None:
    rules = parse_rules(
        [
            {"event": "retrieval", "path": "data.scores", "epsilon": 0.01},
            {
                "selector": "model.call:data.decision.text",
                "verdict": "expected",
                "similarity": 0.9,
                "modes": ["model-comparison"],
            },
            {"*:**.request_id": {"verdict": "ignore", "normalize": [r"req_\w+"]}},
            [Rule(event="tool.call", path="@order", order_insensitive=True, source="other")],
        ],
        source="marker",
    )
    assert rules[0] == Rule(event="retrieval", path="data.scores", epsilon=0.01, source="marker", index=0)
    assert (rules[1].similarity, rules[1].modes, rules[1].verdict) == (0.9, ("model-comparison",), "expected")
    assert (rules[2].selector, rules[2].normalize) == ("*:**.request_id", (r"req_\w+",))
    assert (rules[3].selector, rules[3].order_insensitive, rules[3].source) == (
        "tool.call:@order",
        True,
        "marker",
    )
    assert [r.index for r in rules] == [0, 1, 2, 3]


def test_empty_layers() -> None:
    assert parse_rules(None, source="project") == []
    assert parse_rules({}, source="project") == []
    assert parse_rules([], source="hook") == []


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"model.call:data.decision.text": "expectd"}, "unknown verdict 'expectd'"),
        ({"model.call:data.x": {"verdict": "ignore", "epsilonn": 1}}, "unknown key(s) 'epsilonn'"),
        ({"model_call:data.x": "ignore"}, "event 'model_call' matches no event type"),
        ({"tool.call:data.args[x]": "ignore"}, "list index '[x]' must be [N] or [*]"),
        ({"tool.call:data..args": "ignore"}, "malformed field path"),
        ({"tool.call:@sequence": "ignore"}, "unknown pseudo path '@sequence'"),
        ({"*:data.text": {"normalize": ["("]}}, "normalize pattern '(' is invalid"),
        ({"*:data.text": {"similarity": 1.5}}, "similarity must be between 0 and 1"),
        ({"*:data.n": {"epsilon": -1}}, "epsilon must be >= 0"),
        ({"*:data.n": {"epsilon": float("nan")}}, "epsilon must be >= 0, got nan"),
        ({"*:data.text": {"similarity": float("nan")}}, "similarity must be between 0 and 1, got nan"),
        ({"model.call:@usage": {"max_increase": float("nan")}}, 'max_increase must be a share such as "25%"'),
        ({"model.call:@usage": {"max_increase": "nan%"}}, "got 'nan%'"),
        ({"*:data.n": {"epsilon": "small"}}, "epsilon must be a number"),
        ({"*:data.n": {"order_insensitive": "yes"}}, "order_insensitive must be true or false"),
        ({"*:data.n": {"modes": ["replay"]}}, "modes must be a list of replay modes"),
        ({"*:data.n": {}}, "neither a verdict nor a tolerance"),
        ({"*:data.n": 3}, "value must be a verdict or a table of options"),
        (["model.call:data.x"], "a rule must be a table/dict, not a bare string"),
    ],
)
def test_invalid_rules_raise_config_error_naming_the_rule(spec: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        RuleSet.from_layers("regression", project=spec)
    message = str(info.value)
    assert needle in message
    assert "(project)" in message
    assert "valid verdicts: ignore, expected, regression" in message
    assert "valid keys: selector, event, path, verdict, epsilon, similarity, order_insensitive" in message
    if isinstance(spec, dict):
        assert repr(next(iter(spec))) in message.splitlines()[0]


def test_invalid_marker_rule_names_marker_layer() -> None:
    with pytest.raises(ConfigError, match=r"'tool.call:data.x' \(marker\): unknown verdict 'fail'"):
        RuleSet.from_layers("regression", marker={"tool.call:data.x": "fail"})


def test_unknown_mode_is_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown agentreplay mode 'replay'"):
        RuleSet.from_layers("replay")


# ---------------------------------------------------------------------------------------- precedence


def test_precedence_project_marker_hook() -> None:
    sel = "tool.call:data.arguments.query"
    project_only = RuleSet.from_layers("regression", project={sel: "ignore"})
    assert project_only.judge("tool.call", "data.arguments.query").verdict == "ignore"

    with_marker = RuleSet.from_layers("regression", project={sel: "ignore"}, marker={sel: "expected"})
    judgement = with_marker.judge("tool.call", "data.arguments.query")
    assert (judgement.verdict, judgement.rule.source) == ("expected", "marker")

    with_hook = RuleSet.from_layers(
        "regression", project={sel: "ignore"}, marker={sel: "expected"}, hook=[{sel: "regression"}]
    )
    judgement = with_hook.judge("tool.call", "data.arguments.query")
    assert (judgement.verdict, judgement.rule.source) == ("regression", "hook")


def test_a_later_layer_wins_even_with_a_less_specific_selector() -> None:
    rules = RuleSet.from_layers(
        "regression", project={"tool.call:data.arguments.query": "regression"}, marker={"*:data": "expected"}
    )
    assert rules.judge("tool.call", "data.arguments.query").verdict == "expected"


def test_most_specific_selector_wins_within_a_layer() -> None:
    rules = RuleSet.from_layers(
        "regression",
        project={
            "tool.call:data.arguments.query": "regression",  # most literal keys
            "*:data.arguments": "ignore",
            "tool.call:data.**": "expected",
        },
    )
    assert rules.judge("tool.call", "data.arguments.query").verdict == "regression"
    assert rules.judge("tool.call", "data.arguments.limit").verdict == "ignore"
    assert rules.judge("tool.call", "data.attempt").verdict == "expected"
    assert rules.judge("tool.result", "data.arguments.limit").verdict == "ignore"
    # Same path: the exact event type beats the glob.
    rules = RuleSet.from_layers("regression", project={"tool.call:data.x": "expected", "*:data.x": "ignore"})
    assert rules.judge("tool.call", "data.x").verdict == "expected"
    assert rules.judge("http", "data.x").verdict == "ignore"


def test_tie_goes_to_the_rule_written_last() -> None:
    rules = RuleSet.from_layers("regression", project=[{"*:data.x": "ignore"}, {"*:data.x": "expected"}])
    assert rules.judge("http", "data.x").verdict == "expected"


def test_rule_without_verdict_inherits_it_and_keeps_its_tolerance() -> None:
    rules = RuleSet.from_layers(
        "model-comparison", project={"model.call:data.decision.text": {"similarity": 0.5}}
    )
    judgement = rules.judge("model.call", "data.decision.text")
    assert judgement.verdict == "expected"  # from the model-comparison default
    assert judgement.rule.similarity == 0.5 and judgement.rule.source == "project"
    assert judgement.verdict_rule.source == "default"


def test_modes_limit_a_rule() -> None:
    spec = {"model.call:data.decision.text": {"verdict": "ignore", "modes": ["sandbox"]}}
    assert (
        RuleSet.from_layers("sandbox", project=spec).judge("model.call", "data.decision.text").verdict
        == "ignore"
    )
    assert (
        RuleSet.from_layers("regression", project=spec).judge("model.call", "data.decision.text").verdict
        == "regression"
    )


# ---------------------------------------------------------------------------------------- path globs


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("data.decision.text", "data.decision.text", True),
        ("data.decision", "data.decision.text", True),  # a rule covers what is below it
        ("data.decision.text", "data.decision", False),
        ("data.decision.text", "data.decision.texts", False),
        ("**.id", "id", True),
        ("**.id", "output_ref.body.json.choices[0].message.tool_calls[2].id", True),
        ("**.id", "data.ids", False),
        ("input_ref.body.json.messages[*].content", "input_ref.body.json.messages[12].content", True),
        ("input_ref.body.json.messages[1].content", "input_ref.body.json.messages[12].content", False),
        ("input_ref.body.json.messages[*].content", "input_ref.body.json.messages.content", False),
        ("data.*_ms", "data.latency_ms", True),
        ("data.*", "data.anything.below", True),
        ("**.headers.x-stainless-*", "input_ref.headers.X-Stainless-Retry-Count", True),
        ("data.**.id", "data.id", True),
        ("data.**.id", "data.a[0].b.id", True),
        ("data.**.id", "effect.id", False),
    ],
)
def test_path_globs(pattern: str, path: str, matches: bool) -> None:
    rules = RuleSet("regression", parse_rules({f"*:{pattern}": "ignore"}, source="project"))
    assert (rules.judge("tool.call", path).verdict == "ignore") is matches


def test_pseudo_paths_only_match_pseudo_selectors() -> None:
    rules = RuleSet.from_layers("regression", project={"*:**": "ignore"})
    assert rules.judge("tool.call", "data.x").verdict == "ignore"
    assert rules.judge("tool.call", "@presence").verdict == "regression"
    assert rules.judge("tool.call", "@order").verdict == "regression"


# ------------------------------------------------------------------------------------------ defaults


@pytest.mark.parametrize(
    ("mode", "event_type", "path", "verdict"),
    [
        ("regression", "model.call", "ts", "ignore"),
        ("regression", "model.call", "trace_id", "ignore"),
        ("regression", "tool.call", "span_id", "ignore"),
        ("regression", "tool.call", "prev_hash", "ignore"),
        ("regression", "tool.call", "run_id", "ignore"),
        ("regression", "model.call", "data.response_id", "ignore"),
        ("regression", "model.call", "output_ref.body.json.id", "ignore"),
        ("regression", "model.call", "output_ref.body.json.created", "ignore"),
        ("regression", "model.call", "data.latency_ms", "ignore"),
        ("regression", "model.call", "data.usage.total_tokens", "expected"),
        ("regression", "model.call", "input_ref.headers.Date", "ignore"),
        ("regression", "http", "output_ref.headers.x-request-id", "ignore"),
        ("regression", "http", "output_ref.headers.set-cookie", "ignore"),
        ("regression", "http", "input_ref.headers.idempotency-key", "regression"),
        ("regression", "model.call", "data.decision.text", "regression"),
        ("regression", "model.call", "data.model", "regression"),
        ("regression", "model.call", "input_ref.body.json.messages[0].content", "regression"),
        ("regression", "model.call", "input_ref.body.json.system", "regression"),
        ("regression", "model.call", "data.decoding.temperature", "regression"),
        ("regression", "tool.call", "tool.name", "regression"),
        ("regression", "tool.call", "data.arguments.city", "regression"),
        ("regression", "effect", "effect.target", "regression"),
        ("regression", "policy.decision", "data.verdict", "regression"),
        ("regression", "approval", "data.status", "regression"),
        ("regression", "model.call", "@presence", "regression"),
        ("regression", "tool.call", "@presence", "regression"),
        ("regression", "effect", "@presence", "regression"),
        ("regression", "http", "@presence", "expected"),
        ("regression", "state.update", "@presence", "expected"),
        ("regression", "tool.call", "@order", "regression"),
        ("model-comparison", "model.call", "data.decision.text", "expected"),
        ("model-comparison", "model.call", "data.model", "expected"),
        ("model-comparison", "model.call", "input_ref.body.json.model", "expected"),
        ("model-comparison", "model.call", "data.decision.tool_calls[0].id", "ignore"),
        ("model-comparison", "model.call", "data.decision.tool_calls[0].name", "regression"),
        ("model-comparison", "model.call", "data.decision.tool_calls[0].arguments.q", "regression"),
        ("model-comparison", "model.call", "data.decoding.tool_choice", "regression"),
        ("model-comparison", "model.call", "input_ref.body.json.system", "regression"),
        ("model-comparison", "tool.call", "data.arguments.q", "regression"),
        ("sandbox", "tool.result", "data.result.rows", "expected"),
        ("sandbox", "http", "output_ref.body.json.status", "expected"),
        ("sandbox", "effect", "effect.receipt.id", "expected"),
        ("sandbox", "effect", "effect.target", "regression"),
        ("sandbox", "tool.call", "data.arguments.q", "regression"),
    ],
)
def test_per_mode_defaults(mode: str, event_type: str, path: str, verdict: str) -> None:
    assert RuleSet.defaults(mode).judge(event_type, path).verdict == verdict


def test_model_comparison_text_has_a_similarity_tolerance() -> None:
    rule = RuleSet.defaults("model-comparison").judge("model.call", "data.decision.text").rule
    assert rule.similarity == 0.8


def test_audit_compares_nothing() -> None:
    assert not RuleSet.defaults("audit").compares
    assert RuleSet.defaults("regression").compares


def test_default_rules_are_all_default_layer() -> None:
    for mode in ("audit", "regression", "model-comparison", "sandbox"):
        assert {r.source for r in default_rules(mode)} == {"default"}


# ------------------------------------------------------------------------ request headers, imported runs


def _model_call(headers: dict[str, str], body: dict[str, Any] | None = None) -> dict[str, Any]:
    request = {
        "method": "POST",
        "url": "https://api.anthropic.com/v1/messages",
        "headers": headers,
        "body": {"json": body or {"model": "claude", "max_tokens": 8192}},
    }
    return {
        "run_id": "r",
        "seq": 1,
        "ts": "t",
        "type": "model.call",
        "actor": "model",
        "class": "decision",
        "input_ref": {"inline": request},
        "data": {"provider": "anthropic", "decision": {"text": "ok"}},
        "prev_hash": "0" * 64,
    }


def _header_drift(
    recorded: dict[str, str], replayed: dict[str, str], *, imported: bool = False, **bodies: Any
) -> dict[str, str]:
    from pytest_agentreplay.diff import compare_histories

    result = compare_histories(
        [_model_call(recorded, bodies.get("recorded_body"))],
        [_model_call(replayed, bodies.get("replayed_body"))],
        rules=RuleSet.defaults("regression", imported=imported),
    )
    return {
        d.path.rpartition(".")[2] if "headers" in d.path else d.path: d.verdict for d in result.differences
    }


def test_transport_headers_never_drift() -> None:
    recorded = {"accept-encoding": "gzip, deflate", "user-agent": "httpx/0.27", "content-length": "10"}
    replayed = {
        "accept-encoding": "gzip, deflate, br",
        "user-agent": "httpx/0.28",
        "content-length": "12",
        "connection": "keep-alive",
        "x-stainless-retry-count": "0",
        "x-stainless-package-version": "2.1.0",
        "accept": "application/json",
    }
    assert _header_drift(recorded, replayed) == {}


def test_secret_headers_compared_by_presence_only() -> None:
    # Redacted on both sides: equal whatever they held.
    assert _header_drift({"authorization": "[REDACTED]"}, {"authorization": "Bearer [REDACTED]"}) == {}
    # Filtered at record time (absent), redacted now: never a difference.
    assert _header_drift({}, {"x-api-key": "[REDACTED]", "x-goog-api-key": "[REDACTED]"}) == {}
    # Sent when recorded, gone now: reported, not failing.
    assert _header_drift({"authorization": "[REDACTED]"}, {}) == {"authorization": "expected"}


def test_behaviour_headers_stay_visible_and_idempotency_key_regresses() -> None:
    drift = _header_drift(
        {"anthropic-beta": "tools-2024", "idempotency-key": "k1"},
        {"anthropic-beta": "tools-2025", "x-team-flag": "on", "idempotency-key": "k2"},
    )
    assert drift == {"anthropic-beta": "expected", "x-team-flag": "expected", "idempotency-key": "regression"}


def test_own_recordings_compare_bodies_strictly_imported_ones_expect() -> None:
    bodies = {"recorded_body": {"max_tokens": 8192}, "replayed_body": {"max_tokens": 64000}}
    assert _header_drift({}, {}, **bodies) == {"input_ref.body.json.max_tokens": "regression"}
    assert _header_drift({}, {}, imported=True, **bodies) == {"input_ref.body.json.max_tokens": "expected"}


def test_imported_recordings_do_not_compare_headers_they_lack() -> None:
    replayed = {"anthropic-version": "2023-06-01", "idempotency-key": "k", "x-flag": "1"}
    assert _header_drift({}, replayed, imported=True) == {}
    # A header the imported recording has is still compared.
    assert _header_drift({"x-flag": "0"}, {"x-flag": "1"}, imported=True) == {"x-flag": "expected"}
    assert _header_drift({"idempotency-key": "a"}, {"idempotency-key": "b"}, imported=True) == {
        "idempotency-key": "regression"
    }
    # Own recordings: a new header is reported.
    assert _header_drift({}, {"anthropic-version": "2023-06-01"}) == {"anthropic-version": "expected"}


def test_presence_only_and_unrecorded_options_parse_and_validate() -> None:
    from pytest_agentreplay.diff.rules import is_imported

    (rule,) = parse_rules(
        {"*:input_ref.headers.x-secret": {"presence_only": True, "unrecorded": "ignore"}}, source="project"
    )
    assert rule.presence_only and rule.unrecorded == "ignore" and rule.verdict is None
    assert rule.to_dict()["unrecorded"] == "ignore" and "presence_only" in rule.describe()
    with pytest.raises(ConfigError, match="unrecorded"):
        parse_rules({"*:x": {"unrecorded": "sometimes"}}, source="project")
    with pytest.raises(ConfigError, match="presence_only"):
        parse_rules({"*:x": {"presence_only": "yes"}}, source="project")
    assert is_imported({"source": "vcr"}) and not is_imported({}) and not is_imported(None)
    assert len(default_rules("regression", imported=True)) > len(default_rules("regression"))


def test_built_in_rules_are_what_parsing_their_table_gives() -> None:
    """The built-in rules of every mode (and of imported recordings) are built without the parse's checks
    where an entry is a verdict for an ``EVENT:PATH`` selector: they are what the parse gives, rule for
    rule, checks passed."""
    from pytest_agentreplay.core.constants import REPLAY_MODES
    from pytest_agentreplay.diff.rules import defaults

    for mode in REPLAY_MODES:
        for imported in (False, True):
            table = [{selector: value} for selector, value in defaults.default_specs(mode, imported)]
            assert default_rules(mode, imported=imported) == parse_rules(table, source="default")


def test_event_globs_match_as_fnmatch_says_and_rank_as_before() -> None:
    """A glob naming one event type matches it alone (its regex never compiled), any other as
    ``fnmatchcase`` says; and a rule's precedence counts its path's tokens as the sums over them did."""
    import fnmatch

    from pytest_agentreplay.core.constants import EVENT_TYPES
    from pytest_agentreplay.diff.rules import engine, split_path

    globs = ["*", "http", "HTTP", "model.call", "model.*", "?ttp", "[hm]ttp", "[!h]ttp", "tool.*", "x[", ""]
    for event_type in [*EVENT_TYPES, "HTTP", "model.callx", "x["]:
        for glob in globs:
            assert engine._event_matches(event_type, glob) is fnmatch.fnmatchcase(event_type, glob)

    def summed(rule: Rule) -> tuple[int, ...]:
        toks = split_path(rule.path)
        literal = sum(1 for t in toks if "*" not in t)
        partial = sum(1 for t in toks if "*" in t and t not in ("*", "**", "[*]"))
        single = sum(1 for t in toks if t in ("*", "[*]"))
        event = 2 if not any(c in rule.event for c in "*?[") else 0 if rule.event == "*" else 1
        return (literal, partial, single, event)

    paths = ["**", "*", "[*]", "data.*", "data.a*b", "**.latency_ms", "a[*].b*", "@order", "a.b.c"]
    for glob in globs[:-1]:
        for path in paths:
            rule = Rule(event=glob, path=path, verdict="ignore", source="project", index=3)
            assert engine._precedence(rule)[1:5] == summed(rule), rule
