"""The comparison behind one call (``diff.pipeline.compare_run``): the rule layers in their order, the
lenient rules of an imported recording, and payloads read from the recording the refs point into."""

from __future__ import annotations

from pathlib import Path

from test_cli_support import build_run

from pytest_agentreplay.diff import RuleSet, compare_histories
from pytest_agentreplay.diff.pipeline import RuleLayers, compare_run, rules_for


def _runs(tmp_path: Path) -> tuple[object, object]:
    recorded = build_run(tmp_path / "cassettes" / "t.json")
    replayed = build_run(tmp_path / "replayed" / "t.json", run_id="run-0002", refund_amount=400)
    return recorded, replayed


def test_one_call_gives_what_the_steps_give(tmp_path: Path) -> None:
    recorded, replayed = _runs(tmp_path)
    by_hand = compare_histories(
        recorded.event_dicts(),  # type: ignore[attr-defined]
        replayed.event_dicts(),  # type: ignore[attr-defined]
        rules=RuleSet.from_layers("regression"),
        resolve=None,
    )
    result = compare_run(
        recorded.event_dicts(),  # type: ignore[attr-defined]
        replayed.event_dicts(),  # type: ignore[attr-defined]
        layers=RuleLayers("regression"),
        labels=None,
        payloads=recorded,  # type: ignore[arg-type]
    )
    assert result.has_regressions
    assert result.to_dict() == by_hand.to_dict()


def test_layers_apply_in_order_and_an_import_is_judged_leniently() -> None:
    own = rules_for(RuleLayers("regression"), {"source": "agentreplay"})
    imported = rules_for(RuleLayers("regression"), {"source": "vcr"})
    assert len(imported.rules) > len(own.rules)
    layered = rules_for(
        RuleLayers(
            "regression",
            project={"model.call:data.model": "expected"},
            marker={"model.call:data.model": "ignore"},
            hook=[{"selector": "model.call:data.model", "verdict": "regression"}],
            extra={"effect:data.receipt": "ignore"},
        ),
        None,
    )
    sources = [rule.source for rule in layered.rules]
    assert sources.index("project") < sources.index("marker") < sources.index("hook")
    # What the mode adds comes last, as layer "default" (the mode's own rules for its checks).
    assert sources[-1] == "default" and layered.rules[-1].verdict == "ignore"
