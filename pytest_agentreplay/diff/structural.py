"""The descent into one differing pair of values: DeepDiff's tree view finds what differs (DESIGN §4), the
engine (``compare._Walker``) judges each change. Loaded only when a pair really has to be walked: a replay
whose pairs are equal, or differ only where the rules ignore, never imports deepdiff."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from deepdiff import DeepDiff
from deepdiff.helper import notpresent
from deepdiff.model import DiffLevel
from deepdiff.operator import BaseOperator

from ..core.canonical import same_json
from .rules import Path
from .text import ABSENT

Change = tuple[object, object, Path]
"""One differing value: the recorded side (``ABSENT`` when missing), the replayed side, where."""

# DeepDiff judging JSON values as the engine does (the oracle, tests/test_diff_oracle.py, holds them to it).
OPTIONS: Final[dict[str, Any]] = {
    "view": "tree",
    # Descend into every pair of objects: none is reported replaced whole for sharing few keys.
    "threshold_to_diff_deeper": 0,
    # A key such as "__x" is a key like any other (DeepDiff skips them by default).
    "ignore_private_variables": False,
    # ``1`` and ``1.0`` are one JSON number; ``true`` is none (exact types: bool subclasses int).
    "ignore_type_in_groups": [(int, float)],
    "ignore_type_subclasses": True,
}


class Descent(Protocol):
    """What the engine decides while DeepDiff walks."""

    def list_changes(self, a: list[object], b: list[object], tokens: Path) -> list[Change]:
        """The changes of two lists, whose items the engine pairs, in the report's order."""

    def note(self, tokens: Path, a: Mapping[str, object], b: Mapping[str, object]) -> None:
        """Sees each pair of objects a change sits in (what names a conversation item or part)."""


def deep_changes(a: object, b: object, tokens: Path, descent: Descent) -> list[Change]:
    """The changes below two differing containers at ``tokens``, in the report's order: object keys sorted
    as text (below ``tokens`` DeepDiff walks objects only), a list's in the order the engine gives."""
    handover = _Handover(tokens, descent)
    tree = DeepDiff(a, b, custom_operators=[handover], **OPTIONS)
    # Lists are paired once DeepDiff has returned: a list in a list is walked a stack of frames lower.
    found = [(where, descent.list_changes(x, y, where)) for where, x, y in handover.lists]
    for levels in tree.values():
        for level in levels:
            where = _located(level, tokens, descent)
            found.append((where, [(_value(level.t1), _value(level.t2), where)]))
    found.sort(key=lambda entry: entry[0])
    return [change for _, changes in found for change in changes]


class _Handover(BaseOperator):
    """Stops DeepDiff at equal containers (compared at C speed, not walked) and at lists, kept with their
    place for the engine to pair their items (``Descent.list_changes``)."""

    def __init__(self, tokens: Path, descent: Descent) -> None:
        super().__init__()
        self.tokens = tokens
        self.descent = descent
        self.lists: list[tuple[Path, list[object], list[object]]] = []

    def match(self, level: DiffLevel) -> bool:
        return isinstance(level.t1, _CONTAINERS) and isinstance(level.t2, _CONTAINERS)

    def give_up_diffing(self, level: DiffLevel, diff_instance: DeepDiff) -> bool:
        a, b = level.t1, level.t2
        if same_json(a, b):
            return True
        if not (isinstance(a, list) and isinstance(b, list)):
            return False
        self.lists.append((_located(level, self.tokens, self.descent), a, b))
        return True


# Exact types first (dict, list): an ABC's check is slow, and this is asked at every level.
_CONTAINERS: Final = (dict, list)


def _located(level: DiffLevel, tokens: Path, descent: Descent) -> Path:
    """The engine tokens of ``level`` below ``tokens`` (``('data', 'a')``: DeepDiff's path is object keys
    only, as the lists are the engine's); each pair of objects on the way down is noted."""
    parents = []
    node = level.up
    while node is not None:
        parents.append(node)
        node = node.up
    where = tokens
    for parent, step in zip(reversed(parents), level.path(output_format="list"), strict=True):
        if isinstance(parent.t1, Mapping) and isinstance(parent.t2, Mapping):
            descent.note(where, parent.t1, parent.t2)
        where = (*where, str(step))
    return where


def _value(value: object) -> object:
    return ABSENT if value is notpresent else value
