"""Diff rules: which differences between a recorded and a replayed history are ignored, expected or
regressions.

This folder owns the rules from their text to their answers:

- ``spec``: the rule format, specified (selectors, path globs, verdicts, tolerances, layers, defaults);
- ``rule``: the ``Rule`` value and its ``Verdict``;
- ``syntax``: the field-path grammar, and selectors and rule dicts parsed and validated into rules;
- ``defaults``: the built-in rules of each replay mode (layer ``default``) and of imported recordings;
- ``engine``: ``RuleSet``, the layered rules of one mode compiled into a matcher whose ``judge`` answers
  each (event type, path) with a ``Judgement``.

The names below are the folder's public surface; import them from here.
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
