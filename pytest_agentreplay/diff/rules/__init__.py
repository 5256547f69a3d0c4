"""Diff rules (docs/rules.md): which differences are ignored, expected or regressions. ``rule`` (the value),
``syntax`` (paths, selectors and rule dicts parsed), ``defaults`` (each mode's built-in rules) and
``engine`` (``RuleSet``: a mode's layers compiled into a matcher whose ``judge`` answers each path)."""

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
