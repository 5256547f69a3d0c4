"""``plain_compact`` (orjson's text, for a value of exact dicts, lists, strings, integers, booleans and
None) is held to ``dumps_compact`` (the C ``json`` encoder), the slow path, for every value: where orjson's
text could differ (floats, NaN, values ``json`` refuses, subclasses) the slow path writes it or raises as it
did."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.cassette.chain import head_digest
from pytest_agentreplay.core import canonical
from pytest_agentreplay.core.canonical import (
    DigestMemo,
    dumps_compact,
    items_hash,
    plain_compact,
    request_digest,
)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text()
    | st.characters().map(str)
)
KEYS = st.text(max_size=8) | st.sampled_from(["\ud800", "\uffff", "\U0001f600", "é", "Z", "a", ""])
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=40,
)


def _outcome(write: Callable[[], object]) -> tuple[str, object]:
    try:
        return "text", write()
    except (TypeError, ValueError) as exc:
        return "raises", type(exc)


def _slow(value: object) -> tuple[str, object]:
    return _outcome(lambda: dumps_compact(value))


def _fast(value: object) -> tuple[str, object]:
    return _outcome(lambda: plain_compact(value))


@settings(max_examples=400)
@given(JSON)
def test_the_text_is_dumps_compacts(value: object) -> None:
    assert _fast(value) == _slow(value)


def test_every_character_is_escaped_as_json_escapes_it() -> None:
    # Each character alone and all of them in one string, as a value and as a key.
    text = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    for value in ([text], {text: text}, [chr(c) for c in range(0x20)] + ["\x7f", "\u2028", "\ufeff"]):
        assert plain_compact(value) == dumps_compact(value)


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


def _circular() -> list[object]:
    value: list[object] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    "value",
    [
        {"x": 1e-07, "y": 1e16, "z": 0.1, "w": -0.0},  # floats are spelled json's way
        [float("nan")],
        {"inf": float("inf")},
        [2**64],  # past orjson's integers
        [-(2**63) - 1],
        {1: "a", "b": 2},  # a key that is no string
        {"\ud800": 1},  # a lone surrogate
        ["\udfff"],
        [Colour.RED],  # subclasses and types json refuses or writes otherwise
        {"t": Text("x")},
        [Point(1)],
        [datetime.date(2024, 1, 1)],
        ("a", 1),
        {"a": ("b",)},
        _circular(),
    ],
)
def test_what_orjson_would_write_otherwise_is_left_to_the_slow_path(value: object) -> None:
    assert _fast(value) == _slow(value)


def test_deeper_than_orjson_goes_is_written_as_json_writes_it() -> None:
    value: Any = 1
    for _ in range(300):
        value = [value]
    assert _fast(value) == _slow(value)
    assert _fast({"a": value})[0] == "text"


@settings(max_examples=200)
@given(st.lists(st.lists(st.dictionaries(KEYS, JSON, max_size=4), max_size=4), min_size=1, max_size=4))
def test_request_digests_and_items_hashes_are_the_plain_ones(conversations: list[list[Any]]) -> None:
    """What the memo's item texts feed: a digest is ``hash_value``'s, with or without the fast path."""
    memo = DigestMemo()
    grown: list[Any] = []
    for new in conversations:
        grown = [*grown, *new]
        body = {"messages": grown, "model": "m", "tools": new}
        assert _outcome(partial(request_digest, body, memo)) == _outcome(partial(canonical.hash_value, body))
        assert _outcome(partial(items_hash, grown, memo)) == _outcome(partial(canonical.hash_value, grown))


@settings(max_examples=200)
@given(st.dictionaries(KEYS, JSON, max_size=6), st.lists(st.text(max_size=64), max_size=4), JSON)
def test_a_head_digest_is_hash_values(run: dict[str, Any], digests: list[str], count: object) -> None:
    head = {"version": 4, "run": run, "event_count": count, "event_digests": digests}
    assert _outcome(partial(head_digest, run, digests, count, 4)) == _outcome(
        partial(canonical.hash_value, head)
    )


@settings(max_examples=200)
@given(
    st.lists(st.dictionaries(KEYS, JSON, max_size=3), min_size=1, max_size=4),
    st.lists(st.lists(st.integers(min_value=-1, max_value=3), max_size=5), min_size=1, max_size=6),
)
def test_an_items_hash_of_the_very_items_hashed_last_is_hash_values(
    pool: list[Any], picks: list[list[int]]
) -> None:
    """The memo's last items: lists picked from one pool of dicts (the same objects again, reordered, shorter,
    longer, an equal copy of a dict, a non-dict item at -1) each hash as ``hash_value`` does."""
    memo = DigestMemo()
    for pick in picks:
        items = [
            dict(pool[0]) if i == -1 and pool[0] else "tool" if i == -1 else pool[i % len(pool)] for i in pick
        ]
        assert _outcome(partial(items_hash, items, memo)) == _outcome(partial(canonical.hash_value, items))


def test_the_tools_a_conversation_resends_are_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}, {"type": "web"}]
    memo = DigestMemo()
    first = items_hash(tools, memo)
    hashed: list[str] = []
    monkeypatch.setattr(canonical, "sha256_hex", lambda data: hashed.append(data) or "x")
    assert items_hash(list(tools), memo) == first  # a new list of the very dicts: the memo's digest
    assert hashed == []
    items_hash([tools[1], tools[0]], memo)  # another order is hashed again
    items_hash([*tools, "tool"], memo)  # as is a list with a value that is no dict
    items_hash([*tools, "tool"], memo)
    assert len(hashed) == 3
