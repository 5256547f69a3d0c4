"""A conversation's request parsed from where it stops resending the previous one (``http.resend``):
whatever the bytes, the result is what parsing the whole body gives, or nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.http import bodies, resend
from pytest_agentreplay.http.exchange import HttpRequest

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
)
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
values = st.recursive(
    scalars | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
messages = st.lists(st.dictionaries(texts, values, min_size=1, max_size=3), min_size=1, max_size=4)
FORMATS = {
    None: {"separators": (",", ":"), "ensure_ascii": False},
    "compact-ascii": {"separators": (",", ":")},
}


def dump(value: Any, fmt: str | None) -> bytes:
    return json.dumps(value, **FORMATS[fmt]).encode("utf-8")


def body_of(raw: bytes) -> dict[str, Any] | None:
    return bodies.encode_body(raw, "application/json")


@settings(max_examples=300, deadline=None)
@given(
    head=st.dictionaries(texts, values, max_size=2),
    first=messages,
    more=st.lists(st.dictionaries(texts, values, max_size=3) | values, max_size=3),
    tail=st.dictionaries(texts, values, max_size=3),
    key=st.sampled_from(["messages", "input", "turns"]),
    fmt=st.sampled_from([None, "compact-ascii"]),
)
def test_an_extended_request_reads_as_its_full_parse(
    head: dict[str, Any], first: list[Any], more: list[Any], tail: dict[str, Any], key: str, fmt: str | None
) -> None:
    before = {
        **{k: v for k, v in head.items() if k != key},
        key: first,
        **{k: v for k, v in tail.items() if k not in head and k != key},
    }
    after = {**before, key: [*first, *more]}
    raw_before, raw_after = dump(before, fmt), dump(after, fmt)
    detected = body_of(raw_before)
    assert detected is not None
    sent = resend.remember(raw_before, detected["json"], detected.get("format"))
    if sent is None:
        return  # another list of objects was taken as the conversation: nothing to extend
    extended = resend.extend(sent, raw_after)
    full = body_of(raw_after)
    assert full is not None
    if sent.key != key:
        assert extended is None or extended[0] == full["json"]
        return
    if extended is None:
        # Refused only where the shared part's format cannot write the new part (an ASCII-only history,
        # then an escaped character): the full parse names another format.
        assert full.get("format") != detected.get("format")
        return
    value, grown, named = extended
    assert value == full["json"] and list(value) == list(full["json"])
    assert named == full.get("format")
    assert all(a is b for a, b in zip(value[key], sent.value[key], strict=False))  # the history is shared
    assert raw_after.startswith(grown.prefix) and raw_after[len(grown.prefix) : len(grown.prefix) + 1] == b"]"


@settings(max_examples=200, deadline=None)
@given(first=messages, edit=st.binary(min_size=1, max_size=6), at=st.integers(0, 10_000))
def test_changed_bytes_are_refused_or_read_as_the_full_parse(first: list[Any], edit: bytes, at: int) -> None:
    before = {"messages": first, "model": "m"}
    raw_before = dump(before, None)
    sent = resend.remember(raw_before, json.loads(raw_before), body_of(raw_before).get("format"))  # type: ignore[union-attr]
    if sent is None:
        return  # escaped characters: not compact UTF-8, so never extended
    raw_after = dump({**before, "messages": [*first, {"role": "user", "content": "next"}]}, None)
    cut = at % len(raw_after)
    damaged = raw_after[:cut] + edit + raw_after[cut:]
    extended = resend.extend(sent, damaged)
    if extended is None:
        return
    full = body_of(damaged)
    assert full is not None and "raw" not in full
    assert extended[0] == full["json"] and extended[2] == full.get("format")


def test_spacing_a_full_parse_would_flag_is_not_taken_as_compact() -> None:
    before = {"messages": [{"role": "user", "content": "hi"}], "model": "m"}
    raw_before = dump(before, None)
    sent = resend.remember(raw_before, before, None)
    assert sent is not None
    spaced_tail = raw_before[: len(sent.prefix)] + b', {"role": "assistant", "content": "yo"}],"model":"m"}'
    assert resend.extend(sent, spaced_tail) is None
    duplicate_key = raw_before[: len(sent.prefix)] + b'],"model":"m","messages":[]}'
    assert resend.extend(sent, duplicate_key) is None


def test_requests_of_a_conversation_share_their_history() -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    previous: resend.Sent | None = None
    bodies_seen: list[dict[str, Any]] = []
    for turn in range(5):
        history = [*history, {"role": "user", "content": f"question {turn}"}]
        raw = dump({"model": "m", "messages": history, "temperature": 0}, None)
        request = HttpRequest(
            "POST", "https://api.example/v1/chat", {"content-type": "application/json"}, raw
        )
        previous = request.resend_body(previous)
        assert previous is not None
        stored = request.stored_body()
        assert stored == body_of(raw)
        bodies_seen.append(stored["json"])
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
    first, last = bodies_seen[0]["messages"], bodies_seen[-1]["messages"]
    assert last[0] is first[0] and last[1] is first[1]


def test_a_trailing_comma_and_a_lone_surrogate_go_to_the_full_parse() -> None:
    before = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    raw = dump(before, None)
    sent = resend.remember(raw, before, None)
    assert sent is not None
    assert resend.extend(sent, sent.prefix + b',],"t":0}') is None
    assert body_of(sent.prefix + b',],"t":0}') == {
        "text": (sent.prefix + b',],"t":0}').decode(),
        "content_type": "application/json",
    }
    lone = sent.prefix + b',{"role":"user","content":"\\ud800"}]}'
    assert resend.extend(sent, lone) is None or resend.extend(sent, lone)[0] == json.loads(lone)  # type: ignore[index]


def test_members_after_the_list_resent_as_they_were_are_the_previous_objects() -> None:
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    previous: resend.Sent | None = None
    seen: list[dict[str, Any]] = []
    for turn in range(6):
        temperature = 0 if turn < 3 else 1  # the fourth request changes what follows the list
        raw = dump({"messages": history, "model": "m", "tools": tools, "temperature": temperature}, None)
        headers = {"content-type": "application/json"}
        request = HttpRequest("POST", "https://api.example/v1/chat", headers, raw)
        previous = request.resend_body(previous)
        stored = request.stored_body()
        assert stored == body_of(raw)
        # What the next request extends: this one's bytes (a view of them, or a copy) up to the list's end.
        assert previous is not None and raw[len(previous.prefix) :].startswith(b"]")
        assert bytes(previous.prefix) == raw[: len(previous.prefix)]
        seen.append(stored["json"])
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
    assert seen[1]["tools"] is seen[0]["tools"] and seen[2]["tools"] is seen[0]["tools"]
    assert seen[3]["tools"] == tools and seen[3]["temperature"] == 1
    assert seen[5]["tools"] is seen[3]["tools"]  # extended again from a joined prefix


def slow_first(raw: bytes, content_type: str | None) -> tuple[Any, resend.Sent | None]:
    """What the first request to an endpoint stored and left the next one before the whole-text path."""
    stored = bodies.encode_body(raw, content_type)
    if not stored or "json" not in stored or "raw" in stored:
        return stored, None
    return stored, resend.remember(raw, stored["json"], stored.get("format"))


@settings(max_examples=400, deadline=None)
@given(
    head=st.dictionaries(texts, values, max_size=2),
    first=messages,
    tail=st.dictionaries(texts, values, max_size=3),
    key=st.sampled_from(["messages", "input", "turns", "é\x7f"]),
    fmt=st.sampled_from([None, "compact-ascii", "spaced", "newline", "surrogate"]),
    content_type=st.sampled_from(
        ["application/json", None, "text/plain", "application/vnd.api+json", "multipart/json; boundary=b"]
    ),
)
def test_a_first_request_read_whole_is_what_the_full_check_stores(
    head: dict[str, Any],
    first: list[Any],
    tail: dict[str, Any],
    key: str,
    fmt: str,
    content_type: str | None,
) -> None:
    value = {**head, key: first, **{k: v for k, v in tail.items() if k != key}}
    if fmt == "spaced":
        raw = json.dumps(value, ensure_ascii=False).encode("utf-8")
    elif fmt == "newline":
        raw = dump(value, None) + b"\n"
    elif fmt == "surrogate":
        raw = dump({**value, "s": "\ud800"}, "compact-ascii")
    else:
        raw = dump(value, fmt)
    headers = {} if content_type is None else {"content-type": content_type}
    request = HttpRequest("POST", "https://api.example/v1/chat/completions", headers, raw)
    sent = request.resend_body(None)
    stored, expected = slow_first(raw, content_type)
    assert request.stored_body() == stored
    assert sent == expected
    if sent is not None:
        assert sent.value is request.json()


def test_a_coded_first_request_notes_its_coding_as_the_full_check_does() -> None:
    raw = dump({"model": "m", "messages": [{"role": "user", "content": "hé"}], "tools": [{"a": 1}]}, None)
    coded = bodies.encode_content(raw, "gzip")
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    request = HttpRequest("POST", "https://api.example/v1/chat/completions", headers, coded)
    sent = request.resend_body(None)
    stored = bodies.encode_body(raw, "application/json", coding="gzip")
    assert stored is not None and request.stored_body() == stored and stored["coding"] == "gzip"
    assert sent == resend.remember(raw, stored["json"], None)
    assert sent is not None and sent.suffix is not None


def test_a_body_read_as_the_previous_members_skips_share_parts_which_would_change_nothing() -> None:
    """``share_repeats`` leaves out ``share_parts`` for a body ``_extend_items`` read (``Sent.base``): such a
    body holds the previous one's very members already. Where what follows the list changed (the fourth
    request) or the body was read whole, the body is shared as ``share_parts`` shares it."""
    from pytest_agentreplay.core.capture import Recorder, RunContext
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.http.recording import share_parts, share_repeats

    ctx = RunContext(Recorder(RunMeta(run_id="r")))
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    seen: list[dict[str, Any]] = []
    for turn in range(6):
        temperature = 0 if turn < 3 else 1
        raw = dump({"messages": history, "model": "m", "tools": tools, "temperature": temperature}, None)
        headers = {"content-type": "application/json"}
        request = HttpRequest("POST", "https://api.example/v1/chat", headers, raw)
        share_repeats(ctx, request)
        body = request.json()
        assert isinstance(body, dict) and body == json.loads(raw)
        sent = ctx.rooms.of(resend.LastSent, resend.LastSent)[("POST", "https://api.example/v1/chat")]
        assert sent is not None and (sent.base is not None) == (turn not in (0, 3))
        if seen:
            before = dict(body)
            items = list(body["messages"])
            share_parts(seen[-1], body)  # what the skipped call would have done: nothing
            assert all(body[name] is value for name, value in before.items())
            assert all(map(lambda a, b: a is b, body["messages"], items))
            assert body["tools"][0] is seen[0]["tools"][0] and body["messages"][0] is seen[0]["messages"][0]
        seen.append(body)
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
