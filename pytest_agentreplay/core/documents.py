"""The one name for a parsed JSON object as the package handles it: a cassette, an event, a body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

# A JSON object read from or written to disk. Values stay ``Any``: their shape is checked where it is
# read (the record models, the cassette validator), not by every function that passes a document on.
Document: TypeAlias = dict[str, Any]


def object_in(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one: a free-form field (an event's ``data``, a vcrpy
    cassette's) read as the object it should hold, whatever a hand-made file put there."""
    return value if isinstance(value, Mapping) else {}


def items_in(value: object) -> list[Any]:
    """``value``'s items when it is a list, none for null, else ``value`` as the one item (a free-form field
    that should hold a list)."""
    if isinstance(value, list):
        return value
    return [] if value is None else [value]
