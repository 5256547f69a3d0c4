"""Text helpers: word-level similarity for tolerances, and focused diffs of long values for the report."""

from __future__ import annotations

import difflib
import json
import re
from typing import Final

from ..core.canonical import display_text

_WORD_RE: Final = re.compile(r"\w+|[^\w\s]")
MAX_FIELD_LINES: Final = 20
SHORT_LIMIT: Final = 80
WINDOW_BEFORE: Final = 30
WINDOW_AFTER: Final = 50


class _Absent:
    """Marks a key or list item on one side only (one instance: copies and pickles reduce to it)."""

    def __repr__(self) -> str:
        return "<absent>"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


def similarity(a: str, b: str) -> float:
    """difflib ratio of the two texts over word tokens (1.0 = same words in the same order)."""
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, _WORD_RE.findall(a), _WORD_RE.findall(b), autojunk=False).ratio()


def similar(a: str, b: str, threshold: float) -> bool:
    """``similarity(a, b) >= threshold``, using difflib's cheap upper bounds first."""
    if a == b or threshold <= 0.0:
        return True
    wa, wb = _WORD_RE.findall(a), _WORD_RE.findall(b)
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return False
    return matcher.ratio() >= threshold


# C0 and C1 control characters, DEL included, and the short escapes JSON and TOML share.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SHORT: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def visible(text: str) -> str:
    """``text`` with its control characters escaped (``\\u001b``, ``\\n``): a step's name or a key, from a
    cassette or from the agent, reaches the terminal, where an escape sequence would act (clear the screen,
    recolour the log) instead of being read, and a line break would break the line. The escapes are JSON's
    and TOML's: a suggested rule stays a string pyproject.toml reads."""
    return _CONTROL.sub(lambda found: _SHORT.get(found.group(), f"\\u{ord(found.group()):04x}"), text)


def format_value(value: object) -> str:
    """One-line JSON-ish form of a value; ``<absent>`` for a missing key."""
    if value is ABSENT:
        return "<absent>"
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def is_long(value: object) -> bool:
    if value is ABSENT:
        return False
    if isinstance(value, str):
        return "\n" in value or len(value) > SHORT_LIMIT
    return len(format_value(value)) > SHORT_LIMIT


def _cap(lines: list[str], limit: int = MAX_FIELD_LINES) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"... ({len(lines) - limit} more lines)"]


def _shorten(text: str, limit: int = 2 * SHORT_LIMIT) -> str:
    one = format_value(text)
    if len(one) <= limit:
        return one
    return f"{one[:limit]}... ({len(text)} chars)"


def focused_diff(recorded: object, replayed: object) -> list[str]:
    """Lines showing what changed between two long values: a unified diff of the changed lines for
    multi-line text and structures, a window around the first difference for one long line; at most
    ``MAX_FIELD_LINES`` lines, never the whole value."""
    if recorded is ABSENT or replayed is ABSENT:
        present = replayed if recorded is ABSENT else recorded
        sign = "+" if recorded is ABSENT else "-"
        body = display_text(present, indent=2).splitlines() or [""]
        return _cap([f"{sign} {line}" for line in body])
    a, b = display_text(recorded, indent=2), display_text(replayed, indent=2)
    if isinstance(recorded, str) != isinstance(replayed, str):
        return _cap([f"- {_shorten(a)}", f"+ {_shorten(b)}"])
    if "\n" in a or "\n" in b:
        lines = [
            line.rstrip("\n")
            for line in difflib.unified_diff(a.splitlines(), b.splitlines(), n=2, lineterm="")
            if not line.startswith(("---", "+++"))
        ]
        return _cap([line if len(line) <= 160 else f"{line[:160]}..." for line in lines])
    return _window(a, b)


def _window(a: str, b: str) -> list[str]:
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    start = max(0, prefix - WINDOW_BEFORE)

    def cut(text: str) -> str:
        end = min(
            len(text),
            max(prefix, len(text) - suffix) + WINDOW_AFTER // 2,
            start + WINDOW_BEFORE + 2 * WINDOW_AFTER,
        )
        head = "..." if start > 0 else ""
        tail = "..." if end < len(text) else ""
        return f"{head}{text[start:end]}{tail}"

    return [
        f"first difference at character {prefix} (lengths {len(a)} -> {len(b)}):",
        f"- {cut(a)}",
        f"+ {cut(b)}",
    ]
