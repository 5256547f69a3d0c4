"""Format 4's stored form: conversations stored once, what repeats left out, exact round trips, and damaged
deltas refused with an error that names the event."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.stored_decode import decode_events
from pytest_agentreplay.cassette.stored_form import encode_events
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import DigestMemo, dumps_pretty, hash_value, request_digest
from pytest_agentreplay.exceptions import CassetteError, CassetteIntegrityError, CassetteSchemaError

REQUEST = "application/vnd.agentreplay.http-request+json"
RESPONSE = "application/vnd.agentreplay.http-response+json"
URL = "https://api.example.com/v1/chat/completions"


def _call(seq: int, messages: list[dict[str, Any]], url: str = URL, length: int = 100) -> dict[str, Any]:
    body = {"model": "m", "messages": messages, "temperature": 0}
    return {
        "run_id": "r",
        "seq": seq,
        "ts": "t",
        "type": "model.call",
        "actor": "model",
        "class": "decision",
        "data": {"request_hash": request_digest(body), "status": 200},
        "input_ref": {
            "data_class": "personal",
            "media_type": REQUEST,
            "inline": {
                "method": "POST",
                "url": url,
                "headers": {"content-type": "application/json", "x-retry": str(seq % 2)},
                "body": {"content_type": "application/json", "json": body},
            },
        },
        "output_ref": {
            "data_class": "personal",
            "media_type": RESPONSE,
            "inline": {
                "status": 200,
                "headers": {"content-type": "application/json"},
                "body": {"content_type": "application/json", "json": {"a": seq}, "raw": f'{{"a": {seq}}}'},
            },
        },
    }


def _conversation(calls: int, system: str = "You are careful. ", *, url: str = URL) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system * 20}]
    events = []
    for n in range(calls):
        messages = [*messages, {"role": "user", "content": f"question {n}: " + "where is it? " * 8}]
        events.append(_call(n, messages, url))
        messages = [*messages, {"role": "assistant", "content": f"answer {n}: " + "on its way. " * 8}]
    return events


def test_a_conversation_round_trips_exactly_and_grows_linearly() -> None:
    sizes = []
    for calls in (30, 60):
        events = _conversation(calls)
        stored = encode_events(events, "r")
        assert decode_events(json.loads(json.dumps(stored)), "r") == events
        assert all("delta" in e["input_ref"]["inline"] for e in stored[1:])
        assert all(len(e["input_ref"]["inline"]["body"]["json"]["messages"]) == 2 for e in stored[1:])
        sizes.append(len(dumps_pretty(stored)))
    assert sizes[1] / sizes[0] <= 2.2, sizes


def test_interleaved_conversations_each_build_on_their_own() -> None:
    a, b = _conversation(6, "Agent A. "), _conversation(6, "Agent B. ")
    events = [e for pair in zip(a, b, strict=True) for e in pair]
    for seq, event in enumerate(events):
        event["seq"] = seq
    stored = encode_events(events, "r")
    # B's first call shares only the model and temperature with A's; then each builds on its own.
    assert [e["input_ref"]["inline"].get("delta", {}).get("back") for e in stored] == [None, 1] + [2] * 10
    assert decode_events(stored, "r") == events


def test_get_events_leave_out_what_their_request_says() -> None:
    events = []
    for n in range(3):
        url = f"https://api.example.com/items/{n}"
        events.append(
            {
                "run_id": "r",
                "seq": n,
                "ts": "t",
                "type": "http",
                "actor": "tool",
                "class": "input",
                "tool": {"name": f"api.example.com/items/{n}"},
                "data": {"method": "GET", "url": url, "status": 200, "classification": "read"},
                "input_ref": {
                    "data_class": "internal",
                    "media_type": REQUEST,
                    "inline": {"method": "GET", "url": url, "headers": {"accept": "*/*"}, "body": None},
                },
            }
        )
    stored = encode_events(events, "r")
    assert "tool" not in stored[1] and "url" not in stored[1]["data"] and "run_id" not in stored[1]
    assert stored[0]["input_ref"]["inline"]["headers"] == {"accept": "*/*"}
    assert stored[1]["input_ref"]["inline"]["headers"] == "@prev"
    assert stored[1]["input_ref"]["media_type"] == "@http-request"
    assert decode_events(stored, "r") == events


def test_http_posts_stored_as_deltas_get_their_fields_from_the_decoded_request() -> None:
    # The method, url and tool name of an HTTP event come from its request once decoded (delta applied,
    # "@prev" headers filled); only a model call gets a request hash back.
    events = []
    for event in _conversation(3, url="https://api.example.com/v1/rows"):
        data = {"method": "POST", "url": "https://api.example.com/v1/rows", "status": 200}
        kind = {"type": "http", "actor": "tool", "class": "input"}
        events.append({**event, **kind, "data": data, "tool": {"name": "api.example.com/v1/rows"}})
    stored = encode_events(events, "r")
    assert all("delta" in e["input_ref"]["inline"] for e in stored[1:])
    assert all("url" not in e["data"] and "tool" not in e for e in stored)
    decoded = decode_events(json.loads(json.dumps(stored)), "r")
    assert decoded == events
    assert all("request_hash" not in e["data"] for e in decoded)


def test_a_redacted_body_keeps_its_request_hash() -> None:
    events = _conversation(2)
    events[1]["data"]["request_hash"] = "0" * 64  # taken before a secret in the body was redacted
    stored = encode_events(events, "r")
    assert "request_hash" not in stored[0]["data"] and stored[1]["data"]["request_hash"] == "0" * 64
    assert decode_events(stored, "r") == events


def test_a_users_media_type_starting_with_at_round_trips() -> None:
    event = {**_conversation(1)[0], "output_ref": {"inline": 1, "media_type": "@http-request"}}
    stored = encode_events([event], "r")
    assert stored[0]["output_ref"]["media_type"] == "@@http-request"
    assert decode_events(stored, "r") == [
        {**event, "output_ref": {**event["output_ref"], "data_class": "internal"}}
    ]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d.update(back=9), "back=9"),
        (lambda d: d["json"]["extends"].update(messages=99), "keeps 99"),
        (lambda d: d["json"].update(same=["nope"]), "'nope'"),
        (lambda d: d.update(headers="other"), "headers must be"),
        (lambda d: d.update(surprise=1), "unknown delta field"),
    ],
)
def test_a_damaged_delta_is_refused_naming_the_event(damage: Any, problem: str) -> None:
    stored = encode_events(_conversation(3), "r")
    damage(stored[2]["input_ref"]["inline"]["delta"])
    with pytest.raises(CassetteSchemaError, match="event seq 2 holds a request delta") as info:
        decode_events(stored, "r", source="c.json")
    assert problem in str(info.value)
    assert info.value.place == "event seq 2 (events[2]), field input_ref.inline.delta"


def test_a_damaged_delta_on_disk_is_an_integrity_error_and_rechained_a_schema_error(tmp_path: Path) -> None:
    from pytest_agentreplay.core.events import Event, RunMeta

    path = tmp_path / "cassettes" / "c.json"
    save_cassette(path, RunMeta(run_id="r"), [Event.model_validate(e) for e in _conversation(4)])
    doc = json.loads(path.read_text())
    doc["events"][3]["input_ref"]["inline"]["delta"]["back"] = 7
    path.write_text(dumps_pretty(doc))
    with pytest.raises(CassetteIntegrityError, match="seq 3 was edited"):
        load_cassette(path)
    path.write_text(dumps_pretty(_reseal(doc)))
    with pytest.raises(CassetteError, match="back=7"):
        load_cassette(path)


def _reseal(doc: dict[str, Any]) -> dict[str, Any]:
    from pytest_agentreplay.cassette.chain import seal_document

    return seal_document(doc["run"], doc["events"])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=6),
        json_values | st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=3), max_size=4),
        max_size=5,
    )
)
def test_request_digest_is_the_hash_of_the_whole_body(body: dict[str, Any]) -> None:
    memo = DigestMemo()
    assert request_digest(body, memo) == hash_value(body)
    assert request_digest(body, memo) == hash_value(body)  # again, from the memo


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            # An item not an object after the shared ones: the list is no longer hashed from the memo.
            st.lists(
                st.dictionaries(st.text(max_size=4), json_values, max_size=2) | st.integers(0, 2), max_size=3
            ),
            st.integers(0, 3),  # how many items of the history the next request leaves out at the end
            st.sampled_from([None, 1, 2]),  # a key sorted before the list: changes the text before it
        ),
        min_size=1,
        max_size=6,
    )
)
def test_request_digests_of_a_conversation_hash_each_whole_body(turns: list[Any]) -> None:
    memo = DigestMemo()
    history: list[Any] = [{"role": "system"}]
    for added, dropped, before in turns:
        history = [*history, *added]
        body: dict[str, Any] = {"messages": history, "model": "m", "tools": [{"name": "t"}]}
        if before is not None:
            body["max_tokens"] = before
        assert request_digest(body, memo) == hash_value(body)
        if dropped:
            history = history[: max(1, len(history) - dropped)]  # shared objects, fewer of them


def test_request_digests_from_threads_sharing_a_memo_hash_each_whole_body() -> None:
    # A request takes its list's hash state out of the memo to grow it in place: threads hashing the same
    # conversation at once each get the hash of their own body.
    memo = DigestMemo()
    history = [{"role": "user", "content": str(i)} for i in range(40)]
    bodies = [{"messages": history[:n], "model": "m"} for n in range(1, 41)] * 5
    expected = [hash_value(body) for body in bodies]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda body: request_digest(body, memo), bodies))
    assert found == expected


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=25,
)


def _sorted_by_hook(raw: str) -> Any:
    """The reference: json.loads building each object with its keys sorted (last duplicate wins)."""
    return json.loads(raw, object_pairs_hook=lambda pairs: dict(sorted(dict(pairs).items())))


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES, st.sampled_from([None, 1, 2]), st.booleans())
def test_stored_responses_parse_like_json_loads_with_sorted_keys(
    value: Any, indent: int | None, ascii: bool
) -> None:
    """A response kept byte for byte is parsed on load with canonical key order: the fast parse gives what
    json.loads with a sorting hook gives, value, types and key order alike."""
    from pytest_agentreplay.cassette.stored_decode import parse_sorted

    raw = json.dumps(value, indent=indent, ensure_ascii=ascii)
    expected, got = _sorted_by_hook(raw), parse_sorted(raw)
    assert json.dumps(got) == json.dumps(expected)
    assert repr(got) == repr(expected)


@pytest.mark.parametrize(
    "raw",
    [
        '{"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": 2}, "b": 3}',  # duplicate key: the last wins
        # Duplicates are not looked for (jiter keeps the last, as json.loads does): nested, of other types,
        # a null replaced (one null fewer than the text holds) and one replacing a value.
        '[{"k": 1, "k": "s", "k": [1, {"x": 1, "x": 2}]}, {"n": null, "n": 1}, {"v": 1, "v": null}]',
        '{"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, "k0": 9}',
        '"\\ud800"',  # a lone surrogate: jiter refuses, json.loads decides
        "[NaN, Infinity, -Infinity, 1e400, 12345678901234567890123, -0.0]",
        # An infinity jiter parses, which orjson writes as a null (the null count catches it): alone, beside
        # a null, and beside "null" in a string.
        "[1e400]",
        '{"a": -1e400, "b": null, "c": "null"}',
        '{"a": 1e400, "s": "null"}',
        '{"n": null, "s": "nullnull"}',
        "[" * 250 + "]" * 250,  # deeper than jiter goes
    ],
)
def test_stored_response_edge_cases_parse_as_json_loads_does(raw: str) -> None:
    from pytest_agentreplay.cassette.stored_decode import parse_sorted

    assert repr(parse_sorted(raw)) == repr(_sorted_by_hook(raw))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), _JSON_VALUES), max_size=8))
def test_stored_responses_with_duplicate_keys_parse_like_json_loads(pairs: list[tuple[str, Any]]) -> None:
    """An object written with repeated keys: the fast parse (which does not look for duplicates) gives
    what json.loads gives, the last of each key winning, at any depth."""
    from pytest_agentreplay.cassette.stored_decode import parse_sorted

    inner = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
    raw = "[" + inner + ', {"o": ' + inner + "}]"
    assert repr(parse_sorted(raw)) == repr(_sorted_by_hook(raw))


@pytest.mark.parametrize("raw", ['{"a": 1', "[1,]", '"a\x01b"', "01", ""])
def test_stored_response_that_is_not_json_is_refused_as_json_loads_refuses_it(raw: str) -> None:
    from pytest_agentreplay.cassette.stored_decode import parse_sorted

    with pytest.raises(ValueError):
        _sorted_by_hook(raw)
    with pytest.raises(ValueError):
        parse_sorted(raw)
