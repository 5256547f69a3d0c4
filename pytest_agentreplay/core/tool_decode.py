"""Rebuilding stored ``@tool`` values (the tagged form ``tool_values`` describes): :func:`decode`, a
recorded generator's parts (:func:`stream_parts`) and a recorded exception (:func:`rebuild_exception`)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import marshal
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import PurePath
from typing import Any, Final, cast

from pydantic import BaseModel

from .documents import Document
from .tool_values import (
    BUILTIN_BASES,
    MAX_NESTING,
    STREAM_KINDS,
    TAG,
    NotRebuilt,
    Stream,
    class_path,
    codec_by_path,
    is_stream,
    resolve_class,
)

_TAG_BYTES: Final = TAG.encode()


def call_class(cls: type, base: object) -> object:
    make = getattr(cls, "_make", None)
    if issubclass(cls, tuple) and callable(make) and hasattr(cls, "_fields"):
        return make(base)
    return cls(base)


def decode(value: object, root: str = "result") -> object:
    """The value a stored form stands for (plain JSON is given back as it is). Raises :class:`NotRebuilt`."""
    if type(value) is not dict and type(value) is not list:
        return value
    try:
        # Whether it may hold a tagged object: one C-level scan of its marshal bytes.
        if _TAG_BYTES not in marshal.dumps(value):
            return value
    except ValueError:
        pass
    try:
        return _decode(value, 0)
    except NotRebuilt as exc:
        exc.root = root
        raise


def _decode(value: object, depth: int) -> object:
    if type(value) is list:
        return [_inner(item, f"[{n}]", depth) for n, item in enumerate(value)]
    if type(value) is not dict:
        return value
    if depth >= MAX_NESTING:
        raise NotRebuilt(f"nested more than {MAX_NESTING} levels deep", damaged=True)
    if TAG not in value:
        return {key: _inner(item, f"[{key!r}]", depth) for key, item in value.items()}
    kind = value[TAG]
    handler = _DECODERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        if kind in STREAM_KINDS:
            raise NotRebuilt(f"a {kind} is a @tool's whole result, not a value inside one", damaged=True)
        raise NotRebuilt(f"unknown {TAG} kind {kind!r}", damaged=True)
    return handler(_Tagged(value, depth))


def _inner(item: object, step: str, depth: int) -> object:
    if type(item) is not dict and type(item) is not list:
        return item
    try:
        return _decode(item, depth + 1)
    except NotRebuilt as exc:
        exc.steps.append(step)
        raise


class _Tagged:
    """A tagged object being decoded: its fields, checked as they are read."""

    def __init__(self, value: Document, depth: int) -> None:
        self.value = value
        self.depth = depth
        self.kind = value[TAG]

    def field(self, name: str, kind: type | tuple[type, ...] = object) -> Any:
        if name not in self.value:
            raise self.fail(f"no {name!r}")
        found = self.value[name]
        if not isinstance(found, kind) or (isinstance(found, bool) and kind in (int, float)):
            raise self.fail(f"{name!r} is {found!r}")
        return found

    def inner(self, item: object, step: str) -> object:
        return _inner(item, step, self.depth)

    def items(self) -> list[object]:
        return [self.inner(item, f"[{n}]") for n, item in enumerate(self.field("items", list))]

    def cls(self, base: type | tuple[type, ...] | None = None) -> type:
        path = self.field("class", str)
        try:
            found = resolve_class(path)
        except LookupError as exc:
            raise self.fail(f"class {path} cannot be found: {exc}", damaged=False) from None
        if base is not None and not issubclass(found, base):
            raise self.fail(f"{path} is not a class of this kind")
        return found

    def fail(self, reason: str, *, damaged: bool = True) -> NotRebuilt:
        return NotRebuilt(f"the {self.kind} tag: {reason}", damaged=damaged)


# The kinds stored as one text: the type (a subclass is stored as its base), its text, its parse.
TEXT_KINDS: Final[dict[str, tuple[type, Callable[[Any], str], Callable[[str], object]]]] = {
    "date": (dt.date, dt.date.isoformat, dt.date.fromisoformat),
    "uuid": (uuid.UUID, str, uuid.UUID),
    "decimal": (Decimal, str, Decimal),
}


def _from_text(parse: Callable[[str], object]) -> Callable[[_Tagged], object]:
    def decode_text(tagged: _Tagged) -> object:
        text = tagged.field("value", str)
        try:
            return parse(text)
        except (ValueError, InvalidOperation, OverflowError) as exc:
            raise tagged.fail(f"{text!r} does not parse: {exc}") from None

    return decode_text


def _moment_back(tagged: _Tagged) -> object:
    parse = dt.datetime.fromisoformat if tagged.kind == "datetime" else dt.time.fromisoformat
    moment = cast(dt.datetime | dt.time, _from_text(parse)(tagged))
    zone = tagged.value.get("zone")
    if zone is not None:
        try:
            from zoneinfo import ZoneInfo  # light, stdlib: only when a recorded time named its zone

            moment = moment.replace(tzinfo=ZoneInfo(str(zone)))
        except (ValueError, LookupError, OSError) as exc:
            raise tagged.fail(f"time zone {zone!r}: {exc}", damaged=False) from None
    if tagged.value.get("fold"):
        moment = moment.replace(fold=1)
    return moment


def _timedelta_back(tagged: _Tagged) -> object:
    parts = tagged.field("value", list)
    if len(parts) != 3 or not all(type(part) is int for part in parts):
        raise tagged.fail(f"value must be [days, seconds, microseconds], found {parts!r}")
    try:
        return dt.timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2])
    except OverflowError as exc:
        raise tagged.fail(str(exc)) from None


def _bytes_back(tagged: _Tagged) -> object:
    text = tagged.field("base64", str)
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise tagged.fail(f"base64: {exc}") from None
    return bytearray(data) if tagged.kind == "bytearray" else data


def _float_back(tagged: _Tagged) -> object:
    text = tagged.field("value", str)
    if text not in ("nan", "inf", "-inf"):
        raise tagged.fail(f"value must be nan, inf or -inf, found {text!r}")
    return float(text)


def _dict_back(tagged: _Tagged) -> object:
    out: dict[object, object] = {}
    for n, pair in enumerate(tagged.field("items", list)):
        if type(pair) is not list or len(pair) != 2:
            raise tagged.fail(f"items[{n}] must be a [key, value] pair, found {pair!r}")
        key = tagged.inner(pair[0], f" key {n}")
        try:
            out[key] = tagged.inner(pair[1], f"[{key!r}]")
        except TypeError as exc:  # an unhashable key: only an edit makes one
            raise tagged.fail(f"key {n}: {exc}") from None
    return out


def _set_back(tagged: _Tagged) -> object:
    try:
        return (set if tagged.kind == "set" else frozenset)(tagged.items())
    except TypeError as exc:
        raise tagged.fail(str(exc)) from None


def _rebuilt(tagged: _Tagged, build: Callable[[], object]) -> object:
    try:
        return build()
    except NotRebuilt:
        raise
    except Exception as exc:
        raise tagged.fail(f"rebuilding it raised {type(exc).__name__}: {exc}", damaged=False) from None


def _class_made(
    base: type | tuple[type, ...], read: Callable[[_Tagged], object], build: Callable[[Any, Any], object]
) -> Callable[[_Tagged], object]:
    """The decoder of a kind rebuilt as ``build(its class, read(tagged))``, the class a ``base``'s."""

    def decode_class_made(tagged: _Tagged) -> object:
        cls = tagged.cls(base)
        value = read(tagged)
        return _rebuilt(tagged, lambda: build(cls, value))

    return decode_class_made


def _dataclass_back(tagged: _Tagged) -> object:
    cls = tagged.cls()
    if not dataclasses.is_dataclass(cls):
        raise tagged.fail(f"{class_path(cls)} is not a dataclass")
    stored = tagged.field("fields", dict)
    values = {name: tagged.inner(item, f".{name}") for name, item in stored.items()}

    def build() -> object:
        fields = dataclasses.fields(cls)
        made = cls(**{f.name: values[f.name] for f in fields if f.init and f.name in values})
        for f in fields:
            if not f.init and f.name in values:
                object.__setattr__(made, f.name, values[f.name])
        return made

    return _rebuilt(tagged, build)


def _codec_back(tagged: _Tagged) -> object:
    path = tagged.field("class", str)
    codec = codec_by_path(path)
    if codec is None:
        raise tagged.fail(
            f"no codec is registered for {path}: call register_tool_codec for it before the tool is served",
            damaged=False,
        )
    stored = tagged.inner(tagged.field("value"), " (codec)")
    return _rebuilt(tagged, lambda: codec.decode(stored))


_DECODERS: Final[dict[str, Callable[[_Tagged], object]]] = {
    "tuple": lambda tagged: tuple(tagged.items()),
    "set": _set_back,
    "frozenset": _set_back,
    "dict": _dict_back,
    "bytes": _bytes_back,
    "bytearray": _bytes_back,
    "float": _float_back,
    "datetime": _moment_back,
    "time": _moment_back,
    "timedelta": _timedelta_back,
    **{kind: _from_text(parse) for kind, (_base, _text, parse) in TEXT_KINDS.items()},
    "path": _class_made(PurePath, lambda t: t.field("value", str), lambda cls, text: cls(text)),
    "enum": _class_made(enum.Enum, lambda t: t.inner(t.field("value"), ".value"), lambda cls, v: cls(v)),
    "pydantic": _class_made(
        BaseModel, lambda t: json.dumps(t.field("value")), lambda cls, text: cls.model_validate_json(text)
    ),
    "dataclass": _dataclass_back,
    "instance": _class_made(BUILTIN_BASES, lambda t: t.inner(t.field("value"), ""), call_class),
    "codec": _codec_back,
}


def stream_parts(value: object) -> Stream | None:
    """The recorded stream ``value`` stores, None when it is not one; :class:`NotRebuilt` when damaged."""
    if not is_stream(value):
        return None
    doc = cast(Document, value)
    tagged = _Tagged(doc, 0)
    items = tagged.field("items", list)
    complete = tagged.field("complete", bool)
    return Stream(tagged.kind, items, complete, doc.get("return"))


def rebuild_exception(doc: object) -> BaseException | None:
    """The exception :func:`exception_doc` stored, None when it cannot be rebuilt here."""
    if not isinstance(doc, dict) or not isinstance(doc.get("args"), list):
        return None
    try:
        cls = resolve_class(doc.get("class"))
        if not issubclass(cls, Exception):
            return None
        args = decode(doc["args"], "exception args")
        exc = cls(*args)  # type: ignore[misc]
    except Exception:  # a class gone (LookupError), args that do not rebuild (NotRebuilt), a raising init
        return None
    return exc if isinstance(exc, cls) else None
