"""The runtime values a setting may name (``runtime_values``): the vocabulary and its parser.

Here in core, not in :mod:`pytest_agentreplay.runtime`, because the settings (:mod:`.settings_check`) check it
and core sits below the runtime patches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from ..exceptions import ConfigError

SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES
_OFF_WORDS: Final = ("none", "off", "false", "0")


def parse_sources(value: object, where: str) -> tuple[str, ...] | None:
    """The sources a setting names (``"clock uuid random"``, a list, ``true``: all), ``()`` when it turns
    them off (``false``/``""``/``[]``/``"none"``/``"off"``), ``None`` when not given; else ``ConfigError``."""
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
                raise _config_error(repr(value), where)
            parts.extend(p for p in item.replace(",", " ").split() if p)
    else:
        raise _config_error(repr(value), where)
    if len(parts) == 1 and parts[0].lower() in _OFF_WORDS:
        return ()
    unknown = [p for p in parts if p not in SOURCES]
    if unknown:
        raise _config_error(", ".join(map(repr, unknown)), where)
    return tuple(s for s in SOURCES if s in parts)


def _config_error(got: str, where: str) -> ConfigError:
    return ConfigError(
        f"invalid runtime_values {got} in {where}",
        evidence=[f"valid values: {', '.join(SOURCES)} (any of them, space-separated; empty turns it off)"],
        fixes=['use e.g. runtime_values = "clock uuid random", "clock", or "" to turn it off'],
    )
