"""Issue 29 item 3: the cassette file's layout (``dumps_cassette``) spends fewer bytes on indentation and
keeps one field per line. Format 4 readers read it unchanged (it is JSON; digests are over values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import CASSETTE_WIDTH, dumps_cassette, dumps_pretty
from pytest_agentreplay.core.events import Event, RunMeta

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=40,
)


@given(JSON)
def test_any_json_value_reads_back(value: object) -> None:
    text = dumps_cassette(value)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert text.endswith("\n") and dumps_cassette(json.loads(text)) == text


def test_one_member_per_line_one_space_per_level() -> None:
    value = {"b": {"usage": {"in": 1, "out": 2}}, "a": ["x", 1, None, True], "c": [{"k": "v"}]}
    value |= {"d": [], "e": {}}
    assert dumps_cassette(value) == (
        "{\n"
        ' "a": ["x", 1, null, true],\n'
        ' "b": {\n'
        '  "usage": {\n'
        '   "in": 1,\n'
        '   "out": 2\n'
        "  }\n"
        " },\n"
        ' "c": [\n'
        "  {\n"
        '   "k": "v"\n'
        "  }\n"
        " ],\n"
        ' "d": [],\n'
        ' "e": {}\n'
        "}\n"
    )


def test_a_list_too_long_for_one_line_takes_one_line_per_item() -> None:
    digests = ["f" * 64, "e" * 64]
    lines = dumps_cassette({"event_digests": digests}).splitlines()
    assert lines[1:4] == [' "event_digests": [', f'  "{"f" * 64}",', f'  "{"e" * 64}"']
    short = dumps_cassette({"same": ["model", "tools"]}).splitlines()
    assert short[1] == ' "same": ["model", "tools"]' and all(len(line) <= CASSETTE_WIDTH for line in short)


@pytest.mark.parametrize("bad", [{"a": float("nan")}, {"a": object()}])
def test_what_json_refuses_is_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        dumps_cassette(bad)


def _chat_events() -> list[Event]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are terse."}]
    events = []
    for turn in range(4):
        messages = [*messages, {"role": "user", "content": f"question {turn}"}]
        events.append(
            {
                "seq": turn,
                "run_id": "r",
                "type": "model.call",
                "actor": "model",
                "class": "decision",
                "ts": "2026-01-01T00:00:00Z",
                "data": {"provider": "openai", "usage": {"input_tokens": 3, "output_tokens": 2}},
                "input_ref": {
                    "media_type": "application/vnd.agentreplay.http-request+json",
                    "inline": {
                        "method": "POST",
                        "url": "https://api.example.com/v1/chat/completions",
                        "headers": {"content-type": "application/json"},
                        "body": {
                            "content_type": "application/json",
                            "json": {"model": "m", "messages": messages, "tools": [{"type": "function"}]},
                        },
                    },
                },
            }
        )
    return [Event.model_validate(e) for e in events]


def test_a_saved_cassette_is_written_in_this_layout(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    loaded = save_cassette(path, RunMeta(run_id="r"), _chat_events())
    text = path.read_text(encoding="utf-8")
    assert text == dumps_cassette(json.loads(text))
    # A sixth of the bytes of the two-space layout, or more, on a payload of this depth.
    assert len(text) <= 0.85 * len(dumps_pretty(json.loads(text)))
    again = load_cassette(path)
    assert again.event_dicts() == loaded.event_dicts()


def test_a_cassette_in_the_two_space_layout_keeps_it(tmp_path: Path) -> None:
    """A file written before this layout: an update rewrites the changed lines, not every indentation."""
    path = tmp_path / "c.json"
    loaded = save_cassette(path, RunMeta(run_id="r"), _chat_events())
    old_text = dumps_pretty(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(old_text, encoding="utf-8")
    events = list(loaded.events)
    events[2] = Event.model_validate({**events[2].model_dump(by_alias=True), "ts": "2026-01-02T00:00:00Z"})
    save_cassette(path, loaded.run, events)
    new_text = path.read_text(encoding="utf-8")
    assert new_text == dumps_pretty(json.loads(new_text))
    changed = [a for a, b in zip(old_text.splitlines(), new_text.splitlines(), strict=True) if a != b]
    assert len(changed) == 3  # the field, its event's digest, the head hash
