"""The redactor's fast paths give what the plain paths they stand for give: a URL's pre-check
(``Redactor.redact_url``), a query parameter's decision (``Redactor.query_replacement``), an event's
idempotency key (``keep_idempotency_key``), over URLs and events chosen to reach every branch, with
secrets learnt on the way; the base64 pre-check of ``redact_encoded``; ``KnownSecrets.count``."""

from __future__ import annotations

import base64
import functools
import re
from urllib.parse import unquote

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.redaction import Redactor
from pytest_agentreplay.redaction.encoded import (
    MIN_ENCODED_CHARS,
    _redact_base64_string,
    keep_idempotency_key,
    redact_encoded,
)
from pytest_agentreplay.redaction.known import _MAX_VALUES, KnownSecrets
from pytest_agentreplay.redaction.rules import may_hold_value

TOKEN = "tok3nValue9876543210abcd"
URLS = [
    "http://127.0.0.1:38997/items/4?page=4",
    "https://api.example.com/v1/chat",
    f"http://ann:{TOKEN}@127.0.0.1:8080/v1/x?page=2",
    "http://ann@host/x",
    "https://host/x?access_token=abc123def456&page=1&access_token=again7777",
    "https://host/x?key=PROJ-123&key=AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "https://host/x?key=0123456789abcdefABCDEF",
    "https://host/cb#access_token=fragment-secret-1&state=xyz",
    "https://host/x?api%5Fkey=percent%2Dencoded%2Dsecret&q=a%20b",
    "https://host/x?%61pi_key=hidden-by-escapes-123&empty=&x=" + REDACTED,
    "https://host/x?sig=qs-signature-value-42;page=3",
    "https://host/x?q=" + TOKEN,
    "https://host/path%2Fwith%2Fescapes",
    "https://host/x?page=1#frag",
    "https://host/sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    "https://host/x?token=short",
    "https://host/x?next_page_token=keep-this-one-12345",
    "https://host/x?name=Bearer%20abcdefghij1234567890",
]


class _Plain(Redactor):
    """The paths the fast ones stand for, as they were written before them."""

    def redact_url(self, url: str) -> str:
        if not any(c in url for c in "?@#%") and not may_hold_value(url):
            return url
        return self.redact_string(url, keys=False)

    def query_replacement(self, match: re.Match[str]) -> str:
        name = match.group("name")
        value = match.group("value")
        if not value or value == REDACTED:
            return match.group(0)
        plain = unquote(value)
        if not self.is_secret_name(unquote(name), query=True, value=plain):
            return match.group(0)
        self.learn(plain)
        return f"{match.group('lead')}{name}={REDACTED}"


def test_urls_redact_as_the_plain_path_does_with_secrets_learnt_on_the_way() -> None:
    fast, plain = Redactor(extra_keys=["q"]), _Plain(extra_keys=["q"])
    for url in [*URLS, *reversed(URLS)]:
        assert fast.redact_url(url) == plain.redact_url(url), url
        assert fast.redact_string(url, keys=False) == plain.redact_string(url, keys=False), url
        assert fast.known.values() == plain.known.values()
    assert TOKEN in fast.known.values() and len(fast.known) > 3


def test_idempotency_keys_kept_as_the_plain_path_keeps_them() -> None:
    # The walk asks ``keep_idempotency_key`` only of an event whose tool names a key: asked of the others
    # too, it changes nothing.
    events = [
        {"tool": {"idempotency_key": "idem-123"}, "data": {"arguments": {"password": "idem-123"}}},
        {"tool": {"idempotency_key": ""}, "data": {"arguments": {"password": ""}}},
        {"tool": {"name": "x"}, "data": {"arguments": {"password": "hunter23"}}},
        {"tool": "not an object", "data": {"arguments": {"password": "hunter24"}}},
        {"tool": {"idempotency_key": None}, "data": {"arguments": {"password": "None"}}},
        {"tool": {"idempotency_key": 7}, "data": {"arguments": {"password": 7}}},
        {"tool": {"idempotency_key": 0}, "data": {"arguments": {"password": 0}}},
        {"data": {"arguments": {"password": "hunter25"}}},
    ]
    redactor = Redactor(learns=False)
    for event in events:
        out = redactor.redact(event)
        assert keep_idempotency_key(redactor, event, out) == out, event
    assert redactor.redact(events[0])["data"]["arguments"] == {"password": "idem-123"}
    assert redactor.redact(events[5])["data"]["arguments"] == {"password": REDACTED}  # a key is text


def _skipped(text: str) -> bool:
    """What ``redact_encoded`` skips without asking ``_redact_base64_string``."""
    return (":" in text or " " in text) and text[:5].lower() != "data:"


SECRET_JSON = base64.b64encode(b'{"password": "hunter2hunter2"}').decode()
ENCODED = [
    "2026-12-06T06:00:44.123456+00:00",
    "see the notes at https://example.com/x",
    "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM=",
    SECRET_JSON,
    SECRET_JSON + " ",
    "data:application/json;base64," + SECRET_JSON,
    "DATA:application/json;base64," + SECRET_JSON,
    "Data:text/plain;base64,aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=",
    "data: application/json;base64," + SECRET_JSON,
    "data:application/json;base64, " + SECRET_JSON,
    "x:data:application/json;base64," + SECRET_JSON,
    "token=abc%3Adef%20ghi%2Fjkl:mnopqrst uvwx",
]


def test_text_the_base64_pre_check_skips_is_no_base64() -> None:
    redactor = Redactor()
    for text in ENCODED:
        skipped = _skipped(text)
        assert not skipped or _redact_base64_string(redactor, text, True) is None, text
        if not skipped and len(text) >= MIN_ENCODED_CHARS:
            plain = _redact_base64_string(redactor, text, True)
            assert plain is None or redact_encoded(redactor, text, True) == plain, text
    assert redact_encoded(redactor, "data:application/json;base64," + SECRET_JSON, True) != (
        "data:application/json;base64," + SECRET_JSON
    )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZ09+/=-_:; ,\n\rdatDAT", min_size=MIN_ENCODED_CHARS, max_size=40))
def test_the_base64_pre_check_skips_only_text_that_is_no_base64(text: str) -> None:
    if _skipped(text):
        assert _redact_base64_string(Redactor(), text, True) is None


def test_known_secrets_count_is_their_length() -> None:
    known = KnownSecrets()
    for value in [
        "hunter2hunter2",
        "hunter2hunter2",
        "short",
        REDACTED,
        ["  padded-secret  ", {"k": "abcdefg"}],
    ]:
        known.add(value)
        assert known.count == len(known)
    twin = known.copy()
    assert twin.count == len(twin) == 3
    twin.add("another-secret")
    assert (twin.count, known.count) == (4, 3)
    full = KnownSecrets()
    full.add([f"value-{i:06d}" for i in range(_MAX_VALUES + 5)])
    assert full.count == len(full) == _MAX_VALUES


def test_numbers_are_taken_from_like_exactly_when_they_are_the_same_json() -> None:
    big, same_big = 10**6, int("1000000")
    value = {"seq": big, "n": 1, "t": True, "f": 2.5, "z": None, "password": 123456789, "x": 7}
    like = {"seq": same_big, "n": 1.0, "t": 1, "f": 3.5, "z": None, "password": REDACTED, "x": 7}
    out = Redactor().redact(value, like=like)
    assert out == Redactor().redact(value) == {**value, "password": REDACTED}
    assert out["seq"] is same_big and out["x"] is like["x"]
    assert type(out["n"]) is int and out["t"] is True and out["f"] is value["f"]
    alike = {"seq": same_big, "n": 1, "z": None}
    assert Redactor().redact({"seq": big, "n": 1, "z": None}, like=alike) is alike
    # A float equal to the recorded one is that one; -0.0 is not 0.0, nor 1.5 the recorded 2.5.
    floats = {"a": float("2.5"), "b": 0.0, "c": 1.5}
    twins = {"a": 2.5, "b": -0.0, "c": 2.5}
    out = Redactor().redact(floats, like=twins)
    assert out["a"] is twins["a"] and out["b"] is floats["b"] and out["c"] is floats["c"]


def test_patterns_compiled_on_use_are_the_patterns_compiled_at_import() -> None:
    from pytest_agentreplay.redaction import bodies, encoded, rules

    lazy = [
        getter
        for module in (rules, bodies, encoded)
        for getter in vars(module).values()
        if callable(getter) and isinstance(getattr(getter, "__wrapped__", None), functools.partial)
    ]
    assert len(lazy) >= 12  # USERINFO, JSON_PAIR, the multipart, base64, percent and byte-mask shapes
    for getter in lazy:
        made = getter.__wrapped__
        assert getter() is getter()  # compiled once
        assert getter() == re.compile(*made.args)  # (a Pattern equals one of the same text and flags)
    text = 'see https://user:pw@host/x and {"password": "hunter2hunter2"} in a cut stream'
    spans = Redactor().secret_spans(text)
    assert [text[s:e] for s, e in spans] == ["user:pw", "hunter2hunter2"]
