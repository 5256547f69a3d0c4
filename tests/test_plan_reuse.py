"""The fixture plan takes the early plan's settings only when its inputs are the early plan's: it is then the
plan the full resolution gives, and otherwise (a marker a fixture added, a fixture's settings or cassette, a
bad marker) it is resolved again."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentreplay.core.config import Settings, build_settings
from pytest_agentreplay.exceptions import ConfigError
from pytest_agentreplay.shell.plan import TestPlan, early_plan, fixture_plan, parse_rules_of
from pytest_agentreplay.shell.session import TestRun

NODEID = "test_m.py::test_a"


class _Item:
    """What the plans read of a pytest item: its node id and its ``agentreplay`` marks."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.nodeid = NODEID
        self.marks = [m.mark for m in marks]

    def iter_markers(self, name: str) -> list[pytest.Mark]:
        return [m for m in self.marks if m.name == name]


def _settings(tmp_path: Path) -> Settings:
    return build_settings(rootdir=tmp_path, cli={}, ini={}, project={"allow_hosts": ["db.local"]})


def _plans(item: _Item, settings: Settings, early: TestPlan, **given: object) -> tuple[TestPlan, TestPlan]:
    """The fixture plan made from ``early``, and the one made without it."""
    kwargs: dict[str, object] = {"overrides": {}, "foreign": None, **given}
    reused = fixture_plan(item, settings, early=early, **kwargs)  # type: ignore[arg-type]
    resolved = fixture_plan(item, settings, **kwargs)  # type: ignore[arg-type]
    return reused, resolved


def _same(reused: TestPlan, resolved: TestPlan) -> None:
    """The same plan: every field, the test settings' each (they have no ``==`` of their own)."""
    assert vars(reused.test) == vars(resolved.test)
    assert reused._replace(test=None, resolved_from=None) == resolved._replace(test=None, resolved_from=None)


def test_unchanged_inputs_take_the_early_settings(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    cassette = tmp_path / "a.json"
    item = _Item(pytest.mark.agentreplay(mode="sandbox", allow_hosts=["api.local"], agent="x"))
    early = early_plan(item, settings, cassette)  # type: ignore[arg-type]
    reused, resolved = _plans(item, settings, early, cassette=cassette)
    assert reused.test is early.test
    _same(reused, resolved)
    assert reused.test.allow_hosts == ("db.local", "api.local") and reused.test.mode == "sandbox"


def test_a_named_cassette_is_taken_with_the_early_settings(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    item = _Item(pytest.mark.agentreplay(cassette="shared"))
    cassette = settings.cassette_dir / "shared.json"
    early = early_plan(item, settings, cassette)  # type: ignore[arg-type]
    reused, resolved = _plans(item, settings, early, cassette=cassette)
    assert reused.test is early.test and reused.cassette_named
    _same(reused, resolved)


@pytest.mark.parametrize(
    "change",
    ["marker added by a fixture", "fixture settings", "fixture cassette", "cassette placed by a fixture"],
)
def test_changed_inputs_are_resolved_again(tmp_path: Path, change: str) -> None:
    settings = _settings(tmp_path)
    cassette = tmp_path / "a.json"
    item = _Item(pytest.mark.agentreplay(mode="sandbox"))
    early = early_plan(item, settings, None if change == "cassette placed by a fixture" else cassette)  # type: ignore[arg-type]
    given: dict[str, object] = {"cassette": cassette}
    if change == "marker added by a fixture":
        item.marks.insert(0, pytest.mark.agentreplay(allow_hosts=["late.local"]).mark)
    elif change == "fixture settings":
        given["overrides"] = {"allow_hosts": ["fixture.local"]}
    elif change == "fixture cassette":
        given["cassette"] = tmp_path / "b.json"
    reused, resolved = _plans(item, settings, early, **given)
    assert reused.test is not early.test
    _same(reused, resolved)


def test_a_bad_marker_fails_the_fixture_plan_as_before(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    cassette = tmp_path / "a.json"
    item = _Item(pytest.mark.agentreplay(mode="nonsense"))
    early = early_plan(item, settings, cassette)  # type: ignore[arg-type]
    assert early.resolved_from is None and early.test.mode == "regression"
    with pytest.raises(ConfigError) as reused:
        fixture_plan(item, settings, overrides={}, cassette=cassette, foreign=None, early=early)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as resolved:
        fixture_plan(item, settings, overrides={}, cassette=cassette, foreign=None)  # type: ignore[arg-type]
    assert str(reused.value) == str(resolved.value)


def test_bad_fixture_settings_fail_as_before(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    cassette = tmp_path / "a.json"
    item = _Item(pytest.mark.agentreplay())
    early = early_plan(item, settings, cassette)  # type: ignore[arg-type]
    for overrides in ([], {"no_such_key": 1}):
        with pytest.raises(ConfigError) as reused:
            fixture_plan(item, settings, overrides=overrides, cassette=cassette, foreign=None, early=early)  # type: ignore[arg-type]
        with pytest.raises(ConfigError) as resolved:
            fixture_plan(item, settings, overrides=overrides, cassette=cassette, foreign=None)  # type: ignore[arg-type]
        assert str(reused.value) == str(resolved.value)


def test_parsing_the_rules_leaves_the_early_plans_settings_as_they_were(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    cassette = tmp_path / "a.json"
    raw = {"policy.decision:data.verdict": "regression"}
    item = _Item(pytest.mark.agentreplay(rules=raw))
    early = early_plan(item, settings, cassette)  # type: ignore[arg-type]
    plan = fixture_plan(item, settings, overrides={}, cassette=cassette, foreign=None, early=early)  # type: ignore[arg-type]
    assert plan.test is early.test
    parsed = parse_rules_of(plan, settings)
    assert early.test.marker_rules == raw and plan.test.marker_rules == raw
    assert parsed.test is not early.test and parsed.test.marker_rules != raw and parsed.test.marker_rules
    assert {**vars(parsed.test), "marker_rules": raw} == vars(early.test)
    assert parsed._replace(test=None) == plan._replace(test=None)
    plain = fixture_plan(_Item(), settings, overrides={}, cassette=cassette, foreign=None)  # type: ignore[arg-type]
    assert parse_rules_of(plain, settings) is plain  # nothing to parse: the plan itself


def test_a_recording_run_makes_its_own_metadata(tmp_path: Path) -> None:
    settings = build_settings(rootdir=tmp_path, cli={"record": "all"}, ini={}, project={})
    item = _Item(pytest.mark.agentreplay(agent="support-bot"))
    plan = fixture_plan(item, settings, overrides={}, cassette=tmp_path / "a.json", foreign=None)  # type: ignore[arg-type]
    run = TestRun(plan, settings, rootdir=tmp_path)
    ctx = run.begin()
    try:
        meta = ctx.recorder.run
        assert (meta.test, meta.agent, len(meta.run_id)) == (NODEID, "support-bot", 32)
        assert meta.recorded_at is not None and ctx.recording
    finally:
        run.end(passed=False)
