"""A small strict record model: typed fields, validation with located errors, JSON dumps and a JSON Schema.

What the event history needs from a model library and nothing more, on the standard library alone: a
replay process that imported pydantic for its seven record classes paid ~90 ms before the first test,
more than the rest of the plugin's start-up. Semantics follow pydantic's strict mode with unknown fields
forbidden (what the cassette format was specified with): no coercion (``"1"`` is not an int, ``True`` is
not an int), every problem reported with its location, nested records accepted as instances or mappings.

Declaring a record::

    class ToolInfo(Record):
        name: str
        idempotency_key: str | None = None
        seq: int = field(ge=0)
        event_class: EventClass = field(json_name="class")

Annotations are resolved once, when the class is created, into two checks: a fast one (one generated
function per record, which only says valid or not) for the usual case, and a located one, run when the fast
one refuses, to say what is wrong where.
"""

from __future__ import annotations

import inspect
import marshal
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, dataclass_transform

from ..exceptions import RecordValidationError

RecordT = TypeVar("RecordT", bound="Record")
Problem = dict[str, Any]
# A compiled check: (value, location, problems) -> the value to keep (a mapping becomes its record).
Check = Callable[[Any, tuple[int | str, ...], list[Problem]], Any]

_REQUIRED: Any = object()


@dataclass(frozen=True)
class FieldInfo:
    """One declared field: its default (or factory), its JSON name, its constraints and description."""

    name: str
    annotation: Any = None
    default: Any = _REQUIRED
    default_factory: Callable[[], Any] | None = None
    json_name: str | None = None
    ge: int | None = None
    pattern: str | None = None
    description: str | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED and self.default_factory is None

    @property
    def key(self) -> str:
        return self.json_name or self.name

    def make_default(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default


def field(
    *,
    default: Any = _REQUIRED,
    default_factory: Callable[[], Any] | None = None,
    json_name: str | None = None,
    ge: int | None = None,
    pattern: str | None = None,
    description: str | None = None,
) -> Any:
    """Declare a field's default and constraints (typed ``Any`` so it fits any annotation)."""
    return FieldInfo("", None, default, default_factory, json_name, ge, pattern, description)


def _problem(kind: str, loc: tuple[int | str, ...], msg: str, value: Any) -> Problem:
    return {"type": kind, "loc": loc, "msg": msg, "input": value}


def _allowed(allowed: frozenset[tuple[type, Any]] | set[tuple[type, Any]], value: Any) -> bool:
    """``value`` is one of a ``Literal``'s values, type for type (``True`` is not ``1``)."""
    try:
        if (type(value), value) in allowed:
            return True
    except TypeError:  # unhashable: a list or a dict is no literal
        return False
    # A subclass of the literal's type (a StrEnum member), never a bool for an int.
    return any(
        isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool) and value == literal
        for kind, literal in allowed
    )


def _literal_text(values: tuple[Any, ...]) -> str:
    shown = [repr(v) if isinstance(v, str) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _scalar(kind: type, code: str, name: str) -> Check:
    def check(value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
        # ``type() is`` first: the usual case, and it keeps bool out of int as strict mode does.
        if type(value) is kind or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
            return value
        problems.append(_problem(code, loc, f"Input should be a valid {name}", value))
        return value

    return check


_STR = _scalar(str, "string_type", "string")
_INT = _scalar(int, "int_type", "integer")
_BOOL = _scalar(bool, "bool_type", "boolean")


def _constrained(inner: Check, info: FieldInfo) -> Check:
    if info.ge is None and info.pattern is None:
        return inner
    ge, matcher, pattern = info.ge, re.compile(info.pattern).fullmatch if info.pattern else None, info.pattern

    def check(value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
        before = len(problems)
        value = inner(value, loc, problems)
        if len(problems) > before or value is None:
            return value
        if ge is not None and isinstance(value, int) and value < ge:
            problems.append(
                _problem("greater_than_equal", loc, f"Input should be greater than or equal to {ge}", value)
            )
        if matcher is not None and isinstance(value, str) and matcher(value) is None:
            problems.append(
                _problem("string_pattern_mismatch", loc, f"String should match pattern '{pattern}'", value)
            )
        return value

    return check


def _compile(annotation: Any, owner: type[Record]) -> Check:
    """The check for one annotation: scalars, ``X | None``, ``Literal``, ``dict[str, X]``, ``list[X]``,
    ``Annotated[X, field(...)]``, records, ``Any``."""
    if annotation is Any:
        return lambda value, loc, problems: value
    if annotation is str:
        return _STR
    if annotation is int:
        return _INT
    if annotation is bool:
        return _BOOL
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return annotation._record_check
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        info = next((a for a in args[1:] if isinstance(a, FieldInfo)), None)
        inner = _compile(args[0], owner)
        return _constrained(inner, info) if info is not None else inner
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) != 1 or len(args) != 2:
            raise TypeError(f"{owner.__name__}: only `X | None` unions are supported, not {annotation}")
        inner = _compile(options[0], owner)
        return lambda value, loc, problems: None if value is None else inner(value, loc, problems)
    if origin is Literal:
        allowed = {(type(a), a) for a in args}
        text = _literal_text(args)

        def literal(value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
            if not _allowed(allowed, value):
                problems.append(_problem("literal_error", loc, f"Input should be {text}", value))
            return value

        return literal
    if origin is dict:
        key_type, value_type = args
        if key_type is not str:
            raise TypeError(f"{owner.__name__}: dict keys must be str, not {key_type}")
        values = None if value_type is Any else _compile(value_type, owner)

        def mapping(value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
            if type(value) is not dict and not isinstance(value, dict):
                problems.append(_problem("dict_type", loc, "Input should be a valid dictionary", value))
                return value
            for key, item in value.items():
                if type(key) is not str:
                    problems.append(
                        _problem("string_type", (*loc, key), "Input should be a valid string", key)
                    )
                elif values is not None:
                    values(item, (*loc, key), problems)
            return value

        return mapping
    if origin is list:
        (item_type,) = args
        items = _compile(item_type, owner)
        is_record = isinstance(item_type, type) and issubclass(item_type, Record)

        def sequence(value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
            if type(value) is not list and not isinstance(value, list):
                problems.append(_problem("list_type", loc, "Input should be a valid list", value))
                return value
            checked = [items(item, (*loc, index), problems) for index, item in enumerate(value)]
            return checked if is_record else value

        return sequence
    raise TypeError(f"{owner.__name__}: unsupported field annotation {annotation!r}")


# -- the fast path ----------------------------------------------------------------------------------
# Valid input, the usual case, is checked without building locations: a check returns the value to keep
# or raises ``_Invalid``, and only then does the located pass above run to say what is wrong.

Fast = Callable[[Any], Any]


class _Invalid(Exception):
    pass


def _fast_str(value: Any) -> Any:
    if type(value) is str or isinstance(value, str):
        return value
    raise _Invalid


def _fast_int(value: Any) -> Any:
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _Invalid


def _fast_bool(value: Any) -> Any:
    if type(value) is bool:
        return value
    raise _Invalid


def _fast_constrained(inner: Fast | None, info: FieldInfo | None) -> Fast | None:
    if info is None or (info.ge is None and info.pattern is None):
        return inner
    ge, matcher = info.ge, re.compile(info.pattern).fullmatch if info.pattern else None

    def check(value: Any) -> Any:
        value = inner(value) if inner is not None else value
        if value is None:
            return value
        if ge is not None and value < ge:
            raise _Invalid
        if matcher is not None and matcher(value) is None:
            raise _Invalid
        return value

    return check


def _compile_fast(annotation: Any, owner: type[Record]) -> Fast | None:
    """The fast check of an annotation (see :func:`_compile`); None: anything goes."""
    if annotation is Any:
        return None
    simple = {str: _fast_str, int: _fast_int, bool: _fast_bool}
    if annotation in simple:
        return simple[annotation]
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return annotation._record_fast
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        info = next((a for a in args[1:] if isinstance(a, FieldInfo)), None)
        return _fast_constrained(_compile_fast(args[0], owner), info)
    if origin in (typing.Union, types.UnionType):
        (option,) = [a for a in args if a is not type(None)]
        inner = _compile_fast(option, owner)
        if inner is None:
            return None
        return lambda value: None if value is None else inner(value)
    if origin is Literal:
        allowed = frozenset((type(a), a) for a in args)

        def literal(value: Any) -> Any:
            if _allowed(allowed, value):
                return value
            raise _Invalid

        return literal
    if origin is dict:
        values = _compile_fast(args[1], owner)

        def mapping(value: Any) -> Any:
            if not isinstance(value, dict) or not all(map(str.__instancecheck__, value)):
                raise _Invalid
            if values is not None:
                for item in value.values():
                    values(item)
            return value

        return mapping
    if origin is list:
        items = _compile_fast(args[0], owner)
        converts = isinstance(args[0], type) and issubclass(args[0], Record)

        def sequence(value: Any) -> Any:
            if not isinstance(value, list):
                raise _Invalid
            if items is None:
                return value
            checked = [items(item) for item in value]
            return checked if converts else value

        return sequence
    raise TypeError(f"{owner.__name__}: unsupported field annotation {annotation!r}")


_INLINE = {
    str: "type(v) is not str and not isinstance(v, str)",
    int: "type(v) is not int and (not isinstance(v, int) or isinstance(v, bool))",
    bool: "type(v) is not bool",
}


def _fast_values_function(cls: type[Record]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """``cls``'s fast check of a mapping of values, as one generated function: loading a cassette checks
    every event, and straight-line code per field costs a third of a loop calling a check per field."""
    namespace: dict[str, Any] = {
        "_Invalid": _Invalid,
        "_MISSING": _REQUIRED,
        "ALLOWED": cls._record_allowed,
        "new": object.__new__,
    }
    lines = ["def fast(values):", "    if not values.keys() <= ALLOWED:", "        raise _Invalid"]
    lines.append("    get = values.get")
    names = []
    for index, (name, info) in enumerate(cls.model_fields.items()):
        var = f"f{index}"
        names.append((name, var))
        lines.append(f"    v = get({info.key!r}, _MISSING)")
        if info.key != name:
            lines.append("    if v is _MISSING:")
            lines.append(f"        v = get({name!r}, _MISSING)")
            lines.append(f"    elif {name!r} in values:")
            lines.append("        raise _Invalid")
        lines.append("    if v is _MISSING:")
        if info.required:
            lines.append("        raise _Invalid")
        elif info.default_factory is not None:
            namespace[f"factory{index}"] = info.default_factory
            lines.append(f"        v = factory{index}()")
        else:
            namespace[f"default{index}"] = info.default
            lines.append(f"        v = default{index}")
        lines.append("    else:")
        annotation, optional = info.annotation, False
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            optional = True
            (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        indent = "        "
        if optional:
            lines.append("        if v is not None:")
            indent = "            "
        literals = typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()
        if annotation is Any:
            lines.append(indent + "pass")
        elif annotation in _INLINE and info.ge is None and info.pattern is None:
            lines.append(f"{indent}if {_INLINE[annotation]}:")
            lines.append(f"{indent}    raise _Invalid")
        elif literals and all(type(a) is str for a in literals):
            namespace[f"strings{index}"] = frozenset(literals)
            namespace[f"check{index}"] = _compile_fast(annotation, cls)
            lines.append(f"{indent}if type(v) is not str or v not in strings{index}:")
            lines.append(f"{indent}    v = check{index}(v)  # a StrEnum member, or the refusal")
        else:
            namespace[f"check{index}"] = _fast_constrained(_compile_fast(annotation, cls), info)
            if namespace[f"check{index}"] is None:
                lines.append(indent + "pass")
            elif (
                isinstance(annotation, type)
                and issubclass(annotation, Record)
                and namespace[f"check{index}"] == annotation._record_fast
            ):
                # A nested record given as a dict (as a loaded cassette has it, thousands of times): built
                # here, the call to its classmethod saved; anything else takes the classmethod.
                namespace[f"record{index}"] = annotation
                lines.append(f"{indent}if type(v) is dict:")
                lines.append(f"{indent}    built = new(record{index})")
                lines.append(f"{indent}    built.__dict__ = record{index}._record_fast_function(v)")
                lines.append(f"{indent}    v = built")
                lines.append(f"{indent}else:")
                lines.append(f"{indent}    v = check{index}(v)")
            else:
                lines.append(f"{indent}v = check{index}(v)")
        lines.append(f"    {var} = v")
    lines.append("    return {" + ", ".join(f"{name!r}: {var}" for name, var in names) + "}")
    exec(compile("\n".join(lines), f"<record {cls.__name__}>", "exec"), namespace)
    function: Callable[[Mapping[str, Any]], dict[str, Any]] = namespace["fast"]
    return function


@dataclass_transform(kw_only_default=True, field_specifiers=(field,))
class Record:
    """Base of the strict records. Keyword construction validates; see the module docstring."""

    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    # JSON name and field name -> field: inputs may use either (``class`` or ``event_class``).
    _record_keys: ClassVar[dict[str, FieldInfo]] = {}
    _record_checks: ClassVar[dict[str, Check]] = {}
    _record_allowed: ClassVar[frozenset[str]] = frozenset()
    _record_aliases: ClassVar[dict[str, str]] = {}  # field name -> JSON name, where they differ
    _record_fast_function: ClassVar[Callable[[Mapping[str, Any]], dict[str, Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The class's own annotations only (records do not inherit fields), resolved in its module.
        own = {k: v for k, v in inspect.get_annotations(cls).items() if not k.startswith("_")}
        holder = type("_Annotations", (), {"__annotations__": own, "__module__": cls.__module__})
        hints = typing.get_type_hints(holder, vars(sys.modules[cls.__module__]), include_extras=True)
        fields: dict[str, FieldInfo] = {}
        for name, annotation in hints.items():
            if typing.get_origin(annotation) is ClassVar:
                continue
            declared = cls.__dict__.get(name, _REQUIRED)
            if isinstance(declared, FieldInfo):
                info = FieldInfo(
                    name,
                    annotation,
                    declared.default,
                    declared.default_factory,
                    declared.json_name,
                    declared.ge,
                    declared.pattern,
                    declared.description,
                )
            else:
                info = FieldInfo(name, annotation, declared)
            if name in cls.__dict__:
                delattr(cls, name)  # the instance's value, not a class attribute, answers ``obj.name``
            fields[name] = info
        cls.model_fields = fields
        cls._record_keys = {**{f.name: f for f in fields.values()}, **{f.key: f for f in fields.values()}}
        cls._record_checks = {
            name: _constrained(_compile(f.annotation, cls), f) for name, f in fields.items()
        }
        cls._record_allowed = frozenset(cls._record_keys)
        cls._record_aliases = {name: f.key for name, f in fields.items() if f.key != name}
        cls._record_fast_function = staticmethod(_fast_values_function(cls))

    def __init__(self, **values: Any) -> None:
        try:
            self.__dict__ = type(self)._record_fast_function(values)
            return
        except _Invalid:
            pass
        problems: list[Problem] = []
        self.__dict__ = self._record_values(values, (), problems)
        if problems:
            raise RecordValidationError(type(self).__name__, problems)

    @classmethod
    def _record_fast(cls, value: Any) -> Any:
        # A dict first: what a loaded cassette holds, thousands of times.
        if type(value) is not dict and (isinstance(value, cls) or not isinstance(value, Mapping)):
            if isinstance(value, cls):
                return value
            raise _Invalid
        record = object.__new__(cls)
        record.__dict__ = cls._record_fast_function(value)
        return record

    # -- validation ---------------------------------------------------------------------------------

    @classmethod
    def _record_values(
        cls, values: Mapping[str, Any], loc: tuple[int | str, ...], problems: list[Problem]
    ) -> dict[str, Any]:
        checks = cls._record_checks
        out: dict[str, Any] = {}
        found = 0
        # In declaration order, so a dump lists the fields as the class does.
        for name, info in cls.model_fields.items():
            key = info.key if info.key in values else name
            if key in values:
                found += 1
                out[name] = checks[name](values[key], (*loc, key), problems)
            elif info.required:
                problems.append(_problem("missing", (*loc, info.key), "Field required", dict(values)))
            else:
                out[name] = info.make_default()
            if key != name and info.key in values and name in values:
                found += 1  # the field under both names: the JSON name counts, the other is one too many
                problems.append(
                    _problem("extra_forbidden", (*loc, name), "Extra inputs are not permitted", values[name])
                )
        if found != len(values):
            for key, value in values.items():
                if key not in cls._record_keys:
                    problems.append(
                        _problem("extra_forbidden", (*loc, key), "Extra inputs are not permitted", value)
                    )
        return out

    @classmethod
    def _record_check(cls, value: Any, loc: tuple[int | str, ...], problems: list[Problem]) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            problems.append(
                _problem(
                    "model_type",
                    loc,
                    f"Input should be a valid dictionary or instance of {cls.__name__}",
                    value,
                )
            )
            return value
        record = object.__new__(cls)
        record.__dict__ = cls._record_values(value, loc, problems)
        return record

    @classmethod
    def model_validate(cls: type[RecordT], value: Any) -> RecordT:
        """A record from a mapping (or the record itself), checked strictly; :class:`RecordValidationError`
        lists every problem with its location."""
        try:
            fast: RecordT = cls._record_fast(value)
            return fast
        except _Invalid:
            pass
        problems: list[Problem] = []
        record = cls._record_check(value, (), problems)
        if problems:
            raise RecordValidationError(cls.__name__, problems)
        result: RecordT = record
        return result

    @classmethod
    def construct_trusted(cls: type[RecordT], values: dict[str, Any]) -> RecordT:
        """A record from values this package built itself: no checks, no defaults; ``values`` names every
        field. On the replay hot path (one event per call) checking again what was just built is waste."""
        record = object.__new__(cls)
        record.__dict__ = values
        return record

    # -- reading ------------------------------------------------------------------------------------

    def model_dump(
        self, *, mode: str = "python", by_alias: bool = False, exclude_none: bool = False, exclude: Any = None
    ) -> dict[str, Any]:
        """The fields as plain data (records nested as dicts), containers copied: the result can be changed
        without changing the record. ``by_alias`` uses the JSON names (``class``); ``mode`` is accepted for
        compatibility (the values are JSON values already)."""
        del mode
        out: dict[str, Any] = {}
        aliases = self._record_aliases if by_alias else None
        for name, value in self.__dict__.items():
            if exclude is not None and name in exclude:
                continue
            if value is None:
                if exclude_none:
                    continue
            else:
                kind = type(value)
                if kind is dict or kind is list:
                    if value:
                        if kind is list and isinstance(value[0], Record):
                            value = [
                                v.model_dump(by_alias=by_alias, exclude_none=exclude_none) for v in value
                            ]
                        else:
                            value = copy_json(value)
                    else:
                        value = kind()
                elif isinstance(value, Record):
                    value = value.model_dump(by_alias=by_alias, exclude_none=exclude_none)
                elif isinstance(value, dict | list):
                    value = copy_json(value)
            out[aliases.get(name, name) if aliases else name] = value
        return out

    def model_copy(self: RecordT, *, update: Mapping[str, Any] | None = None) -> RecordT:
        """A shallow copy with ``update`` applied (not checked, as pydantic's ``model_copy``)."""
        record = object.__new__(type(self))
        record.__dict__ = {**self.__dict__, **(update or {})}
        return record

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dicts it holds

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({shown})"


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON-like data at C speed (marshal), falling back to a walk for anything else."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        if isinstance(value, dict):
            return {k: copy_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [copy_json(v) for v in value]
        return value


# -- JSON Schema ------------------------------------------------------------------------------------


def json_schema(root: type[Record]) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of ``root``: each record a ``$defs`` entry, JSON names as properties."""
    defs: dict[str, Any] = {}
    top = _record_schema(root, defs)
    return {**top, "$defs": defs} if defs else top


def _record_schema(cls: type[Record], defs: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for info in cls.model_fields.values():
        prop = _type_schema(info.annotation, defs)
        prop.update(_constraint_schema(info))
        if info.description:
            prop["description"] = info.description
        if info.required:
            required.append(info.key)
        elif info.default_factory is None and info.default is not None:
            prop["default"] = info.default
        properties[info.key] = prop
    schema: dict[str, Any] = {"title": cls.__name__, "type": "object", "properties": properties}
    schema["additionalProperties"] = False
    if required:
        schema["required"] = required
    if cls.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    return schema


def _constraint_schema(info: FieldInfo) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if info.ge is not None:
        out["minimum"] = info.ge
    if info.pattern is not None:
        out["pattern"] = info.pattern
    return out


def _type_schema(annotation: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if annotation is Any:
        return {}
    simple = {str: "string", int: "integer", bool: "boolean"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, Record):
        name = annotation.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a record may refer to itself
            defs[name] = _record_schema(annotation, defs)
        return {"$ref": f"#/$defs/{name}"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = _type_schema(args[0], defs)
        for extra in args[1:]:
            if isinstance(extra, FieldInfo):
                inner.update(_constraint_schema(extra))
        return inner
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(a, defs) if a is not type(None) else {"type": "null"} for a in args]}
    if origin is Literal:
        return {"enum": list(args)} if len(args) > 1 else {"const": args[0]}
    if origin is dict:
        values = _type_schema(args[1], defs)
        return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0], defs)}
    raise TypeError(f"no JSON Schema for {annotation!r}")
