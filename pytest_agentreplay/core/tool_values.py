"""How ``@tool`` values are stored so replay gives them back typed (docs/cassettes.md, "Typed tool
values"): plain JSON as it is, anything else as a tagged object (``{"$agentreplay": "tuple", ...}``).
Classes are rebuilt only from modules already imported: a cassette cannot make replay import code."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeVar

from .documents import Document

TAG: Final = "$agentreplay"
STREAM_KINDS: Final = frozenset({"generator", "async_generator"})
# Deeper than any real value; a structure that contains itself gets here too.
MAX_NESTING: Final = 100
# The built-in types whose subclasses are stored as their base value (the ``instance`` kind).
BUILTIN_BASES: Final = (int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset)

T = TypeVar("T")


class _Placed(Exception):
    """An error about a value inside a larger one: ``where`` (``result['lines'][0].sku``) is built as the
    error unwinds, so nothing is spent on it while values store fine."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.steps: list[str] = []
        self.root = "result"
        super().__init__(reason)

    @property
    def where(self) -> str:
        return self.root + "".join(reversed(self.steps))


class Unstorable(_Placed):
    """A value the codec cannot store so that replay rebuilds it: where it sits, its type, and why."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(reason)
        self.type_name = qualified_name(type(value))

    def __str__(self) -> str:
        return f"{self.where} is of type {self.type_name}: {self.reason}"


class NotRebuilt(_Placed):
    """A stored value replay cannot rebuild. ``damaged``: the stored form is malformed (a cassette problem),
    else the code changed (the class is gone, the model no longer validates it)."""

    def __init__(self, reason: str, *, damaged: bool) -> None:
        super().__init__(reason)
        self.damaged = damaged

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


def qualified_name(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
    return str(name) if module in (None, "builtins") else f"{module}.{name}"


def class_path(cls: type) -> str:
    """``module:qualname``, the name a class is stored and found again by."""
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve_class(path: object) -> type:
    """The class ``module:qualname`` names, under a package already imported; else ``LookupError``."""
    if not isinstance(path, str):
        raise LookupError(f"a class path must be a string, found {path!r}")
    module_name, sep, qualname = path.partition(":")
    if not sep or not module_name or not qualname or "<locals>" in qualname:
        raise LookupError(f"{path!r} is not a module:qualname class path")
    module = sys.modules.get(module_name)
    if module is None:
        if module_name.partition(".")[0] not in sys.modules:
            raise LookupError(f"module {module_name} is not imported")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise LookupError(f"module {module_name} cannot be imported: {exc}") from None
    found: object = module
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise LookupError(f"{module_name} has no {qualname}") from None
    if not isinstance(found, type):
        raise LookupError(f"{path} is not a class")
    return found


# -- a codec registry for types of one's own -------------------------------------------------------


class _Codec(NamedTuple):
    type: type
    path: str
    encode: Callable[[Any], object]
    decode: Callable[[Any], object]


_CODECS: dict[type, _Codec] = {}
_CODECS_BY_PATH: dict[str, _Codec] = {}
_PLAIN_TYPES: Final = frozenset({dict, list, str, int, float, bool, type(None)})


def register_tool_codec(type_: type[T], encode: Callable[[T], object], decode: Callable[[Any], T]) -> None:
    """Store ``@tool`` values of ``type_`` (and of its subclasses) as ``encode(value)``, rebuilt in replay as
    ``decode(stored)``.

    ``encode`` returns any value the codec stores (plain JSON, or the types it knows: a tuple, bytes,
    a datetime...); ``decode`` gets that value back. The cassette names the codec by the type's
    ``module:qualname``: register it in the replaying process too (in a ``conftest.py`` or beside the type),
    before the tool is served. Registering a type again replaces its codec.
    """
    if not isinstance(type_, type):
        raise TypeError(f"register_tool_codec needs a class, not {type_!r}")
    if type_ in _PLAIN_TYPES:
        raise ValueError(f"{type_.__name__} is plain JSON: it is stored as it is and needs no codec")
    if not callable(encode) or not callable(decode):
        raise TypeError("register_tool_codec needs an encode and a decode function")
    codec = _Codec(type_, class_path(type_), encode, decode)
    _CODECS[type_] = codec
    _CODECS_BY_PATH[codec.path] = codec


def codec_for(kind: type) -> _Codec | None:
    if not _CODECS:
        return None
    return next((_CODECS[base] for base in kind.__mro__ if base in _CODECS), None)


def codec_by_path(path: str) -> _Codec | None:
    return _CODECS_BY_PATH.get(path)


def tag(kind: str, **fields: object) -> Document:
    """A tagged object, keys sorted ("$" first) so that the stored key order is its own."""
    return {TAG: kind, **dict(sorted(fields.items()))}


# -- generators: a @tool result stored item by item ----------------------------------------------------


class Stream(NamedTuple):
    """A recorded generator result: items, whether it ended (not closed early), what it returned."""

    kind: str
    items: list[object]
    complete: bool
    returned: object = None


def stream_doc(stream: Stream) -> Document:
    fields: Document = {"items": stream.items, "complete": stream.complete}
    if stream.returned is not None:
        fields["return"] = stream.returned
    return tag(stream.kind, **fields)


def is_stream(value: object) -> bool:
    return type(value) is dict and value.get(TAG) in STREAM_KINDS
