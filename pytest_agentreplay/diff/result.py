"""The drift result: one record per difference, with the verdict and the rule that judged it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

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

    ``subject`` names a request change for a reader (``system prompt``, ``tool result (messages[3])``);
    ``carriers`` are the (recorded, replayed) seqs of every model call that resends this one change,
    when more than one does: the change is reported and counted once (see :mod:`.carried`).
    """

    kind: DiffKind
    event_type: str
    label: str
    path: str
    recorded: object
    replayed: object
    verdict: Verdict
    rule: Rule
    seq_recorded: int | None = None
    seq_replayed: int | None = None
    path_tokens: tuple[str, ...] = field(default=(), compare=False, repr=False)
    subject: str | None = field(default=None, compare=False)
    carriers: tuple[tuple[int | None, int | None], ...] = field(default=(), compare=False)

    @property
    def is_regression(self) -> bool:
        return self.verdict == "regression"

    @property
    def summary(self) -> str | None:
        """``system prompt changed; carried by 3 model calls (seq 1, 5, 14)``; None for a plain field."""
        return change_summary(self.subject, self.path, [rec for rec, _ in self.carriers])

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "event_type": self.event_type,
            "label": self.label,
            "path": self.path,
            "seq_recorded": self.seq_recorded,
            "seq_replayed": self.seq_replayed,
            "verdict": self.verdict,
            "rule": {"source": self.rule.source, "selector": self.rule.selector},
        }
        if self.subject is not None:
            out["subject"] = self.subject
        if self.carriers:
            out["carried_by"] = [{"seq_recorded": rec, "seq_replayed": rep} for rec, rep in self.carriers]
        # A side that does not have the value omits the key ("recorded_absent": true).
        for side, value in (("recorded", self.recorded), ("replayed", self.replayed)):
            if value is ABSENT:
                out[f"{side}_absent"] = True
            else:
                out[side] = value
        return out


def change_summary(subject: str | None, path: str, carriers: Sequence[int | None] = ()) -> str | None:
    """What one change is, in words: ``system prompt changed; carried by 3 model calls (seq 1, 5, 14)``.

    ``carriers``: the recorded seqs of the model calls resending it (empty or one: not resent). None when
    there is nothing to add to the field path itself."""
    if subject is None and len(carriers) < 2:
        return None
    what = f"{subject or path} changed"
    if len(carriers) < 2:
        return what
    seqs = ", ".join("-" if seq is None else str(seq) for seq in carriers)
    return f"{what}; carried by {len(carriers)} model calls (seq {seqs})"


def summary_of(diff: Mapping[str, object]) -> str | None:
    """:func:`change_summary` of a difference's dict form (``Difference.to_dict()``)."""
    subject = diff.get("subject")
    seqs = [c.get("seq_recorded") for c in _carried_by(diff)]
    carriers = [s if isinstance(s, int) else None for s in seqs]
    return change_summary(
        subject if isinstance(subject, str) else None, str(diff.get("path") or ""), carriers
    )


def carrier_seqs(diff: Mapping[str, object]) -> list[int]:
    """The recorded seqs a difference's dict form sits at: its own and its carriers'."""
    seqs = [diff.get("seq_recorded")]
    seqs.extend(c.get("seq_recorded") for c in _carried_by(diff))
    return [s for s in seqs if isinstance(s, int) and not isinstance(s, bool)]


def _carried_by(diff: Mapping[str, object]) -> list[Mapping[str, object]]:
    carried = diff.get("carried_by")
    return [c for c in carried if isinstance(c, Mapping)] if isinstance(carried, list | tuple) else []


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

    def to_dict(self) -> dict[str, object]:
        """JSON-ready structured form for reporters."""
        return {
            "mode": self.mode,
            "compared": self.compared,
            "has_regressions": self.has_regressions,
            "counts": self.counts(),
            "differences": [d.to_dict() for d in self.differences],
        }
