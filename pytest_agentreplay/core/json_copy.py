"""Deep copies of parsed JSON values, for the boundaries where code outside the package may change one."""

from __future__ import annotations

import marshal
from typing import TypeVar, cast

J = TypeVar("J")


def copy_json(value: J) -> J:
    """A deep copy of a JSON value at C speed (marshal); a walk for anything else (non-JSON objects kept)."""
    try:
        # Any JSON value is marshallable; a value that is not raises ValueError and takes the walk.
        return cast(J, marshal.loads(marshal.dumps(value)))  # type: ignore[arg-type]
    except ValueError:
        return cast(J, _copy(value))


def _copy(value: object) -> object:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
