"""Canonical JSON: one byte sequence per value, so saves are reproducible and hashes stable."""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from operator import is_
from typing import Any, Final, NamedTuple, Protocol

from .json_copy import copy_json


def dumps_pretty(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


# The cassette file's layout (:func:`dumps_cassette`): one space per level, and an object or a list written on
# the line of its key when it fits within this many characters, indentation included.
CASSETTE_INDENT: Final = 1
CASSETTE_WIDTH: Final = 120
_encode_string = json.encoder.encode_basestring


def dumps_cassette(value: object, *, inline_objects: bool = True) -> str:
    """A cassette file's text: a member per line (a changed field is one changed line) unless it fits within
    :data:`CASSETTE_WIDTH`. ``inline_objects=False``: the older layout (only lists of plain values inline),
    kept for files written in it so that an update does not re-flow them."""
    out: list[str] = []
    _write(value, 0, 0, out, inline_objects)
    out.append("\n")
    return "".join(out)


def _write(value: object, level: int, used: int, out: _Out, inline_objects: bool) -> None:
    """Append ``value`` at ``level``, after ``used`` characters of its line (level 0: a line per member)."""
    if not isinstance(value, dict | list | tuple):
        out.append(_scalar(value))
        return
    brackets = "{}" if isinstance(value, dict) else "[]"
    if not value:
        out.append(brackets)
        return
    budget = CASSETTE_WIDTH - used
    if inline_objects and level:
        line = _one_line(value, budget)
    else:
        line = None if isinstance(value, dict) else _flat_list(value, budget)
    if line is not None:
        out.append(line)
        return
    inner = " " * (CASSETTE_INDENT * (level + 1))
    out.append(brackets[0])
    members = _members(value)
    last = len(members) - 1
    for n, (head, item) in enumerate(members):
        out.append(("\n" if not n else ",\n") + inner + head)
        # The comma after the member is on its line (the older layout did not count it: kept for its files).
        comma = 1 if inline_objects and n < last else 0
        _write(item, level + 1, len(inner) + len(head) + comma, out, inline_objects)
    out.append("\n" + " " * (CASSETTE_INDENT * level) + brackets[1])


class _Out(Protocol):
    def append(self, piece: str, /) -> None: ...


class _Differs(Exception):
    pass


class _Compare:
    """Where :func:`_write` puts its text to compare it with ``text`` piece by piece, rather than keep it."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def append(self, piece: str, /) -> None:
        if not self.text.startswith(piece, self.pos):
            raise _Differs
        self.pos += len(piece)


def is_cassette_text(text: str, value: object, *, inline_objects: bool = True) -> bool:
    """Whether ``text`` is ``dumps_cassette(value, ...)``, stopping at the first character that differs."""
    out = _Compare(text)
    try:
        _write(value, 0, 0, out, inline_objects)
        out.append("\n")
    except _Differs:
        return False
    return out.pos == len(text)


def _one_line(value: dict[object, object] | list[object] | tuple[object, ...], budget: int) -> str | None:
    """``value`` on one line as ``json.dumps(sort_keys=True)`` writes it, or None when that takes more than
    ``budget`` characters (found at the first character over: a large value costs no more than a small)."""
    parts: list[str] = []
    return "".join(parts) if _one_line_into(value, budget, parts) >= 0 else None


def _one_line_into(value: object, budget: int, parts: list[str]) -> int:
    """Append the one-line text of ``value`` to ``parts``; the budget left (negative: it does not fit)."""
    if isinstance(value, dict | list | tuple):
        is_dict = isinstance(value, dict)
        # A member takes five characters at least (``"": 0``), an item one, and a separator: a long one fails.
        if len(value) * (7 if is_dict else 3) - (2 if is_dict else 0) > budget:
            return -1
        budget -= 2
        parts.append("{" if is_dict else "[")
        for n, (head, item) in enumerate(_members(value)):
            head = (", " if n else "") + head
            budget -= len(head)
            if budget < 0:
                return budget
            parts.append(head)
            budget = _one_line_into(item, budget, parts)
            if budget < 0:
                return budget
        parts.append("}" if is_dict else "]")
        return budget
    if type(value) is str and len(value) > budget:
        return -1
    text = _scalar(value)
    parts.append(text)
    return budget - len(text)


def _flat_list(value: list[object] | tuple[object, ...], budget: int) -> str | None:
    """A list of plain values on one line within ``budget``, else None (the layout before objects did)."""
    if len(value) * 3 > budget or any(isinstance(item, dict | list | tuple) for item in value):
        return None  # too many items to fit (a long list is refused before it is looked at)
    return _one_line(value, budget)


def _members(value: dict[object, object] | list[object] | tuple[object, ...]) -> list[tuple[str, object]]:
    """(``"key": `` or nothing, the member), keys as ``json.dumps(sort_keys=True)`` writes them."""
    if not isinstance(value, dict):
        return [("", item) for item in value]
    keys: list[object] = sorted(value)  # type: ignore[type-var]
    return [(_encode_string(k if type(k) is str else json.dumps(k)) + ": ", value[k]) for k in keys]


def _scalar(value: object) -> str:
    # As json.dumps writes them (its checks included: no NaN, JSON types only).
    if type(value) is str:
        return _encode_string(value)
    return _SCALAR_ENCODER.encode(value)


# json.dumps(value, ensure_ascii=False, allow_nan=False)'s encoder, made once (json.dumps makes one a call).
_SCALAR_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _compact_encoder() -> Callable[[object, int], Iterable[str]] | None:
    """:func:`dumps_compact`'s C encoder, made once (``json.dumps`` makes one per call, which costs more than
    encoding a message). No markers dict, which threads would share: a circular value recurses to
    ``RecursionError``, then ``json.dumps`` names it."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    encode: Callable[[object, int], Iterable[str]] = make(
        None, encoder.default, _encode_string, None, ":", ",", True, False, False
    )
    return encode


_COMPACT: Final = _compact_encoder()


def dumps_compact(value: object) -> str:
    if _COMPACT is not None:
        try:
            return "".join(_COMPACT(value, 0))
        except RecursionError:
            pass  # circular, or nested past the interpreter's limit: json.dumps says which
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def display_text(value: object, *, indent: int | None = None) -> str:
    """A value as a reader sees it in a report: a string as it is, anything else as sorted JSON (``indent``
    for a block), or its ``repr`` when JSON cannot hold it."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=indent)
    except (TypeError, ValueError):
        return repr(value)


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


# Types whose ``==`` between two values of the same type is JSON equality (not float: 0.0 == -0.0).
_EXACT_EQUALITY = frozenset({str, int, bool, type(None)})
# A tuple, not ``dict | list | float | int``: that union is built anew at every call.
_MARSHALLED = (dict, list, float, int)


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values, type for type (``true`` is not ``1``, ``1`` is not ``1.0``), key order aside:
    one C-level ``==``, then marshal bytes (format 2: no back-references), then only for objects in
    different key order their sorted JSON."""
    if a is b:
        return True
    if a != b:
        return False
    kind = type(a)
    if kind is type(b) and kind in _EXACT_EQUALITY:
        return True
    try:
        # What is left of JSON values: containers, and numbers equal across types (1, 1.0, true).
        if (
            isinstance(a, _MARSHALLED)
            and isinstance(b, _MARSHALLED)
            and marshal.dumps(a, 2) == marshal.dumps(b, 2)
        ):
            return True
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return False


def hash_value(value: object) -> str:
    return sha256_hex(dumps_compact(value))


class HashedList(NamedTuple):
    """A conversation's list as :func:`request_digest` last hashed it: the text before it, a snapshot of its
    items (the caller's list may grow) and the hash state after them (the memo's own: handed out as copies,
    grown in place only by the request that took it out of the memo)."""

    before: str
    items: tuple[Mapping[str, object], ...]
    state: hashlib._Hash


class Extension:
    """``base[:keep]`` then ``new``, built from a snapshot of the items of ``base`` (``last``'s, when ``base``
    is its list, the previous one built): ``items``, this list's snapshot, starts with that snapshot, kept
    as ``base``, and ``value`` is the list of ``items``. Made only so, it is the proof, checked by identity
    by :func:`request_digest`, that ``value`` extends a list hashed with ``base`` as its snapshot. ``value``
    is a body's list: like its items, it must not change once built."""

    __slots__ = ("base", "items", "value")

    def __init__(self, base: list[object], keep: int, new: Iterable[object], last: Extension | None) -> None:
        snapshot = last.items if last is not None and last.holds(base) else tuple(base)
        self.base: Final[tuple[object, ...]] = snapshot if keep == len(snapshot) else snapshot[:keep]
        self.items: Final[tuple[object, ...]] = self.base + tuple(new)
        self.value: Final[list[object]] = list(self.items)

    def holds(self, value: object) -> bool:
        """Whether ``value`` is this list, its length unchanged."""
        return self.value is value and len(self.value) == len(self.items)


class DigestMemo:
    """What :func:`request_digest` serialised and hashed before, by identity: ``items``: id(item) -> (item,
    its canonical JSON); ``lists``: per body key, the last list hashed under it; ``built``: per body key,
    the last list a caller built as an :class:`Extension` (its proof that the list extends another);
    ``items_hashed``: the items :func:`items_hash` hashed last and their digest. An item must not change once
    hashed: they are the bodies' parsed objects, which no hook or user code is handed."""

    __slots__ = ("built", "items", "items_hashed", "lists")

    def __init__(self) -> None:
        self.items: dict[int, tuple[Mapping[str, object], str]] = {}
        self.lists: dict[str, HashedList] = {}
        self.built: dict[str, Extension] = {}
        self.items_hashed: tuple[tuple[object, ...], str] | None = None


def request_digest(body: object, memo: DigestMemo | None = None) -> str:
    """:func:`hash_value` of a JSON request body, memoised by identity: an item of its lists of objects seen
    before is not serialised again, and its first such list is hashed on from where the previous request's
    ended, so an N-call conversation serialises and hashes its messages once."""
    if not isinstance(body, dict) or memo is None:
        return hash_value(body)
    try:
        items: list[tuple[object, object]] = sorted(body.items())
    except TypeError:
        return hash_value(body)
    pending = ["{"]
    hasher: hashlib._Hash | None = None
    for index, (key, value) in enumerate(items):
        if not isinstance(key, str):
            return hash_value(body)
        head = ("," if index else "") + _encode_string(key) + ":"
        last: HashedList | None = None
        proof: Extension | None = None
        dicts = False
        if type(value) is list and value:
            last = memo.lists.get(key) if hasher is None else None
            built = memo.built.get(key)
            proof = built if built is not None and built.holds(value) else None
            # A list built as an extension of the last one (its proof, checked by identity), or found to be.
            extends = last is not None and proof is not None and last.items is proof.base
            if last is not None and not extends and not _extends(last.items, value):
                last = None
            # The items the list last hashed under the key holds as the very objects: dicts, checked then.
            dicts = all(
                map(isinstance, value[len(last.items) :] if last is not None else value, repeat(dict))
            )
        if dicts and type(value) is list:
            if hasher is None:
                snapshot = proof.items if proof is not None else tuple(value)
                hasher = _list_hasher(key, "".join(pending) + head + "[", snapshot, memo, last)
                pending = ["]"]
            else:
                pending.append(head + "[" + ",".join(_item_text(item, memo) for item in value) + "]")
        else:
            # A string's text is its encoding (as the encoder writes it, without a call through the encoder).
            pending.append(head + (_encode_string(value) if type(value) is str else dumps_compact(value)))
    pending.append("}")
    if hasher is None:
        return sha256_hex("".join(pending))
    hasher.update("".join(pending).encode("utf-8"))
    return hasher.hexdigest()


def _extends(items: tuple[object, ...], value: list[object]) -> bool:
    """Whether the list ``value`` starts with the very objects ``items``."""
    return len(items) <= len(value) and all(map(is_, items, value))


def _list_hasher(
    key: str, before: str, value: tuple[Any, ...], memo: DigestMemo, extended: HashedList | None
) -> hashlib._Hash:
    """A copy of the hash state after ``before`` and ``value`` (a snapshot of a list's items), the caller's
    to update; ``extended``: the memo's list under ``key`` when ``value`` starts with its items."""
    # Taken out of the memo (one atomic step): no other thread can reach the state while it grows in place.
    last = memo.lists.pop(key, None)
    if last is not None and last is extended and last.before == before:
        hasher = last.state
        if len(last.items) < len(value):
            added = "," + ",".join(_item_text(item, memo) for item in value[len(last.items) :])
            hasher.update(added.encode("utf-8"))
    else:
        text = before + ",".join(_item_text(item, memo) for item in value)
        hasher = hashlib.sha256(text.encode("utf-8"))
    copy = hasher.copy()
    memo.lists[key] = HashedList(before, value, hasher)
    return copy


def items_hash(items: list[object], memo: DigestMemo) -> str:
    """:func:`hash_value` of a list, the text of each of its JSON objects taken from ``memo`` (a list's
    compact text is its items' texts joined): the tools a conversation resends are written once per run, and
    hashed once while each request holds the very dicts of the previous one (the resent body's parse hands
    back the objects it parsed before)."""
    last = memo.items_hashed
    if last is not None and _same_dicts(last[0], items):
        return last[1]
    texts = (_item_text(item, memo) if type(item) is dict else dumps_compact(item) for item in items)
    digest = sha256_hex("[" + ",".join(texts) + "]")
    memo.items_hashed = (tuple(items), digest)
    return digest


def _same_dicts(before: tuple[object, ...], items: list[object]) -> bool:
    """Whether ``items`` holds the very dicts ``before`` does, in order (a dict must not change once hashed;
    another value is not known to be one the memo wrote)."""
    return (
        len(before) == len(items)
        and all(map(is_, before, items))
        and all(type(item) is dict for item in items)
    )


def _item_text(item: Mapping[str, object], memo: DigestMemo) -> str:
    seen = memo.items.get(id(item))
    if seen is not None and seen[0] is item:
        return seen[1]
    text = plain_compact(item)
    memo.items[id(item)] = (item, text)
    return text


# The types whose values orjson writes as :func:`dumps_compact` does (``type(None)``: ``null``).
_PLAIN_TYPES: Final = frozenset({str, int, bool, type(None)})


def plain_compact(value: object) -> str:
    """:func:`dumps_compact` of ``value``, by orjson (a third of the cost) when that is the same text: for
    exact dicts, lists, strings, integers, booleans and None. orjson spells floats its own way and writes
    what ``json`` refuses (dataclasses), so anything else, and what orjson refuses, goes to
    :func:`dumps_compact` (``tests/test_plain_compact.py`` holds escaping and key order to ``json``'s)."""
    # Imported here: a child's network guard imports this module where only the stdlib is (``python -S``).
    import orjson

    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson's JSONEncodeError is one
        text = None
    if text is None:  # outside the handler: what json raises then is not chained to orjson's refusal
        return dumps_compact(value)
    # Walked only once orjson has written it: a circular value never reaches the walk.
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif type(item) not in _PLAIN_TYPES:
            return dumps_compact(value)
    return text.decode()


# -- key order: what sorted keys lose ------------------------------------------------------------------
#
# A cassette stores objects with sorted keys (stable bytes, reviewable diffs), but a value replay hands back
# to user code (a tool result, a record_value value) must come back as it was recorded: ``list(result)``
# and ``json.dumps(result)`` see the key order. The order is kept beside the value, for the objects whose
# keys were not sorted already: JSON pointer (RFC 6901) -> the keys in their recorded order.

KeyOrder = dict[str, list[str]]


def key_order(value: object) -> KeyOrder | None:
    """JSON pointer -> keys of every object in ``value`` whose keys are not sorted; None when all are."""
    found: KeyOrder = {}
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        pointer, item = stack.pop()
        if type(item) is dict:
            keys = list(item)
            if any(type(k) is not str for k in keys):
                continue
            if keys != sorted(keys):
                found[pointer] = keys
            stack.extend(
                (f"{pointer}/{pointer_token(k)}", v) for k, v in item.items() if type(v) in (dict, list)
            )
        elif type(item) is list:
            stack.extend((f"{pointer}/{i}", v) for i, v in enumerate(item) if type(v) in (dict, list))
    return found or None


def in_key_order(value: object, order: object) -> object:
    """A copy of ``value`` (always: user code may change it, and ``value`` is the loaded cassette's) with the
    objects ``order`` (from :func:`key_order`) names in their recorded key order. Unlisted keys follow in
    their own order, listed keys the value lacks are skipped: an edited cassette still loads."""
    fresh: object = copy_json(value)
    if not order or not isinstance(order, dict):
        return fresh
    for pointer, keys in order.items():
        if not isinstance(pointer, str) or not isinstance(keys, list) or (pointer and pointer[0] != "/"):
            continue
        found = _at(fresh, pointer)
        if isinstance(found, dict):
            listed = [k for k in dict.fromkeys(keys) if isinstance(k, str) and k in found]
            chosen = set(listed)
            for name in listed + [k for k in found if k not in chosen]:
                found[name] = found.pop(name)
    return fresh


def _at(value: object, pointer: str) -> object:
    """What the JSON pointer names in ``value``, else None."""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return None
    return value


def pointer_token(key: str) -> str:
    """``key`` as a JSON pointer (RFC 6901) token."""
    return key.replace("~", "~0").replace("/", "~1")
