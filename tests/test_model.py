"""The event records (pydantic models in ``core.events``): strict checks with located errors, dumps that copy,
the schema."""

from __future__ import annotations

import enum
import json
import pickle
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pytest_agentreplay import exceptions
from pytest_agentreplay.core.events import (
    CassetteDoc,
    EffectInfo,
    Event,
    PayloadRef,
    Record,
    RunMeta,
    RuntimeValuesData,
    ToolInfo,
    cassette_json_schema,
    event_to_dict,
    event_to_shared_dict,
)
from pytest_agentreplay.exceptions import AgentReplayError

GOOD: dict[str, Any] = {"run_id": "r", "seq": 0, "ts": "t", "type": "http", "actor": "tool", "class": "input"}


def problems(value: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as info:
        Event.model_validate(value)
    return [(p["loc"], p["type"]) for p in info.value.errors()]


def test_valid_input_builds_nested_records_and_defaults() -> None:
    event = Event.model_validate({**GOOD, "tool": {"name": "a"}, "input_ref": {"inline": {"x": [1]}}})
    assert isinstance(event.tool, ToolInfo) and event.tool.name == "a" and event.tool.idempotency_key is None
    assert isinstance(event.input_ref, PayloadRef) and event.input_ref.data_class == "internal"
    assert event.event_class == "input" and event.data == {}
    assert Event.model_validate(
        {**{k: v for k, v in GOOD.items() if k != "class"}, "event_class": "input"}
    ) == Event(run_id="r", seq=0, ts="t", type="http", actor="tool", event_class="input")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"seq": True}, [(("seq",), "int_type")]),  # strict: a bool is no int
        ({"seq": "1"}, [(("seq",), "int_type")]),  # no coercion
        ({"seq": -1}, [(("seq",), "greater_than_equal")]),
        ({"type": "nope"}, [(("type",), "literal_error")]),
        ({"type": ["http"]}, [(("type",), "literal_error")]),  # unhashable: still a located problem
        ({"extra": 1}, [(("extra",), "extra_forbidden")]),
        ({"tool": {"name": 2}}, [(("tool", "name"), "string_type")]),
        ({"tool": "a"}, [(("tool",), "model_type")]),
        ({"data": {1: "x"}}, [(("data", 1, "[key]"), "string_type")]),
        ({"input_ref": {"sha256": "abc"}}, [(("input_ref", "sha256"), "string_pattern_mismatch")]),
    ],
)
def test_every_problem_is_named_with_its_place(change: dict[str, Any], expected: list[Any]) -> None:
    assert problems({**GOOD, **change}) == expected


def test_a_missing_field_and_the_error_message() -> None:
    value = {k: v for k, v in GOOD.items() if k != "ts"}
    assert problems(value) == [(("ts",), "missing")]
    with pytest.raises(ValidationError) as info:
        Event(run_id="r", seq=-2, ts="t", type="http", actor="tool", event_class="input")
    assert isinstance(info.value, ValueError)
    expected = "seq\n  Input should be greater than or equal to 0 [type=greater_than_equal, input_value=-2"
    assert expected in str(info.value)


def test_a_dump_is_a_copy_and_the_shared_dict_is_equal() -> None:
    event = Event.model_validate(
        {**GOOD, "data": {"a": {"b": [1, 2]}}, "tool": {"name": "t"}, "output_ref": {"inline": {"body": [1]}}}
    )
    dumped = event_to_dict(event)
    assert dumped == event_to_shared_dict(event)
    assert dumped["class"] == "input" and "trace_id" not in dumped
    dumped["data"]["a"]["b"].append(3)
    dumped["output_ref"]["inline"]["body"].append(2)
    assert event.data == {"a": {"b": [1, 2]}} and event.output_ref is not None
    assert event.output_ref.inline == {"body": [1]}
    assert event.model_dump()["event_class"] == "input"
    copied = event.model_copy(update={"seq": 5})
    assert copied.seq == 5 and event.seq == 0 and copied.data is event.data


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(st.text(max_size=5), json_values, max_size=4), seq=st.integers(0, 10**6))
def test_dump_and_validate_round_trip(data: dict[str, Any], seq: int) -> None:
    event = Event.model_validate({**GOOD, "seq": seq, "data": data, "input_ref": {"inline": data}})
    again = Event.model_validate(json.loads(json.dumps(event_to_dict(event))))
    assert again == event and event_to_dict(again) == event_to_shared_dict(event)


def test_the_schema_accepts_what_the_records_accept_and_refuses_what_they_refuse() -> None:
    schema = cassette_json_schema()
    event = event_to_dict(Event.model_validate({**GOOD, "tool": {"name": "a"}}))
    doc = {
        "format": "pytest-agentreplay",
        "version": 4,
        "run": RunMeta(run_id="r").model_dump(exclude_none=True),
        "events": [event],
        "event_count": 1,
        "event_digests": ["0" * 64],
        "head_hash": "0" * 64,
    }
    CassetteDoc.model_validate(doc)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    for bad in ({**doc, "extra": 1}, {**doc, "events": [{**event, "seq": -1}]}, {**doc, "head_hash": "x"}):
        with pytest.raises(ValidationError):
            CassetteDoc.model_validate(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)


def test_a_field_under_both_its_names_is_one_too_many() -> None:
    assert problems({**GOOD, "event_class": "effect"}) == [(("event_class",), "extra_forbidden")]


def test_patterns_match_the_whole_value() -> None:
    assert problems({**GOOD, "input_ref": {"sha256": "0" * 64 + "\n"}}) == [
        (("input_ref", "sha256"), "string_pattern_mismatch")
    ]


def test_a_str_enum_member_is_its_literal_but_a_bool_is_no_int() -> None:
    class Actor(enum.StrEnum):
        TOOL = "tool"

    assert Event.model_validate({**GOOD, "actor": Actor.TOOL}).actor == "tool"
    with pytest.raises(ValidationError):
        CassetteDoc.model_validate({"version": True})


class Key(enum.StrEnum):
    A = "a"


def test_a_str_enum_dict_key_gets_one_verdict_and_becomes_its_string() -> None:
    """The old validator's fast check let a ``StrEnum`` key through and its located check refused it: a
    record with only that key was accepted, one with another problem too was refused for both."""
    event = Event.model_validate({**GOOD, "data": {Key.A: 1}})
    assert [type(key) for key in event.data] == [str] and event.data == {"a": 1}
    assert problems({**GOOD, "seq": -1, "data": {Key.A: 1}}) == [(("seq",), "greater_than_equal")]
    assert RunMeta.model_validate({"run_id": "r", "labels": {Key.A: "x"}}).labels == {"a": "x"}


def test_the_records_are_pydantic_models_and_dump_honours_its_mode() -> None:
    event = Event.model_validate({**GOOD, "data": {"pair": (1, 2)}, "tool": {"name": "t"}})
    assert isinstance(event, BaseModel) and isinstance(event.tool, BaseModel)
    assert event.model_dump()["data"]["pair"] == (1, 2)
    assert event.model_dump(mode="json")["data"]["pair"] == [1, 2]
    assert json.loads(event.model_dump_json(by_alias=True, exclude_none=True)) == {
        **GOOD,
        "tool": {"name": "t"},
        "data": {"pair": [1, 2]},
    }
    schema = Event.model_json_schema(by_alias=True)
    assert schema["properties"]["class"]["enum"] == ["input", "decision", "effect"]


def test_records_are_frozen() -> None:
    """Built once: an event is shared by the recorder, the comparison and the report, none of which may
    change what another reads. ``model_copy(update=...)`` makes a changed one."""
    event = Event.model_validate(GOOD)
    with pytest.raises(ValidationError):
        event.seq = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RunMeta(run_id="r").run_id = "other"  # type: ignore[misc]
    assert event.model_copy(update={"seq": 3}).seq == 3 and event.seq == 0


def test_the_old_error_name_is_pydantics_error() -> None:
    """``RecordValidationError`` was the package's own class; code catching it catches pydantic's error."""
    assert exceptions.RecordValidationError is ValidationError
    with pytest.raises(ValidationError):
        RunMeta.model_validate({"run_id": 1})


def test_the_error_survives_a_trip_between_processes() -> None:
    with pytest.raises(ValidationError) as info:
        Event.model_validate({**GOOD, "seq": "x"})
    again = pickle.loads(pickle.dumps(info.value))
    assert again.errors() == info.value.errors() and str(again) == str(info.value)
    assert not isinstance(info.value, AgentReplayError)  # a bad value from the caller, with its traceback


def test_a_trusted_construction_is_the_validated_record() -> None:
    """The replay hot path builds records unchecked (``construct_trusted``): equal to the validated ones,
    dumping and serializing alike, and as frozen."""
    tool = {"name": "t", "schema_version": None, "idempotency_key": "k"}
    ref = {"sha256": None, "inline": {"a": [1]}, "data_class": "internal", "media_type": "m", "size": None}
    values: dict[str, Any] = {
        **{k: v for k, v in GOOD.items() if k != "class"},
        "event_class": "input",
        "trace_id": None,
        "span_id": None,
        "state_hash": None,
        "policy_version": None,
        "tool": ToolInfo.construct_trusted(dict(tool)),
        "input_ref": PayloadRef.construct_trusted({**ref, "key_order": None}),
        "output_ref": None,
        "effect": None,
        "data": {"x": 1},
    }
    trusted = Event.construct_trusted(values)
    validated = Event.model_validate({**GOOD, "tool": tool, "input_ref": ref, "data": {"x": 1}})
    assert trusted == validated and trusted.model_fields_set == set(Event.model_fields)
    assert trusted.model_fields_set is not Event.construct_trusted(dict(values)).model_fields_set
    assert trusted.__pydantic_extra__ is None and trusted.__pydantic_private__ is None
    assert trusted.model_copy() == trusted and trusted.model_copy(deep=True) == validated
    assert trusted.model_dump() == validated.model_dump()
    assert trusted.model_dump_json(by_alias=True) == validated.model_dump_json(by_alias=True)
    assert event_to_dict(trusted) == event_to_shared_dict(trusted) == event_to_dict(validated)
    with pytest.raises(ValidationError):
        trusted.seq = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "kind", [ToolInfo, EffectInfo, PayloadRef, Event, RunMeta, RuntimeValuesData, CassetteDoc]
)
def test_a_trusted_record_sets_the_fields_a_validated_one_does(kind: type[Record]) -> None:
    """A trusted record's set of fields is copied from its class's (not hashed from its values again): the
    set a validated record of every field has, its own, and as open to ``model_copy(update=...)``."""
    values: dict[str, object] = {name: None for name in kind.model_fields}
    trusted = kind.construct_trusted(values)
    assert type(trusted.model_fields_set) is set and trusted.model_fields_set == set(values)
    assert trusted.model_fields_set is not kind.construct_trusted(dict(values)).model_fields_set
    name = next(iter(values))
    copied = trusted.model_copy(update={name: "x"})
    assert copied.model_fields_set == set(values) and trusted.model_fields_set == set(values)
