"""A conversation's request resends the previous one's history: parse and check only what is new.

Parsed whole, the N requests of a conversation cost its square (parsing, allocation, format checks). Kept
per endpoint: the previous request's parsed body and its bytes up to the end of its conversation list. A
request starting with those bytes is parsed from there on only, its earlier items being the previous
request's very objects (identity hits for redaction, hashing and comparison downstream). The new part is
serialised again and compared with what was sent, so the result is exactly what a full parse gives, or
the caller parses the whole body. When what follows the list is the very bytes that followed it last time
(an agent's tools and settings, resent on every call), only the new items are parsed and checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import dropwhile, takewhile
from typing import NamedTuple, TypeGuard

from ..core.canonical import Extension
from ..core.documents import Document
from .bodies import json_text

# The formats whose text is one line with no spacing choices left to the writer (see ``bodies``): for
# those, the text of a list's first items is a prefix of the text of the whole body.
_COMPACT = (None, "compact-ascii")
_CONVERSATION_KEYS = ("messages", "input", "contents")
# Stands in for the conversation key when the rest of a body is parsed alone. JSON text cannot hold a
# raw NUL, so it is escaped in both formats, and no API names a field with one.
_STAND_IN = "\x00agentreplay-resent"
_OPEN = b'{"\\u0000agentreplay-resent":['


class Sent(NamedTuple):
    """The previous request to an endpoint: its parsed body (read only: an emitted event's, whose items the
    next body takes as they are), the key of its conversation list, its bytes up to the end of that list's
    last item, and the compact formats those bytes are the text of, in the order the full check tries them.
    ``suffix``: the bytes after the last item, when checked to be the text of the members after the list in
    each of ``formats`` (the members of ``value`` after ``key``). ``prefix`` may be a view of the request's
    own bytes (immutable): copied at every request, a conversation's history would cost its square.
    ``base``: the previous body, when ``value`` holds its very members, its list extended (all shared).
    ``built``: ``value``'s list as built from the previous one's, the proof of that (``request_digest``)."""

    value: Mapping[str, object]
    key: str
    prefix: bytes | memoryview
    formats: tuple[str | None, ...]
    suffix: bytes | None = None
    base: Mapping[str, object] | None = None
    built: Extension | None = None


class LastSent(dict[tuple[str, str], Sent | None]):
    """A run's room: (method, URL) -> what the last request there left the next one (None: nothing)."""


def _turns(items: object) -> TypeGuard[list[object]]:
    return type(items) is list and bool(items) and all(type(item) is dict for item in items)


def _conversation_key(value: Mapping[str, object]) -> str | None:
    named = next((key for key in _CONVERSATION_KEYS if _turns(value.get(key))), None)
    if named is not None:
        return named
    sizes = {key: len(items) for key, items in value.items() if _turns(items)}
    return max(sizes, key=sizes.__getitem__, default=None)


def _before(value: Mapping[str, object], key: str) -> Document:
    """The members of ``value`` written before ``key``."""
    return dict(takewhile(lambda item: item[0] != key, value.items()))


def _prefix_text(value: Mapping[str, object], key: str, fmt: str | None) -> str | None:
    items = value[key]
    assert type(items) is list  # _conversation_key chose a list
    head = _before(value, key)
    head[key] = []
    head_text = json_text(head, fmt)
    if not head_text.endswith("[]}"):
        return None
    return head_text[:-2] + ",".join(json_text(item, fmt) for item in items)


def remember(raw: bytes, value: object, fmt: str | None, *, whole: bool = False) -> Sent | None:
    """What a following request may extend, from ``raw`` parsed as ``value`` in the format the full check
    named (``fmt``); None when the body is not a compact JSON object holding a list of objects. ``whole``:
    ``raw`` is known to be the compact UTF-8 text of ``value`` (just written and compared whole)."""
    if fmt not in _COMPACT or type(value) is not dict:
        return None
    key = _conversation_key(value)
    if key is None:
        return None
    if whole and fmt is None:
        return _remember_whole(raw, value, key)
    text = _prefix_text(value, key, fmt)
    try:
        prefix = text.encode("utf-8") if text is not None else None
    except UnicodeEncodeError:
        return None  # a lone surrogate in the history: parsed whole, every time
    if prefix is None or not raw.startswith(prefix) or raw[len(prefix) : len(prefix) + 1] != b"]":
        return None
    # The other compact format writes the same text when no character needs escaping in one and not the
    # other: then a later request may be in either (the full check tries plain UTF-8 first).
    formats: tuple[str | None, ...]
    if fmt is None:
        formats = (None, "compact-ascii") if prefix.isascii() else (None,)
    else:
        formats = (None, fmt) if _prefix_text(value, key, None) == text else (fmt,)
    return Sent(value, key, prefix, formats, _suffix(value, key, raw[len(prefix) :], formats))


def _remember_whole(raw: bytes, value: Mapping[str, object], key: str) -> Sent:
    """:func:`remember` for a body whose bytes are the compact UTF-8 text of ``value``: a compact text is its
    members' texts joined, so the bytes after the list's items are the text of the members after it, from
    its ``]`` on, and its items are not written again to find where they end."""
    after = _after_list(value, key)
    tail = json_text(after, None).encode("utf-8")  # raw is this text's encoding: it encodes
    suffix = tail[len(_opening(key)) :]
    prefix = raw[: len(raw) - len(suffix)]
    formats: tuple[str | None, ...] = (None, "compact-ascii") if prefix.isascii() else (None,)
    checked = None
    if key.isascii() and "\x7f" not in key and _formats_of(after, tail, formats, written=True) == formats:
        checked = suffix
    return Sent(value, key, prefix, formats, checked)


def _after_list(value: Mapping[str, object], key: str) -> dict[str, object]:
    """``value``'s members from the list ``key`` on, the list emptied: what follows the list's items."""
    after = dict(dropwhile(lambda item: item[0] != key, value.items()))
    after[key] = []
    return after


def _opening(key: str) -> bytes:
    """The text of an object whose first member is the list ``key``, up to the list's first item."""
    return b"{" + json_text(key, None).encode("utf-8") + b":["


def _suffix(
    value: Mapping[str, object], key: str, suffix: bytes, formats: tuple[str | None, ...]
) -> bytes | None:
    """``suffix`` (a body's bytes after its list's items) when it is the text of the members of ``value``
    after ``key`` in each of ``formats``: the full check named one format, ``raw`` may still be in none."""
    if not key.isascii() or "\x7f" in key:
        return None  # the key's text may differ between the formats
    after = _after_list(value, key)
    try:
        checked = _formats_of(after, _opening(key) + suffix, formats)
    except UnicodeEncodeError:
        return None
    return suffix if checked == formats else None


def _formats_of(
    tail: object, text: bytes, candidates: tuple[str | None, ...], *, written: bool = False
) -> tuple[str | None, ...]:
    """The candidate formats whose text of ``tail`` is ``text``. Compact UTF-8 and compact ASCII texts
    differ only where the first writes a character outside printable ASCII (the second escapes it): when
    the first matched a text without one, so does the second, and the tail is not written again.
    ``written``: ``text`` is the text of ``tail`` in the first candidate (the caller just wrote it)."""
    first = candidates[0]
    if not written and json_text(tail, first).encode("utf-8") != text:
        return tuple(fmt for fmt in candidates[1:] if json_text(tail, fmt).encode("utf-8") == text)
    if candidates == (None, "compact-ascii") and text.isascii() and b"\x7f" not in text:
        return candidates
    return (first, *(fmt for fmt in candidates[1:] if json_text(tail, fmt).encode("utf-8") == text))


def extend(sent: Sent, raw: bytes) -> tuple[Document, Sent, str | None] | None:
    """``raw`` parsed, sharing ``sent``'s objects where it resends them, what the next request may extend,
    and the format the full check would name; None when ``raw`` does not start with ``sent``'s bytes or
    is not in one of its formats."""
    prefix = sent.prefix
    if not raw.startswith(prefix):
        return None
    suffix = sent.suffix
    if suffix is not None and len(raw) >= len(prefix) + len(suffix) and raw.endswith(suffix):
        extended = _extend_items(sent, suffix, raw)
        if extended is not None:
            return extended
    rest = raw[len(prefix) :]
    if rest[:1] == b",":
        if rest[1:2] == b"]":
            return None  # a trailing comma: not JSON, as the full parse will say
        text = _OPEN + rest[1:]
    elif rest[:1] == b"]":
        text = _OPEN + rest
    else:
        return None
    try:
        tail = json.loads(text)
    except ValueError:
        return None
    if type(tail) is not dict:
        return None
    new_items = tail.get(_STAND_IN)
    if type(new_items) is not list or next(iter(tail)) != _STAND_IN:
        return None
    if rest[:1] == b"," and not new_items:
        return None
    # The new part must read back as it was written, in a format the shared part is the text of: then the
    # whole body is that format's text of the value built here, as a full parse and check would find.
    try:
        formats = _formats_of(tail, text, sent.formats)
        # A compact list's text is its items' texts joined by commas: one encoder call for all of them.
        listed = json_text(new_items, formats[0]).encode("utf-8") if formats and new_items else b"[]"
    except UnicodeEncodeError:
        return None  # a lone surrogate: the full parse decides what the body is
    if not formats:
        return None
    del tail[_STAND_IN]
    history = sent.value[sent.key]
    assert type(history) is list  # remember() chose the key of a list
    # A new body of its own, holding the previous one's items (the objects themselves, read only there).
    value = _before(sent.value, sent.key)
    if sent.key in tail or any(name in tail for name in value):
        return None  # a key written twice: the full parse decides which one counts
    built = Extension(history, len(history), new_items, sent.built)
    value[sent.key] = built.value
    value.update(tail)
    added = b"," + listed[1:-1] if new_items else b""
    end = len(prefix) + len(added)
    following = Sent(value, sent.key, b"".join((prefix, added)), formats, raw[end:], built=built)
    return value, following, formats[0]


def _extend_items(sent: Sent, suffix: bytes, raw: bytes) -> tuple[Document, Sent, str | None] | None:
    """:func:`extend` for a body ``raw`` whose bytes after the list are ``sent``'s (``suffix``), already
    checked in each of its formats: only ``middle``, what comes between the shared items and the suffix, is
    parsed and written again; the members after the list are ``sent``'s very objects (equal to what a parse
    gives)."""
    end = len(raw) - len(suffix)
    middle = raw[len(sent.prefix) : end]
    formats = sent.formats
    new_items: object = []
    if middle:
        if middle[:1] != b"," or middle == b",":
            return None
        listed = b"[" + middle[1:] + b"]"
        try:
            new_items = json.loads(listed)
            formats = _formats_of(new_items, listed, formats)
        except (ValueError, UnicodeEncodeError):
            return None  # the list may end before the suffix: the whole rest is parsed
        if not formats:
            return None
    assert type(new_items) is list  # the text of a list
    history = sent.value[sent.key]
    assert type(history) is list  # remember() chose the key of a list
    built = Extension(history, len(history), new_items, sent.built)
    value: Document = {}
    for name, member in sent.value.items():
        value[name] = built.value if name == sent.key else member
    # The new prefix, the previous one and ``middle``: ``raw``'s bytes up to the suffix, viewed (not copied).
    prefix = memoryview(raw)[:end] if type(raw) is bytes else raw[:end]
    return value, Sent(value, sent.key, prefix, formats, suffix, sent.value, built), formats[0]
