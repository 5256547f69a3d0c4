"""Content-addressed blob store: write-once, verified reads, message-level dedup, exact round trip."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_cli_support import put_blob

from pytest_agentreplay.cassette.atomic import TEMP_PREFIX
from pytest_agentreplay.cassette.blobs import CHAIN, BlobStore, plan_externalize
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import dumps_compact, hash_value
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta
from pytest_agentreplay.exceptions import BlobMissingError, CassetteIntegrityError


def externalize(store: BlobStore, value: object, inline_limit: int) -> Any:
    """A payload placed as a save places it: inline, or its blobs written to ``store``."""
    placed, pending = plan_externalize(value, inline_limit)
    for sha, (_, data) in pending.items():
        store.put_bytes(sha, data)
    return placed


def test_put_get_exists(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    value = {"b": [1, 2.5, None, "ü"], "a": True}
    sha = put_blob(store.root, value)
    assert sha == hash_value(value)
    path = tmp_path / sha[:2] / f"{sha}.json"
    assert path.read_text(encoding="utf-8") == dumps_compact(value)
    assert store.exists(sha) and store.get(sha) == value
    assert BlobStore(tmp_path).get(sha) == value  # from disk, no cache
    mtime = path.stat().st_mtime_ns
    assert put_blob(store.root, value) == sha and path.stat().st_mtime_ns == mtime  # write-once


def test_missing_blob_names_sha_and_fix(tmp_path: Path) -> None:
    sha = "ab" * 32
    with pytest.raises(BlobMissingError) as info:
        BlobStore(tmp_path).get(sha)
    assert sha in str(info.value) and "How to fix:" in str(info.value) and ".blobs" in str(info.value)


def test_tampered_blob(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    sha = put_blob(store.root, {"x": 1})
    (tmp_path / sha[:2] / f"{sha}.json").write_text('{"x":2}')
    with pytest.raises(CassetteIntegrityError, match=sha):
        BlobStore(tmp_path).get(sha)


def test_iter_shas_ignores_stray_files(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    shas = {put_blob(store.root, i) for i in range(5)}
    sub = tmp_path / next(iter(shas))[:2]
    (sub / f"{TEMP_PREFIX}abc.part").write_text("partial")
    (tmp_path / "README").write_text("x")
    assert set(store.iter_shas()) == shas
    assert list(BlobStore(tmp_path / "absent").iter_shas()) == []


def test_small_payload_stays_inline(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    assert externalize(store, {"a": 1}, 2048) == {"inline": {"a": 1}}
    assert list(store.iter_shas()) == []


def test_large_payload_goes_to_blob_and_round_trips(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    value = {"messages": [{"role": "user", "content": "x" * 500 + str(i)} for i in range(4)], "n": 1}
    placed = externalize(store, value, 100)
    assert set(placed) == {"sha256", "size"} and placed["size"] == len(dumps_compact(value).encode())
    top = store.get(placed["sha256"])
    assert set(top["messages"]) == {CHAIN}
    assert store.load(placed["sha256"]) == value


@pytest.mark.parametrize(
    "value",
    [
        {"$blob": "not-a-ref"},
        {"$lit": {"$blob": "x"}},
        {"$chain": {"prev": None, "items": []}},
        [{"a": "b" * 300}, {"$chain": 1}, {"c": "d" * 300}, 5, {"e": "f" * 300}],
        [{"$blob": "a" * 64, "pad": "y" * 300}, {"$blob": "b" * 64}],
        {"deep": [[[{"k": "v" * 300}]] * 3, {"$lit": 1}]},
        ["ünïcödé ✓ " * 40, {"e": "😀" * 100}],
    ],
)
def test_literal_markers_round_trip(tmp_path: Path, value: Any) -> None:
    store = BlobStore(tmp_path)
    placed = externalize(store, value, 0)
    assert BlobStore(tmp_path).load(placed["sha256"]) == value


def test_plan_does_not_write(tmp_path: Path) -> None:
    placed, pending = plan_externalize({"x": ["y" * 400, {"z": "w" * 400}]}, 10)
    assert "sha256" in placed and placed["sha256"] in pending and len(pending) == 2
    assert plan_externalize({"x": [{"m": "y" * 400}] * 3}, 10)[1]  # chained: nodes + message + top
    assert not any(tmp_path.iterdir())


def conversation_events(calls: int) -> tuple[list[Event], int, int]:
    """A chat that resends its whole history on every model call, like every provider SDK does."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent. " * 20}]
    events: list[Event] = []
    naive = 0
    for call in range(calls):
        messages.append(
            {"role": "user", "content": f"question {call}: " + "please help me with my order " * 12}
        )
        request = {
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages",
            "headers": {"content-type": "application/json"},
            "body": {
                "json": {"model": "claude", "max_tokens": 1024, "messages": list(messages)},
                "content_type": "application/json",
            },
        }
        answer = {"role": "assistant", "content": f"answer {call}: " + "here is what I found " * 15}
        response = {
            "status": 200,
            "headers": {},
            "body": {"json": answer, "content_type": "application/json"},
        }
        messages.append(answer)
        naive += len(json.dumps(request)) + len(json.dumps(response))
        events.append(
            Event.model_validate(
                {
                    "run_id": "r",
                    "seq": len(events),
                    "ts": "2025-01-01T00:00:00Z",
                    "type": "model.call",
                    "actor": "model",
                    "class": "decision",
                    "input_ref": PayloadRef(inline=request),
                    "output_ref": PayloadRef(inline=response),
                }
            )
        )
    distinct = sum(len(json.dumps(m)) for m in messages)
    return events, naive, distinct


def test_conversation_dedup(tmp_path: Path) -> None:
    events, naive, distinct = conversation_events(50)
    path = tmp_path / "cassettes" / "chat.json"
    saved = save_cassette(path, RunMeta(run_id="r"), events)
    blob_bytes = sum(p.stat().st_size for p in (tmp_path / "cassettes" / ".blobs").rglob("*.json"))
    total = blob_bytes + path.stat().st_size
    assert blob_bytes < 0.25 * naive
    assert total < 0.25 * naive
    # About the size of the distinct messages, plus one small reference list per call.
    assert blob_bytes < 2.5 * distinct, (blob_bytes, distinct)
    loaded = load_cassette(path, verify_blobs=True)
    for original, event in zip(events, loaded.events, strict=True):
        assert original.input_ref is not None and original.output_ref is not None
        assert loaded.payload(event.input_ref) == original.input_ref.inline
        assert loaded.payload(event.output_ref) == original.output_ref.inline
    assert saved.event_dicts() == loaded.event_dicts()


def test_resolve_cache_returns_fresh_containers(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    placed = externalize(store, {"m": [{"t": "x" * 400}]}, 10)
    first = store.load(placed["sha256"])
    first["m"][0]["t"] = "mutated"
    assert store.load(placed["sha256"])["m"][0]["t"] == "x" * 400


# -- hostile blobs (issue 11): valid hashes, wrong shapes; files that are not regular --------------


def _put_raw(store: BlobStore, value: Any) -> str:
    """Store ``value`` as it is (no encoding): a blob with a valid hash and whatever shape."""
    return put_blob(store.root, value)


@pytest.mark.parametrize(
    "value",
    [
        {"$chain": {"prev": None}},
        {"$chain": {"items": "abc", "prev": None}},
        {"$chain": {"items": [], "prev": 7}},
        {"$chain": {"items": [], "prev": "../../etc/passwd"}},
        {"$blob": 5},
        {"$blob": "../" * 5 + "etc/passwd"},
        {"$lit": [1]},
        {"messages": {"$chain": {"items": [{"$blob": "zz"}], "prev": None}}},
    ],
)
def test_wrong_shape_blob_is_a_shape_error(tmp_path: Path, value: Any) -> None:
    from pytest_agentreplay.exceptions import PayloadShapeError

    store = BlobStore(tmp_path)
    sha = _put_raw(store, value)
    with pytest.raises(PayloadShapeError) as info:
        store.load(sha)
    assert sha in str(info.value) and "How to fix:" in str(info.value)


def test_chain_node_of_the_wrong_shape(tmp_path: Path) -> None:
    from pytest_agentreplay.exceptions import PayloadShapeError

    store = BlobStore(tmp_path)
    not_a_node = _put_raw(store, {"items": [], "prev": None})
    top = _put_raw(store, {"$chain": {"items": [1], "prev": not_a_node}})
    with pytest.raises(PayloadShapeError, match="chain node"):
        store.load(top)


def test_deep_blob_is_a_limit_error(tmp_path: Path) -> None:
    from pytest_agentreplay.exceptions import CassetteLimitError

    store = BlobStore(tmp_path)
    deep: Any = 1
    for _ in range(150):
        deep = [deep]
    sha = _put_raw(store, deep)
    with pytest.raises(CassetteLimitError, match="nested deeper"):
        store.load(sha)
    # Nesting split over many blobs adds up.
    inner: Any = 1
    for _ in range(10):
        for _ in range(20):
            inner = [inner]
        inner = {"$blob": _put_raw(store, inner)}
    with pytest.raises(CassetteLimitError, match="nested deeper"):
        store.load(inner["$blob"])


def test_blob_bomb_is_a_limit_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentreplay.cassette import blobs
    from pytest_agentreplay.exceptions import CassetteLimitError

    monkeypatch.setattr(blobs, "MAX_EXPANDED_BYTES", 1_000_000)
    store = BlobStore(tmp_path)
    sha = _put_raw(store, {"leaf": "x" * 64})
    for _ in range(40):
        sha = _put_raw(store, [{"$blob": sha}, {"$blob": sha}])
    with pytest.raises(CassetteLimitError, match="expands to more than"):
        store.load(sha)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks and FIFOs")
def test_blob_symlink_leaving_the_store_and_fifo_are_refused(tmp_path: Path) -> None:
    from pytest_agentreplay.exceptions import CassetteFileTypeError

    store = BlobStore(tmp_path / ".blobs")
    sha = put_blob(store.root, {"m": "x" * 300})
    path = store.path_for(sha)
    outside = tmp_path / "outside.json"
    path.rename(outside)
    path.symlink_to(outside)
    with pytest.raises(CassetteFileTypeError, match="symlink leading out of"):
        BlobStore(tmp_path / ".blobs").get(sha)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(CassetteFileTypeError, match="FIFO"):
        BlobStore(tmp_path / ".blobs").get(sha)


def _nested(depth: int, kind: str = "list") -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if kind == "list" or (kind == "mixed" and level % 2) else {"k": value}
    return value


class _Dict(dict[str, Any]):
    pass


def _depth_cases() -> list[Any]:
    from pytest_agentreplay.cassette.validation import MAX_DEPTH

    shared = _nested(MAX_DEPTH // 2)
    depths = (1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1)
    return [
        *(_nested(depth, kind) for depth in depths for kind in ("list", "dict", "mixed")),
        [{"s": "{[" * 500}],  # brackets in strings only count more: the walk settles it
        [shared, shared],  # written twice by both forms: one level each time
        {1: _nested(MAX_DEPTH)},  # a key that is no string: orjson refuses, marshal counts
        [10**30, _nested(MAX_DEPTH + 1)],  # an integer past 64 bits: orjson refuses
        ["\ud800", _nested(MAX_DEPTH)],  # a lone surrogate: orjson refuses
        [(1, [2]), _nested(MAX_DEPTH - 2)],  # a tuple: orjson writes `[`, the walk does not descend
        _Dict(a=_nested(MAX_DEPTH)),  # a dict subclass
        _nested(300),  # deeper than orjson goes
        [{1.5: 2}, {"x": object()}],  # marshal refuses the object: walked
        # Forms no longer than the limit (settled by their length), and just past it.
        *(_nested(depth) for depth in (0, 5, MAX_DEPTH // 2 - 1, MAX_DEPTH // 2)),
        {"body": None, "headers": {}, "method": "GET", "url": "http://127.0.0.1:38063/items/0?page=0"},
    ]


def _walked_depth_problem(value: Any) -> str | None:
    """The reference: the exact walk, every object and list visited."""
    from pytest_agentreplay.cassette.validation import MAX_DEPTH

    stack = [(value, 0)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        items = item.values() if isinstance(item, dict) else item
        stack.extend((v, depth + 1) for v in items if isinstance(v, dict | list))
    return None


@pytest.mark.parametrize("index", range(len(_depth_cases())))
def test_depth_problem_counted_in_c_is_the_walks_answer(index: int) -> None:
    """The depth check counts brackets of orjson's form (marshal's when orjson refuses the value) before it
    walks: the answer is the exact walk's, at the limit, past it, and for what either form refuses."""
    from pytest_agentreplay.cassette.validation import depth_problem

    value = _depth_cases()[index]
    assert depth_problem(value) == _walked_depth_problem(value)


_BODY_VALUES = st.one_of(
    st.none(), st.text(max_size=3), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2)
)
_BODY_KEYS = st.sampled_from(
    ["content_type", "format", "raw", "coding", "json", "text", "base64", "sse", "x", 1]
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_BODY_KEYS, _BODY_VALUES, max_size=5))
def test_plain_body_fast_check_answers_as_the_full_check(body: dict[Any, Any]) -> None:
    """A JSON or text body is passed in one pass over it; the answer, problem or none, is the full check's."""
    from pytest_agentreplay.cassette import validation

    fast = validation.body_problem(body)
    original = validation._plain_body
    try:
        validation._plain_body = lambda body: False  # type: ignore[assignment]
        assert fast == validation.body_problem(body)
    finally:
        validation._plain_body = original


def _reference_payload_problem(media_type: str | None, value: Any) -> str | None:
    """The reference: the status, method and url checked as by the check itself, then the headers and the
    body asked of whatever is there (only absent headers are not asked)."""
    from pytest_agentreplay.cassette import validation
    from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE

    if not isinstance(value, dict):
        return validation.payload_problem(media_type, value)
    rest = {k: v for k, v in value.items() if k not in ("headers", "body")}
    first_line = validation.payload_problem(media_type, rest)
    if first_line is not None or media_type not in (HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE):
        return first_line
    if "headers" in value and value["headers"] is not None:
        found = validation._headers_problem(value["headers"])
        if found is not None:
            return found
    return validation.body_problem(value.get("body"))


class _Headers(dict[str, str]):
    pass


_PAYLOAD_PARTS = st.one_of(
    st.none(),
    st.sampled_from([{}, "", [], 0, False, _Headers(), _Headers(a="b")]),
    st.text(max_size=2),
    st.integers(99, 1000),
    st.dictionaries(
        st.sampled_from(["a", "json", "text", "raw"]),
        st.one_of(st.none(), st.text(max_size=2), st.integers()),
        max_size=2,
    ),
)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["request", "response", "other", None]),
    st.dictionaries(
        st.sampled_from(["headers", "body", "status", "method", "url"]), _PAYLOAD_PARTS, max_size=4
    )
    | _PAYLOAD_PARTS,
)
def test_payload_problem_settles_no_headers_and_no_body_as_the_full_check(
    kind: str | None, value: Any
) -> None:
    """A payload with no headers (none or ``{}``) and no body is passed without asking them one by one; any
    other value of theirs (an empty string or list too) is checked and worded as before."""
    from pytest_agentreplay.cassette import validation
    from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE

    media = {"request": HTTP_REQUEST_MEDIA_TYPE, "response": HTTP_RESPONSE_MEDIA_TYPE, "other": "text/plain"}
    media_type = media.get(kind) if kind is not None else None
    assert validation.payload_problem(media_type, value) == _reference_payload_problem(media_type, value)


_RAW_JSON = st.recursive(
    st.none() | st.integers() | st.text(alphabet="ab{[]}", max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("ab[", max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@example(126, None, {})  # the deepest body that fits: its innermost list at level 127 of the payload
@example(127, None, {})  # one level more: not told fit
@given(
    st.integers(0, 140),
    _RAW_JSON,
    st.dictionaries(st.sampled_from(["status", "headers", "x"]), _PAYLOAD_PARTS, max_size=2),
)
def test_a_response_told_fit_from_its_raw_text_passes_both_checks(
    depth: int, leaf: Any, extra: dict[str, Any]
) -> None:
    """What :func:`parsed_response_fits` passes (a payload whose JSON body was parsed from its raw text),
    the shape and depth checks one by one pass too, at and around the depth limit."""
    from pytest_agentreplay.cassette.stored_decode import restore_response_payload
    from pytest_agentreplay.cassette.validation import depth_problem, parsed_response_fits, payload_problem
    from pytest_agentreplay.core.constants import HTTP_RESPONSE_MEDIA_TYPE

    raw = "[" * depth + json.dumps(leaf) + "]" * depth
    lean = {"status": 200, "headers": {"a": "b"}, "body": {"content_type": "x", "raw": raw}, **extra}
    value = restore_response_payload(lean)
    assert value is not lean and isinstance(value, dict)
    if parsed_response_fits(value):
        assert depth_problem(value) is None
        assert payload_problem(HTTP_RESPONSE_MEDIA_TYPE, value) is None


@settings(max_examples=300, deadline=None)
@example({"method": "GET", "url": "u", "headers": {}, "body": None})
@example({"method": "GET", "headers": {"a": json.loads("[" * 130 + "]" * 130)}})  # headers must be strings
@example({"method": "GET", "x": json.loads("[" * 130 + "]" * 130)})  # a member of its own, too deep
@given(
    st.dictionaries(
        st.sampled_from(["method", "url", "headers", "body", "x"]),
        _PAYLOAD_PARTS | st.recursive(st.none(), lambda inner: st.lists(inner, max_size=2), max_leaves=4),
        max_size=4,
    )
)
def test_a_request_told_fit_without_its_body_passes_both_checks(value: dict[str, Any]) -> None:
    """What :func:`bodiless_request_fits` passes (a request payload without a body), the shape and depth
    checks one by one pass too."""
    from pytest_agentreplay.cassette.validation import bodiless_request_fits, depth_problem, payload_problem
    from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE

    if bodiless_request_fits(value):
        assert depth_problem(value) is None
        assert payload_problem(HTTP_REQUEST_MEDIA_TYPE, value) is None


@pytest.mark.parametrize(
    "value",
    [
        {"status": 200},
        {"status": 200, "headers": {}, "body": None},
        {"status": 200, "body": {"content_type": "text/plain", "text": "hi"}},
        {"status": 200, "body": {"raw": None}},
    ],
)
def test_a_response_without_a_raw_text_is_not_told_fit(value: dict[str, Any]) -> None:
    """:func:`parsed_response_fits` of a response that has no raw JSON text to count says False (the checks
    one by one decide), whatever handed it over, rather than failing on the missing body."""
    from pytest_agentreplay.cassette.validation import parsed_response_fits

    assert parsed_response_fits(value) is False
