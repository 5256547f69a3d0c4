"""Storing ``@tool`` values in the tagged form ``tool_values`` describes: :class:`Encoder`, and the record
of a tool's exception (:func:`exception_doc`)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import inspect
import json
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import PurePath
from typing import Any, Final

from pydantic import BaseModel

from .canonical import dumps_compact, same_json
from .capture import to_jsonable
from .documents import Document
from .tool_decode import TEXT_KINDS, call_class, decode
from .tool_values import (
    BUILTIN_BASES,
    MAX_NESTING,
    TAG,
    Unstorable,
    class_path,
    codec_for,
    resolve_class,
    tag,
)

_NO_KEY: Final = object()


class Encoder:
    """Stores values in the tagged form. ``strict``: a value that cannot be rebuilt raises
    :class:`Unstorable`, else it becomes ``to_jsonable(value)`` (arguments are matched, never rebuilt).
    ``verify``: a class-made value is rebuilt once to see it comes back. ``tagged``: anything was tagged."""

    def __init__(self, *, strict: bool = True, verify: bool | None = None) -> None:
        self.strict = strict
        self.verify = strict if verify is None else verify
        self.tagged = False

    def store(self, value: object, root: str = "result") -> object:
        """``value`` in its stored form; :class:`Unstorable` names its place from ``root``."""
        try:
            return self.encode(value, 0)
        except Unstorable as exc:
            exc.root = root
            raise

    def encode(self, value: object, depth: int) -> object:
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            return value
        if kind is float:
            if math.isfinite(value):  # type: ignore[arg-type]
                return value
            return self._tag("float", value=repr(value))
        if depth >= MAX_NESTING:
            raise Unstorable(value, f"it nests more than {MAX_NESTING} levels deep (or contains itself)")
        if kind is list:
            return self._items(value, depth)  # type: ignore[arg-type]
        if kind is dict:
            mapping: dict[object, object] = value  # type: ignore[assignment]
            if TAG not in mapping and all(type(key) is str for key in mapping):
                return {key: self._field(item, depth, key=key) for key, item in mapping.items()}
            pairs = [
                [self._field(key, depth, key=key), self._field(item, depth, key=key)]
                for key, item in mapping.items()
            ]
            return self._tag("dict", items=pairs)
        try:
            return self._typed(value, kind, depth)
        except Unstorable:
            if self.strict:
                raise
            return to_jsonable(value)

    def _tag(self, kind: str, **fields: object) -> Document:
        self.tagged = True
        return tag(kind, **fields)

    def _items(self, items: Iterable[object], depth: int) -> list[object]:
        return [self._field(item, depth, key=n) for n, item in enumerate(items)]

    def _field(self, value: object, depth: int, *, key: object = _NO_KEY, name: str = "") -> object:
        """``value`` one level down, at ``[key]`` or ``name`` (an :class:`Unstorable` names the step)."""
        try:
            return self.encode(value, depth + 1)
        except Unstorable as exc:
            exc.steps.append(name if key is _NO_KEY else f"[{key!r}]")
            raise

    def class_of(self, cls: type, value: object) -> str:
        """The class's path, once it is certain replay finds the class by it (when strict)."""
        path = class_path(cls)
        if not self.strict:
            return path
        if "<locals>" in cls.__qualname__:
            raise Unstorable(
                value,
                "its class is defined inside a function, so replay cannot import it: define it at module "
                "level",
            )
        try:
            found = resolve_class(path)
        except LookupError as exc:
            raise Unstorable(value, f"its class cannot be found again by {path}: {exc}") from None
        if found is not cls:
            raise Unstorable(value, f"{path} names another class than the value's own")
        return path

    def _typed(self, value: object, kind: type, depth: int) -> object:
        codec = codec_for(kind)
        if codec is not None:
            try:
                stored = codec.encode(value)
            except Exception as exc:
                raise Unstorable(value, f"its codec's encode raised {type(exc).__name__}: {exc}") from None
            return self._tag(
                "codec", value=self._field(stored, depth, name=" (codec)"), **{"class": codec.path}
            )
        if isinstance(value, enum.Enum):
            return self._enum(value, depth)
        if kind is tuple or kind is set or kind is frozenset:
            items = self._items(value, depth)  # type: ignore[arg-type]
            if kind is not tuple:
                items.sort(key=dumps_compact)
            return self._tag(kind.__name__, items=items)
        if kind is bytes or kind is bytearray:
            return self._tag(kind.__name__, base64=base64.b64encode(value).decode("ascii"))  # type: ignore[arg-type]
        known = _standard(value)
        if known is not None:
            self.tagged = True
            return known
        if isinstance(value, PurePath) and kind.__module__ in ("pathlib", "pathlib._local"):
            return self._tag("path", value=str(value), **{"class": self.class_of(kind, value)})
        if isinstance(value, BaseModel):
            return self._model(value, kind)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value, kind, depth)
        if isinstance(value, BUILTIN_BASES):
            return self._instance(value, kind, depth)
        if inspect.isgenerator(value) or inspect.isasyncgen(value) or inspect.iscoroutine(value):
            raise Unstorable(value, "a generator is stored only as a @tool's own result (item by item)")
        raise Unstorable(value, "it is not a JSON value and none of the kinds this package stores holds it")

    def _enum(self, value: enum.Enum, depth: int) -> Document:
        kind = type(value)
        path = self.class_of(kind, value)
        member = self._field(value.value, depth, name=".value")
        if self.verify and _rebuilt(lambda: kind(value.value)) is not value:
            raise Unstorable(value, f"{kind.__name__}({value.value!r}) does not give this member back")
        return self._tag("enum", value=member, **{"class": path})

    def _model(self, value: BaseModel, kind: type) -> Document:
        path = self.class_of(kind, value)
        try:
            dumped = value.model_dump(mode="json", by_alias=True, round_trip=True)
        except Exception as exc:
            raise Unstorable(value, f"model_dump(mode='json') failed: {exc}") from None
        if self.verify and _rebuilt(lambda: value.model_validate_json(json.dumps(dumped))) != value:
            raise Unstorable(
                value,
                "model_validate of its model_dump(mode='json') does not give an equal model back (a "
                "field of a type JSON does not hold, a NaN, an alias that does not validate)",
            )
        return self._tag("pydantic", value=dumped, **{"class": path})

    def _dataclass(self, value: object, kind: type, depth: int) -> Document:
        path = self.class_of(kind, value)
        fields: Document = {}
        for field in dataclasses.fields(value):  # type: ignore[arg-type]
            try:
                item = getattr(value, field.name)
            except AttributeError:
                raise Unstorable(value, f"its field {field.name} is not set") from None
            fields[field.name] = self._field(item, depth, name=f".{field.name}")
        stored = self._tag("dataclass", fields=fields, **{"class": path})
        if self.verify:
            try:
                again = Encoder(verify=False).encode(decode(stored), 0)
            except Exception as exc:
                raise Unstorable(value, f"it cannot be rebuilt from its fields: {exc}") from None
            if not same_json(again, stored):
                raise Unstorable(value, "rebuilding it from its fields gives another value")
        return stored

    def _instance(self, value: object, kind: type, depth: int) -> Document:
        """A subclass of a built-in type (``OrderedDict``, a ``NamedTuple``), stored as its base value."""
        path = self.class_of(kind, value)
        base = _base_value(value)
        stored = self._tag("instance", value=self._field(base, depth, name=""), **{"class": path})
        if self.verify:
            back = _rebuilt(lambda: call_class(kind, base))
            if (
                type(back) is not kind
                or back != value
                or getattr(back, "__dict__", None) != getattr(value, "__dict__", None)
            ):
                raise Unstorable(
                    value, f"{kind.__name__}(its {type(base).__name__} value) does not give it back"
                )
        return stored


def _rebuilt(build: Callable[[], object]) -> object:
    """What ``build()`` gives back, or the exception it raised: either way what a verify compares."""
    try:
        return build()
    except Exception as exc:
        return exc


# The base's own conversion, which a subclass's ``__str__``/``__int__``/``__float__`` does not change.
_EXACT: Final[dict[type, Callable[[Any], object]]] = {
    str: str.__str__,
    int: int.__int__,
    float: float.__float__,
}


def _base_value(value: object) -> object:
    base = next(base for base in BUILTIN_BASES if isinstance(value, base))
    return _EXACT.get(base, base)(value)


def _standard(value: object) -> Document | None:
    """A datetime, date, time, timedelta, UUID or Decimal (a subclass as its base type), else None."""
    if isinstance(value, dt.datetime | dt.time):
        fields: Document = {"value": value.isoformat()}
        # A zone named by its key (zoneinfo is looked up, not imported: a value of it imported it).
        zoneinfo, tz = sys.modules.get("zoneinfo"), value.tzinfo
        if zoneinfo is not None and isinstance(tz, zoneinfo.ZoneInfo) and tz.key:
            fields["zone"] = str(tz.key)
        if value.fold:
            fields["fold"] = value.fold
        return tag("datetime" if isinstance(value, dt.datetime) else "time", **fields)
    if isinstance(value, dt.timedelta):
        return tag("timedelta", value=[value.days, value.seconds, value.microseconds])
    for kind, (base, text, _parse) in TEXT_KINDS.items():
        if isinstance(value, base):
            return tag(kind, value=text(value))
    return None


def exception_doc(exc: BaseException) -> Document | None:
    """``{"class": "builtins:KeyError", "args": [...stored form]}`` when ``type(exc)(*exc.args)`` gives
    ``exc`` back whole; None otherwise (replay then raises a ``RecordedToolError`` in its place)."""
    cls = type(exc)
    try:
        path = Encoder().class_of(cls, exc)
        args = Encoder().store(list(exc.args), "exception args")
        back = cls(*exc.args)
        own = {k: v for k, v in vars(exc).items() if k != "__notes__"}
        again = {k: v for k, v in vars(back).items() if k != "__notes__"}
        if type(back) is not cls or back.args != exc.args or str(back) != str(exc) or own != again:
            return None
    except Exception:
        return None
    return {"class": path, "args": args}
