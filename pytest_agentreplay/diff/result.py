"""The drift result: one record per difference, with the verdict and the rule that judged it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .rules import Rule, Verdict
from .text import ABSENT

DiffKind = Literal["changed", "inserted", "missing", "moved"]
KINDS: Final[tuple[DiffKind, ...]] = ("changed", "inserted", "missing", "moved")


@dataclass(frozen=True)
class Difference:
    """One difference between the recorded and the replayed history.

    ``kind``: ``changed`` (a field of a matched event), ``inserted`` (event only in the replay),
    ``missing`` (event only in the recording), ``moved`` (same step, different relative order).
    ``recorded``/``replayed`` are the values (``ABSENT`` where a key or event is on one side only);
    for inserted/missing/moved events they are the events' identities.
    """

    kind: DiffKind
    event_type: str
    label: str
    path: str
    recorded: Any
    replayed: Any
    verdict: Verdict
    rule: Rule
    seq_recorded: int | None = None
    seq_replayed: int | None = None
    path_tokens: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def is_regression(self) -> bool:
        return self.verdict == "regression"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "event_type": self.event_type,
            "label": self.label,
            "path": self.path,
            "seq_recorded": self.seq_recorded,
            "seq_replayed": self.seq_replayed,
            "verdict": self.verdict,
            "rule": {"source": self.rule.source, "selector": self.rule.selector},
        }
        # A side that does not have the value omits the key ("recorded_absent": true).
        for side, value in (("recorded", self.recorded), ("replayed", self.replayed)):
            if value is ABSENT:
                out[f"{side}_absent"] = True
            else:
                out[side] = value
        return out


@dataclass(frozen=True)
class DriftResult:
    """All reported differences (ignored ones are only counted), in history order."""

    mode: str
    differences: tuple[Difference, ...] = ()
    events_recorded: int = 0
    events_replayed: int = 0
    pairs_compared: int = 0
    pairs_equal: int = 0
    ignored: int = 0
    tolerated: int = 0
    compared: bool = True
    """False in audit mode: the histories were not compared."""

    @property
    def regressions(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "regression")

    @property
    def expected(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "expected")

    @property
    def has_regressions(self) -> bool:
        return any(d.verdict == "regression" for d in self.differences)

    @property
    def has_drift(self) -> bool:
        return bool(self.differences)

    def by_kind(self, kind: DiffKind) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.kind == kind)

    def counts(self) -> dict[str, int]:
        verdicts = Counter(d.verdict for d in self.differences)
        kinds = Counter(d.kind for d in self.differences)
        return {
            "regression": verdicts["regression"],
            "expected": verdicts["expected"],
            **{kind: kinds[kind] for kind in KINDS},
            "ignored": self.ignored,
            "tolerated": self.tolerated,
            "events_recorded": self.events_recorded,
            "events_replayed": self.events_replayed,
            "pairs_compared": self.pairs_compared,
            "pairs_equal": self.pairs_equal,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready structured form for reporters."""
        return {
            "mode": self.mode,
            "compared": self.compared,
            "has_regressions": self.has_regressions,
            "counts": self.counts(),
            "differences": [d.to_dict() for d in self.differences],
        }
