"""Drift detection: align a recorded and a replayed history (``compare_histories``), judge differences with
rules (``RuleSet.from_layers``; format: docs/rules.md), render them (``render_drift``). Importing this
package does not import deepdiff."""

from __future__ import annotations

from .compare import compare_histories
from .render import render_drift
from .result import Difference, DriftResult
from .rules import RuleSet

__all__ = ["Difference", "DriftResult", "RuleSet", "compare_histories", "render_drift"]
