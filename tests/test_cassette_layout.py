"""Issue 29 item 3: the cassette file's layout (``dumps_cassette``) spends fewer bytes on indentation and on
small objects spread over lines, and keeps a changed field one changed line. Format 4 readers read it
unchanged (it is JSON; digests are over values)."""

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


def test_one_space_per_level_and_what_fits_on_one_line() -> None:
    value = {"b": {"usage": {"in": 1, "out": 2}}, "a": ["x", 1, None, True], "c": [{"k": "v"}]}
    value |= {"d": [], "e": {}, "f": {"long": "y" * 110, "n": 1}}
    assert dumps_cassette(value) == (
        "{\n"
        ' "a": ["x", 1, null, true],\n'
        ' "b": {"usage": {"in": 1, "out": 2}},\n'
        ' "c": [{"k": "v"}],\n'
        ' "d": [],\n'
        ' "e": {},\n'
        ' "f": {\n'
        f'  "long": "{"y" * 110}",\n'
        '  "n": 1\n'
        " }\n"
        "}\n"
    )


def test_the_layout_before_objects_went_on_one_line() -> None:
    value = {"b": {"usage": {"in": 1, "out": 2}}, "a": ["x", 1, None, True], "c": [{"k": "v"}]}
    assert dumps_cassette(value, inline_objects=False) == (
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
        " ]\n"
        "}\n"
    )


@given(JSON)
def test_a_value_on_one_line_is_what_json_dumps_writes(value: object) -> None:
    """Whatever is written on one line is ``json.dumps(sort_keys=True)``'s text of it, and a value goes there
    exactly when it fits, the comma after it included: every line holds at most the width, unless one
    string alone is longer."""
    text = dumps_cassette({"k": value, "z": 0})
    compact = json.dumps(value, sort_keys=True, ensure_ascii=False)
    one_line = "{\n" + ' "k": ' + compact + ",\n" + ' "z": 0\n}\n'
    if len(' "k": ') + len(compact) + len(",") <= CASSETTE_WIDTH:
        assert text == one_line
    else:
        assert text != one_line
        for line in text.splitlines():
            assert len(line) <= CASSETTE_WIDTH or line.count('"') <= 4


def test_the_comma_after_a_value_counts_in_its_line() -> None:
    fits = {"a": {"k": "x" * 104}, "b": 1}  # ' "a": {"k": "x..."},' is 120 characters
    assert dumps_cassette(fits).splitlines()[1] == f' "a": {{"k": "{"x" * 104}"}},'
    over = {"a": {"k": "x" * 105}, "b": 1}
    assert all(len(line) <= CASSETTE_WIDTH for line in dumps_cassette(over).splitlines())
    assert dumps_cassette(over).splitlines()[1] == ' "a": {'
    # The layout before small objects went on one line did not count it: its files stay as they were.
    old = dumps_cassette({"a": ["x" * 110], "b": 1}, inline_objects=False).splitlines()
    assert old[1] == f' "a": ["{"x" * 110}"],' and len(old[1]) == CASSETTE_WIDTH + 1


def test_a_long_object_takes_a_line_per_member() -> None:
    many = {f"key{i}": i for i in range(50_000)}
    text = dumps_cassette({"m": many})
    assert text.count("\n") == 50_004 and json.loads(text) == {"m": many}


@pytest.mark.parametrize("bad", [{"a": float("nan")}, {"a": object()}])
def test_what_json_refuses_is_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        dumps_cassette(bad)


@pytest.mark.parametrize(
    "scalar", [None, True, 0, -(10**40), 1.5, -0.0, 1e300, float("nan"), float("inf"), object(), b"x"]
)
def test_a_scalar_is_written_and_refused_as_json_dumps_does(scalar: object) -> None:
    # Written with an encoder made once: the text, and the error of a value JSON refuses, are json.dumps's.
    try:
        expected = json.dumps(scalar, ensure_ascii=False, allow_nan=False) + "\n"
    except (ValueError, TypeError) as error:
        with pytest.raises(type(error)) as raised:
            dumps_cassette([scalar])
        assert str(raised.value) == str(error)
    else:
        assert dumps_cassette(scalar) == expected


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
    # A fifth of the bytes of the two-space layout, or more, on a payload of this depth.
    assert len(text) <= 0.8 * len(dumps_pretty(json.loads(text)))
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


def test_a_cassette_in_the_layout_before_objects_went_on_one_line_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    loaded = save_cassette(path, RunMeta(run_id="r"), _chat_events())
    assert ': {"' in path.read_text(encoding="utf-8")
    old_text = dumps_cassette(json.loads(path.read_text(encoding="utf-8")), inline_objects=False)
    path.write_text(old_text, encoding="utf-8")
    events = list(loaded.events)
    events[2] = Event.model_validate({**events[2].model_dump(by_alias=True), "ts": "2026-01-02T00:00:00Z"})
    save_cassette(path, loaded.run, events)
    new_text = path.read_text(encoding="utf-8")
    assert new_text == dumps_cassette(json.loads(new_text), inline_objects=False)
    changed = [a for a, b in zip(old_text.splitlines(), new_text.splitlines(), strict=True) if a != b]
    assert len(changed) == 3
    # A file without one is saved in the current layout, with its small objects on one line.
    path.unlink()
    save_cassette(path, loaded.run, events)
    assert path.read_text(encoding="utf-8") == dumps_cassette(json.loads(path.read_text(encoding="utf-8")))


def _saved_again(path: Path, text: str) -> str:
    """``text`` written to ``path``, then one field of one event changed and the cassette saved again."""
    path.write_text(text, encoding="utf-8")
    loaded = load_cassette(path)
    events = list(loaded.events)
    events[1] = Event.model_validate({**events[1].model_dump(by_alias=True), "ts": "2026-01-02T00:00:00Z"})
    save_cassette(path, loaded.run, events)
    return path.read_text(encoding="utf-8")


def test_the_layout_of_a_file_is_told_from_its_whole_text(tmp_path: Path) -> None:
    """A string ending in ``: {`` holds the bytes of an object on one line; a file of the current layout may
    put only lists on one line: neither is mistaken for the other."""
    events = _chat_events()
    tricky = events[0].model_dump(by_alias=True)
    tricky["data"] = {"prompt": "Reply in JSON like: {", "rows": [[1, 2], [3, 4]], "usage": {"in": 1}}
    events[0] = Event.model_validate(tricky)
    path = tmp_path / "c.json"
    save_cassette(path, RunMeta(run_id="r"), events)
    doc = json.loads(path.read_text(encoding="utf-8"))
    for layout in (dumps_cassette(doc, inline_objects=False), dumps_cassette(doc)):
        again = _saved_again(path, layout)
        inline = layout == dumps_cassette(doc)
        assert again == dumps_cassette(json.loads(again), inline_objects=inline)
        changed = [a for a, b in zip(layout.splitlines(), again.splitlines(), strict=True) if a != b]
        assert len(changed) == 3, changed
