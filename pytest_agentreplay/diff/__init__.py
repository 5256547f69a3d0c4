"""Drift detection: align a recorded and a replayed history, judge differences with rules, render them.

Entry points: ``compare_histories(recorded, replayed, *, rules, resolve) -> DriftResult`` and
``render_drift(result, *, test, cassette, mode) -> str``; rules come from
``RuleSet.from_layers(mode, project=..., marker=..., hook=...)`` (format: docs/rules.md).
Importing this package does not import deepdiff.
"""

from __future__ import annotations

from .compare import compare_histories
from .render import render_drift
from .result import Difference, DriftResult
from .rules import RuleSet

__all__ = ["Difference", "DriftResult", "RuleSet", "compare_histories", "render_drift"]
