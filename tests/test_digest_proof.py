"""``request_digest`` takes a list built as an ``Extension`` of the list it hashed last as proof, checked by
identity, that it extends it: the digest stays the plain one whatever a caller hands it or changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.cassette.stored_decode import decode_events
from pytest_agentreplay.cassette.stored_form import encode_events
from pytest_agentreplay.core import canonical
from pytest_agentreplay.core.canonical import DigestMemo, Extension, hash_value, request_digest
from pytest_agentreplay.http import resend
from pytest_agentreplay.http.exchange import HttpRequest

URL = "https://api.example/v1/chat"


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the lists the slow path (``_extends``) compares item by item."""
    seen: list[int] = []
    slow = canonical._extends

    def counted(items: tuple[object, ...], value: list[object]) -> bool:
        seen.append(len(items))
        return slow(items, value)

    monkeypatch.setattr(canonical, "_extends", counted)
    return seen


def _message(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 else "assistant", "content": f"turn {n}"}


def test_an_extension_is_hashed_on_without_comparing_its_items(compared: list[int]) -> None:
    memo = DigestMemo()
    history: list[object] = [_message(0)]
    for n in range(1, 30):
        body = {"messages": history, "model": "m"}
        assert request_digest(body, memo) == hash_value(body)
        built = Extension(history, len(history), [_message(n)], memo.built.get("messages"))
        memo.built["messages"] = built
        history = built.value
    # Only the second request compares: the first list was parsed whole, not built from a snapshot.
    assert compared == [1]
    assert memo.lists["messages"].items is memo.built["messages"].base


def test_an_extension_of_fewer_items_than_hashed_is_hashed_anew(compared: list[int]) -> None:
    memo = DigestMemo()
    first = Extension([], 0, [_message(n) for n in range(5)], None)
    memo.built["messages"] = first
    assert request_digest({"messages": first.value}, memo) == hash_value({"messages": first.value})
    shorter = memo.built["messages"] = Extension(first.value, 3, [_message(9)], first)
    assert shorter.value == [*first.value[:3], _message(9)]
    assert request_digest({"messages": shorter.value}, memo) == hash_value({"messages": shorter.value})
    assert compared == [5]  # no proof: its base is not what was hashed, so the items are compared


def test_a_proof_for_another_list_is_not_taken() -> None:
    memo = DigestMemo()
    first = memo.built["messages"] = Extension([], 0, [_message(0), _message(1)], None)
    history = first.value
    assert request_digest({"messages": history}, memo) == hash_value({"messages": history})
    # Handed in by mistake: the proof of a list that is not the body's, equal to it or not.
    wrong = memo.built["messages"] = Extension(history, 2, [_message(2)], first)
    assert wrong.base is memo.lists["messages"].items
    for value in ([_message(7)], [*history, _message(2)], [*history, _message(3)], list(wrong.items)):
        assert request_digest({"messages": value}, memo) == hash_value({"messages": value})
        memo.built["messages"] = wrong


def test_a_proof_under_another_key_or_text_before_the_list_is_not_taken() -> None:
    memo = DigestMemo()
    first = memo.built["messages"] = Extension([], 0, [_message(0)], None)
    assert request_digest({"messages": first.value}, memo) == hash_value({"messages": first.value})
    built = Extension(first.value, 1, [_message(1)], first)
    memo.built["input"] = built
    assert request_digest({"input": built.value}, memo) == hash_value({"input": built.value})
    memo.built["messages"] = built
    body = {"a": 1, "messages": built.value}  # the text before the list changed: hashed anew
    assert request_digest(body, memo) == hash_value(body)


def test_a_list_changed_in_place_is_not_taken_as_its_proof_says() -> None:
    memo = DigestMemo()
    first = memo.built["messages"] = Extension([], 0, [_message(0), _message(1)], None)
    assert request_digest({"messages": first.value}, memo) == hash_value({"messages": first.value})
    built = memo.built["messages"] = Extension(first.value, 2, [_message(2)], first)
    assert built.base is memo.lists["messages"].items
    built.value.append(_message(3))  # grown after it was built
    assert request_digest({"messages": built.value}, memo) == hash_value({"messages": built.value})
    built.value.pop(0)
    built.value.pop(0)  # shorter
    assert request_digest({"messages": built.value}, memo) == hash_value({"messages": built.value})


def test_a_list_changed_in_place_after_it_was_hashed_is_built_on_as_it_was_hashed() -> None:
    memo = DigestMemo()
    first = memo.built["messages"] = Extension([], 0, [_message(0), _message(1)], None)
    assert request_digest({"messages": first.value}, memo) == hash_value({"messages": first.value})
    hashed = list(first.value)
    first.value[0] = _message(5)  # the same length: the next list is built from the snapshot, as hashed
    built = memo.built["messages"] = Extension(first.value, 2, [_message(2)], first)
    assert built.value == [*hashed, _message(2)]
    assert request_digest({"messages": built.value}, memo) == hash_value({"messages": built.value})
    first.value.append(_message(6))  # grown: no longer the list of its snapshot, which is taken anew
    again = Extension(first.value, 3, [_message(7)], first)
    assert again.value == [_message(5), _message(1), _message(6), _message(7)]
    memo.built["messages"] = again
    assert request_digest({"messages": again.value}, memo) == hash_value({"messages": again.value})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),  # the endpoint (one memo, one body key: they interleave)
            st.integers(0, 2),  # items of the history the next request leaves out at the end
            st.integers(0, 2),  # new items
            st.sampled_from(["none", "append", "replace", "wrong-proof", "no-proof"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_interleaved_conversations_built_and_changed_hash_as_plain_bodies(steps: list[Any]) -> None:
    memo = DigestMemo()
    last: dict[str, Extension] = {}
    count = 0
    for endpoint, dropped, added, change in steps:
        previous = last.get(endpoint)
        base = previous.value if previous is not None else [_message(-1)]
        keep = max(1, len(base) - dropped) if base else 0
        new = [_message(count + n) for n in range(added)]
        count += added
        built = last[endpoint] = Extension(base, min(keep, len(base)), new, previous)
        memo.built["messages"] = built
        if change == "append":
            built.value.append(_message(100))
        elif change == "replace" and built.value:
            built.value[0] = _message(200)
            memo.built["messages"] = Extension(built.value, len(built.value), [], None)  # its proof anew
        elif change == "wrong-proof":
            memo.built["messages"] = Extension(built.value, len(built.value), [_message(300)], built)
        elif change == "no-proof":
            del memo.built["messages"]
        body = {"messages": built.value, "model": endpoint}
        assert request_digest(body, memo) == hash_value(body)


def _request(history: list[dict[str, Any]], url: str) -> HttpRequest:
    raw = json.dumps({"messages": history, "model": "m"}, separators=(",", ":")).encode()
    return HttpRequest("POST", url, {"content-type": "application/json"}, raw)


def test_resent_conversations_on_two_endpoints_hash_as_plain_bodies(compared: list[int]) -> None:
    from pytest_agentreplay.core.capture import Recorder, RunContext
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.http.recording import prepare_model_request

    ctx = RunContext(Recorder(RunMeta(run_id="r")))
    histories: dict[str, list[dict[str, Any]]] = {URL: [], URL + "/b": []}
    for n in range(12):
        for url, history in histories.items():
            history.append(_message(n))
            request = _request(history, url)
            prepared = prepare_model_request(ctx, request)
            assert prepared.request_hash == hash_value(json.loads(request.body))
            sent = ctx.rooms.of(resend.LastSent, resend.LastSent)[("POST", url)]
            assert sent is not None and (sent.built is not None) == (n > 0)
    # The two conversations share the memo's list under "messages": each compares against the other's.
    assert len(compared) <= 2 * 12


def test_a_decoded_conversation_hashes_its_extensions_without_comparing_them(compared: list[int]) -> None:
    messages: list[dict[str, Any]] = []
    events = []
    for n in range(20):
        messages = [*messages, _message(n)]
        body = {"model": "m", "messages": messages}
        events.append(
            {
                "run_id": "r",
                "seq": n,
                "ts": "t",
                "type": "model.call",
                "actor": "model",
                "class": "decision",
                "data": {"request_hash": request_digest(body)},
                "input_ref": {
                    "data_class": "personal",
                    "media_type": "application/vnd.agentreplay.http-request+json",
                    "inline": {"method": "POST", "url": URL, "headers": {}, "body": {"json": body}},
                },
            }
        )
    stored = json.loads(json.dumps(encode_events(events, "r")))
    assert all("delta" in e["input_ref"]["inline"] for e in stored[1:])
    compared.clear()
    assert decode_events(stored, "r") == events
    assert compared == [1]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=8), st.text(alphabet=st.characters(codec="utf-8"), max_size=8))
def test_a_string_member_is_written_as_the_encoder_writes_it(key: str, text: str) -> None:
    # The text of a string member is taken from the encoder's string function, not the encoder: the same.
    memo = DigestMemo()
    body = {key: text, "messages": [{"role": "user", "content": text}], "z": text}
    assert request_digest(body, memo) == hash_value(body)


def test_a_string_member_that_cannot_be_encoded_fails_as_the_plain_hash_does() -> None:
    body = {"model": "\ud800", "messages": [{"role": "user"}]}
    with pytest.raises(UnicodeEncodeError):
        hash_value(body)
    with pytest.raises(UnicodeEncodeError):
        request_digest(body, DigestMemo())
