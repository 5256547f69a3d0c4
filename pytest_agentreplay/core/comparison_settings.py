"""The model comparison's settings of one test: ``repeat``, ``min_agreement`` and ``live_reads``, from the
command line > marker > ``agentreplay_config`` fixture > ini > ``[tool.agentreplay]`` (``config.py``'s
precedence), each value checked where it is read and named with its place when wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from . import settings_check as check

# More runs than this is a benchmark, not a test: a typo (1000 for 10) would call the model a thousand times.
MAX_REPEAT = 200


def repeat(value: object, origin: check.Origin) -> int:
    """A whole number of runs, 1 to :data:`MAX_REPEAT` (ini values are strings)."""
    number = value.strip() if isinstance(value, str) else value
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= MAX_REPEAT:
        return number
    raise check.invalid(origin, value, f"a whole number of runs from 1 to {MAX_REPEAT}")


def share(value: object, origin: check.Origin) -> float:
    """A rate from 0 to 1 (``0.9``; ``"90%"`` too)."""
    number: object = value
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            number = None
    if isinstance(number, int | float) and not isinstance(number, bool) and 0 <= number <= 1:
        return float(number)
    raise check.invalid(origin, value, 'a rate from 0 to 1, e.g. 0.9 (or "90%")')


class ComparisonSettings(NamedTuple):
    """One test's comparison settings, resolved."""

    repeat: int = 1
    min_agreement: float = 0.9
    live_reads: bool = False


def resolve(
    session: ComparisonSettings, extra: Mapping[str, object], *, nodeid: str, cli_repeat: bool
) -> ComparisonSettings:
    """The session's values with the test's (``extra``) on top; a command-line ``repeat`` wins over it."""
    place = f"@pytest.mark.agentreplay on {nodeid} (or its agentreplay_config fixture)"
    changes: dict[str, object] = {}
    for key, checked in (("repeat", repeat), ("min_agreement", share), ("live_reads", check.boolean)):
        if extra.get(key) is not None:
            value = checked(extra[key], check.Origin(key, place))
            if key != "repeat" or not cli_repeat:
                changes[key] = value
    return session._replace(**changes)  # type: ignore[arg-type]
