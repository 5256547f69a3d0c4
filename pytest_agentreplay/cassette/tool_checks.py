"""The event fields replay reads, checked when a cassette is loaded (replay and ``agentreplay verify``): an
edit that keeps the digests sealed (a re-sealed cassette) is refused with the event's seq and the field, as
a ``CassetteSchemaError``, before replay trips over it.

The cassette model leaves ``data`` free-form per event type. Replay's matching and the diff's alignment use
some of its fields as keys, which a JSON object or list cannot be. The tool events' fields are read by the
tool index (``replay/tools.py``) and the diff as: ``tool.call``: ``data.arguments`` an object (matched by name
and arguments), ``data.attempt`` an integer; ``tool.result``: ``data.error`` a string, ``data.exception`` the
recorded exception's ``{"class": "module:qualname", "args": [...]}``. Both name their tool (``tool.name``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from ..core.documents import Document
from .validation import short

_TOOL_EVENTS: Final = ("tool.call", "tool.result")

Field = tuple[str, str, Callable[[object], bool]]  # name under ``data``, what it must be, its check


def _key(name: str) -> Field:
    return name, "a string, number or null", lambda value: not isinstance(value, dict | list)


def _is_exception(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and isinstance(value.get("class"), str)
        and isinstance(value.get("args"), list)
    )


_ATTEMPT: Final[Field] = ("attempt", "an integer", lambda value: value is None or type(value) is int)
_EVERY_EVENT: Final = (_key("group"),)
# By event type; each check sees the value of a field present in ``data``.
_DATA_FIELDS: Final[dict[str, tuple[Field, ...]]] = {
    "model.call": (_key("provider"), _key("endpoint")),
    "policy.decision": (_key("policy"),),
    "approval": (_key("subject"),),
    "http": (_key("method"),),
    "tool.call": (
        _ATTEMPT,
        ("arguments", "an object (the arguments by name)", lambda v: isinstance(v, dict)),
    ),
    "tool.result": (
        _ATTEMPT,
        ("error", "a string", lambda value: isinstance(value, str | None)),
        ("exception", '{"class": "module:qualname", "args": [...]}', _is_exception),
    ),
}


def event_field_problem(events: Sequence[object]) -> tuple[int, str] | None:
    """The first event (its index: its seq in a cassette whose seqs are dense, as the load checks) with a
    field that is not what replay reads, and the problem."""
    for index, event in enumerate(events):
        if type(event) is dict and (problem := _problem(event)) is not None:
            return index, problem
    return None


def _problem(event: Document) -> str | None:
    kind, data = event.get("type"), event.get("data")
    if kind in _TOOL_EVENTS:
        tool = event.get("tool")
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tool must be an object naming the tool (tool.name), found {short(tool)}"
    if type(data) is not dict:  # the schema check, run first, refuses it
        return None
    for name, what, check in (*_EVERY_EVENT, *(_DATA_FIELDS.get(kind, ()) if isinstance(kind, str) else ())):
        if name in data and not check(data[name]):
            return f"data.{name} must be {what}, found {short(data[name])}"
    return None
