"""A project's redaction options (``[tool.agentreplay]`` ``redact_headers``, ``redact_keys``,
``redact_patterns``): read, checked, and compiled once per distinct options, since every test's run makes a
redactor of its own from the same table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..exceptions import ConfigError
from .rules import REGEX_META, NameRules, compile_option, normalize_name

_OPTIONS: Final = ("redact_headers", "redact_keys", "redact_patterns")
_SEQUENCES: Final = (list, tuple)


# The three options (headers, keys, patterns), each a list of strings. Plain tuples, not NamedTuples: a
# NamedTuple class is compiled from source when the module is imported, on every start-up.
RedactionOptions = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
# What a redactor's rules are: the name rules, and the patterns of secret values a project adds.
Compiled = tuple[NameRules, tuple[re.Pattern[str], ...]]


def read_options(config: Mapping[str, object]) -> RedactionOptions:
    """The options of a ``[tool.agentreplay]`` table (a string is a list of one)."""
    lists: list[tuple[str, ...]] = []
    for option in _OPTIONS:
        raw = config.get(option, ())
        if isinstance(raw, str):
            raw = (raw,)
        if not isinstance(raw, _SEQUENCES) or not all(isinstance(item, str) for item in raw):
            raise ConfigError(
                f"[tool.agentreplay] {option} must be a list of strings",
                evidence=[f"got: {raw!r}"],
                place=f"[tool.agentreplay] {option}",
                fixes=[f'write it as {option} = ["..."]'],
            )
        lists.append(tuple(raw))
    headers, keys, patterns = lists
    return headers, keys, patterns


def compile_rules(
    names: Iterable[str],
    name_patterns: Iterable[str | re.Pattern[str]],
    value_patterns: Iterable[str | re.Pattern[str]],
) -> Compiled:
    """The rules of secret ``names`` (headers and keys), of names matching ``name_patterns`` (regexes
    matched case-insensitively) and of values matching ``value_patterns``."""
    return (
        NameRules(
            frozenset(normalize_name(n) for n in names),
            tuple(re.compile(p, re.IGNORECASE) if isinstance(p, str) else p for p in name_patterns),
        ),
        tuple(re.compile(p) if isinstance(p, str) else p for p in value_patterns),
    )


@functools.lru_cache(maxsize=64)
def compiled(options: RedactionOptions) -> Compiled:
    """The rules of ``options``, compiled once: a ``redact_keys`` entry with regex metacharacters is a
    case-insensitive full-match regex; an invalid regex is a ``ConfigError`` naming it (not cached: asked
    again, it is raised again)."""
    headers, keys, patterns = options
    return compile_rules(
        (*headers, *[k for k in keys if not (REGEX_META & set(k))]),
        [compile_option(k, "redact_keys", re.I) for k in keys if REGEX_META & set(k)],
        [compile_option(p, "redact_patterns", 0) for p in patterns],
    )
