"""Diff rules: which differences between a recorded and a replayed history are ignored, expected or
regressions, from their text to their answers (the format users write: docs/rules.md): ``rule`` (the
value), ``syntax`` (paths, selectors and rule dicts parsed), ``defaults`` (each mode's built-in rules, and
imported recordings') and ``engine`` (``RuleSet``: one mode's layers compiled into a matcher whose ``judge``
answers each event type and path). The names below are the folder's public surface.
"""

from __future__ import annotations

from .defaults import default_rules, is_imported
from .engine import Judgement, RuleSet, compiled
from .rule import Rule, Verdict
from .syntax import ORDER, PRESENCE, Path, RuleSpec, generalize_path, join_path, parse_rules, split_path

__all__ = [
    "ORDER",
    "PRESENCE",
    "Judgement",
    "Path",
    "Rule",
    "RuleSet",
    "RuleSpec",
    "Verdict",
    "compiled",
    "default_rules",
    "generalize_path",
    "is_imported",
    "join_path",
    "parse_rules",
    "split_path",
]
