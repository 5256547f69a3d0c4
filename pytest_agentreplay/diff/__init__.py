"""Drift detection: align a recorded and a replayed history, judge differences with rules, render them.

Entry points: ``compare_histories(recorded, replayed, *, rules, resolve) -> DriftResult`` and
``render_drift(result, *, test, cassette, mode) -> str``; rules come from
``RuleSet.from_layers(mode, project=..., marker=..., hook=...)`` (format: ``diff.rules`` docstring).
Importing this package does not import deepdiff.
"""

from __future__ import annotations

from .align import Alignment, align_histories, coarse_identity, identity
from .compare import Resolver, compare_histories, event_fingerprint
from .labels import event_label
from .render import render_drift
from .result import Difference, DriftResult
from .rules import (
    ORDER,
    PRESENCE,
    VERDICTS,
    Judgement,
    Rule,
    RuleSet,
    Verdict,
    default_rules,
    parse_rule,
    parse_rules,
)
from .sequence import lcs_pairs
from .text import ABSENT

__all__ = [
    "ABSENT",
    "ORDER",
    "PRESENCE",
    "VERDICTS",
    "Alignment",
    "Difference",
    "DriftResult",
    "Judgement",
    "Resolver",
    "Rule",
    "RuleSet",
    "Verdict",
    "align_histories",
    "coarse_identity",
    "compare_histories",
    "default_rules",
    "event_fingerprint",
    "event_label",
    "identity",
    "lcs_pairs",
    "parse_rule",
    "parse_rules",
    "render_drift",
]
