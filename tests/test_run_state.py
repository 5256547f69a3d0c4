"""The run's state is typed: settings are a frozen RunSettings, per-run state one attribute per owner, the
mode a StrEnum that still reads as the names users write."""

from __future__ import annotations

import json

import pytest

from pytest_agentreplay.core.capture import Recorder, RunContext
from pytest_agentreplay.core.constants import REPLAY_MODES, Mode
from pytest_agentreplay.core.events import RunMeta
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.core.run_state import ReplayState, RequestMemo
from pytest_agentreplay.exceptions import ConfigError
from pytest_agentreplay.guard.runs import ParentRun


def _ctx(mode: str = "record", **settings: object) -> RunContext:
    return RunContext(Recorder(RunMeta(run_id="r")), mode=mode, settings=settings)


def test_run_settings_are_frozen_and_a_run_replaces_them_whole() -> None:
    ctx = _ctx(nodeid="t.py::t")
    before = ctx.settings
    with pytest.raises(AttributeError):
        before.nodeid = "other"  # type: ignore[misc]
    ctx.settings = before._replace(runtime_values=())
    assert (before.runtime_values, ctx.settings.runtime_values, ctx.settings.nodeid) == (None, (), "t.py::t")


def test_fixture_values_are_converted_the_way_the_run_reads_them() -> None:
    settings = RunSettings().with_overrides(
        {
            "idempotency_header": "X-Request-Id",
            "receipts": {"api.example": "data.id", "other.example": ""},
            "sandbox_hosts": ["Orders.Example"],
            "openai_compatible_base_urls": ["http://gw.local/v1"],
            "allow_read_repeats": None,
            "agent": "support-bot",  # a test setting, not a run setting: ignored here
        }
    )
    assert settings.idempotency_header == "x-request-id"
    assert dict(settings.receipts) == {"api.example": "data.id"}
    assert settings.sandbox_hosts == frozenset({"orders.example"})
    assert settings.openai_compatible_base_urls == ("http://gw.local/v1",)
    assert settings.allow_read_repeats is False
    # Unset values read as the defaults the run always used.
    defaults = RunSettings()
    assert (defaults.idempotency_header, defaults.model_data_class, defaults.http_data_class) == (
        "idempotency-key",
        "personal",
        "internal",
    )


@pytest.mark.parametrize("key", ["receipts", "tool_names", "openai_compatible_base_urls"])
def test_a_mistyped_fixture_value_is_a_config_error_naming_the_fixture(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunSettings().with_overrides({key: "api.example"})
    assert key in caught.value.headline
    assert "agentreplay_config" in caught.value.headline


@pytest.mark.parametrize("key", ["openai_compatible_base_urls", "anthropic_base_urls"])
def test_fixture_base_urls_are_read_as_the_project_file_reads_them(key: str) -> None:
    # One URL alone counts as a list of it, as in [tool.agentreplay]; a URL without a scheme is refused.
    settings = RunSettings().with_overrides({key: "http://gw.local/v1"})
    assert getattr(settings, key) == ("http://gw.local/v1",)
    with pytest.raises(ConfigError) as caught:
        RunSettings().with_overrides({key: ["http://gw.local/v1", "gw.local/v2"]})
    assert "'gw.local/v2' does not start with http:// or https://" in caught.value.evidence


def test_run_state_has_one_typed_attribute_per_owner_and_no_string_keyed_bag() -> None:
    ctx = _ctx()
    assert not hasattr(ctx, "extensions")
    assert isinstance(ctx.settings, RunSettings)
    assert (ctx.guard_token, ctx.resolved_hosts, ctx.unhook_frameworks, ctx.claimed_agent_runs) == (
        None,
        {},
        None,
        set(),
    )
    assert isinstance(ctx.requests, RequestMemo)
    assert isinstance(ctx.replay, ReplayState)
    assert (ctx.served_instead, ctx.comparison, ctx.origin_thread, ctx.redactor) == (None, None, None, None)


def test_the_mode_is_a_str_enum_equal_to_the_names_users_write() -> None:
    ctx = _ctx("model-comparison")
    assert ctx.mode is Mode.MODEL_COMPARISON
    assert ctx.mode == "model-comparison"
    assert f"mode: {ctx.mode}" == "mode: model-comparison"
    assert json.dumps({"mode": ctx.mode}) == '{"mode": "model-comparison"}'
    assert REPLAY_MODES == ("audit", "regression", "model-comparison", "sandbox")
    assert all(type(m) is str for m in REPLAY_MODES)  # their repr is what argparse and errors print
    with pytest.raises(ValueError):
        _ctx("replay")


@pytest.mark.parametrize(
    ("mode", "runs"),
    [("record", True), ("capture", True), ("sandbox", True), ("regression", False), ("audit", False)],
)
def test_whether_a_tool_body_runs_depends_on_the_mode_alone(mode: str, runs: bool) -> None:
    assert _ctx(mode).executes_tool() is runs


def test_a_child_process_reads_the_parent_run_typed() -> None:
    parent = ParentRun(
        {"token": "abc", "test": "t.py::t", "allow_hosts": ["localhost"], "block_network_only": True}
    )
    assert parent.settings == RunSettings(
        nodeid="t.py::t", allow_hosts=("localhost",), block_network_only=True
    )
    assert parent.guard_token == "abc"
    assert parent.settings.block_network_only
    assert not _ctx("regression").settings.block_network_only


def test_transport_rooms_give_each_owner_its_own_typed_state_per_run() -> None:
    from pytest_agentreplay.core.run_state import RunRooms

    class Conversations:
        def __init__(self) -> None:
            self.opened = 0

    class Calls:
        pass

    rooms, other_run = RunRooms(), RunRooms()
    first = rooms.of(Conversations, Conversations)
    first.opened += 1
    assert rooms.of(Conversations, Conversations) is first  # built once per run
    assert rooms.existing(Calls) is None
    assert isinstance(rooms.of(Calls, Calls), Calls)
    assert other_run.of(Conversations, Conversations).opened == 0  # another run starts empty
    with pytest.raises(TypeError, match="Calls room holds a Conversations"):
        other_run.of(Calls, Conversations)  # type: ignore[arg-type]
    rooms.drop(Conversations)  # its owner is done with it (the run's end): what it holds can be freed
    assert rooms.existing(Conversations) is None
    assert rooms.of(Conversations, Conversations).opened == 0
