"""The runtime values a setting may name (``runtime_values``): the vocabulary and its parser. In core, not
in :mod:`pytest_agentreplay.runtime`: the settings check it, and core sits below the runtime patches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES
_OFF_WORDS: Final = ("none", "off", "false", "0")


class UnknownSources(ValueError):
    """A value that is not a list of runtime values: ``words``, the unknown ones (empty: not a string or a
    list of strings). The settings check words it with the place it was given."""

    def __init__(self, words: list[str]) -> None:
        super().__init__(", ".join(words))
        self.words = words


def parse_sources(value: object) -> tuple[str, ...] | None:
    """The sources a setting names (``"clock uuid random"``, a list, ``true``: all), ``()`` when it turns
    them off (``false``/``""``/``[]``/``"none"``/``"off"``), ``None`` when not given; else
    :class:`UnknownSources`."""
    if value is None:
        return None
    if value is True:
        return DEFAULT_SOURCES
    if value is False:
        return ()
    if isinstance(value, str):
        parts = [p for p in value.replace(",", " ").split() if p]
    elif isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        parts = []
        for item in value:
            if not isinstance(item, str):
                raise UnknownSources([])
            parts.extend(p for p in item.replace(",", " ").split() if p)
    else:
        raise UnknownSources([])
    if len(parts) == 1 and parts[0].lower() in _OFF_WORDS:
        return ()
    unknown = [p for p in parts if p not in SOURCES]
    if unknown:
        raise UnknownSources(unknown)
    return tuple(s for s in SOURCES if s in parts)
