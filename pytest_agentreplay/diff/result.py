"""The drift result: one record per difference, with the verdict and the rule that judged it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from .rules import Rule, Verdict, split_path
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
        """``system prompt changed; carried by 3 model calls (seq 1, 5, 14)``: what the change is, in words;
        None for a plain field resent by no other call (its path says it all)."""
        if self.subject is None and len(self.carriers) < 2:
            return None
        what = f"{self.subject or self.path} changed"
        if len(self.carriers) < 2:
            return what
        seqs = ", ".join("-" if rec is None else str(rec) for rec, _ in self.carriers)
        return f"{what}; carried by {len(self.carriers)} model calls (seq {seqs})"

    def to_dict(self, *, wire: bool = False) -> dict[str, object]:
        """The JSON report's form (``report/schema.json``); ``wire``: with the whole rule and the path's
        tokens, which :meth:`from_dict` reads back into an equal difference (an xdist worker's status)."""
        out: dict[str, object] = {
            "kind": self.kind,
            "event_type": self.event_type,
            "label": self.label,
            "path": self.path,
            "seq_recorded": self.seq_recorded,
            "seq_replayed": self.seq_replayed,
            "verdict": self.verdict,
            "rule": {**self.rule.to_dict(), "index": self.rule.index}
            if wire
            else {"source": self.rule.source, "selector": self.rule.selector},
        }
        if wire:
            out["path_tokens"] = list(self.path_tokens)
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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Difference:
        """A difference from :meth:`to_dict`. The report's form names only the rule's source and selector
        and no path tokens: it reads back with a rule of that selector, the tokens parsed from the path."""
        _check_types(data)
        rule = data["rule"]
        event, _, path = rule["selector"].partition(":")
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in rule.items()}
        del fields["selector"]
        tokens = data.get("path_tokens")
        return cls(
            kind=data["kind"],
            event_type=data["event_type"],
            label=data.get("label", ""),
            path=data["path"],
            recorded=data.get("recorded", ABSENT),
            replayed=data.get("replayed", ABSENT),
            verdict=data["verdict"],
            rule=Rule(event=event, path=path, **fields),
            seq_recorded=data.get("seq_recorded"),
            seq_replayed=data.get("seq_replayed"),
            path_tokens=split_path(data["path"]) if tokens is None else tuple(tokens),
            subject=data.get("subject"),
            carriers=tuple((c["seq_recorded"], c["seq_replayed"]) for c in data.get("carried_by", ())),
        )


# The fields of a difference's dict form read as they are, by the type they must have (a seq is no bool).
_TEXTS: Final = ("kind", "event_type", "label", "path", "verdict")
_SEQS: Final = ("seq_recorded", "seq_replayed")


def _check_types(data: Mapping[str, Any]) -> None:
    """``TypeError`` for a field of another type than :class:`Difference` gives it (a hand-made drift file):
    the report and the viewer group differences by them, and a list there cannot be a key."""
    for name in _TEXTS:
        if not isinstance(data.get(name, ""), str):
            raise TypeError(f"difference {name} is not text: {data[name]!r:.60}")
    for name in _SEQS:
        seq = data.get(name)
        if seq is not None and type(seq) is not int:
            raise TypeError(f"difference {name} is not a seq: {seq!r:.60}")


class DriftResult(NamedTuple):  # not a frozen dataclass: far cheaper to create
    """All reported differences (ignored ones are only counted), in history order."""

    mode: str
    differences: tuple[Difference, ...] = ()
    events_recorded: int = 0
    events_replayed: int = 0
    pairs_compared: int = 0
    pairs_equal: int = 0
    ignored: int = 0
    tolerated: int = 0
    # False in audit mode: the histories were not compared.
    compared: bool = True

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

    def counts(self) -> dict[str, int]:
        verdicts = Counter(d.verdict for d in self.differences)
        kinds = Counter(d.kind for d in self.differences)
        counted = (
            "ignored",
            "tolerated",
            "events_recorded",
            "events_replayed",
            "pairs_compared",
            "pairs_equal",
        )
        return {
            "regression": verdicts["regression"],
            "expected": verdicts["expected"],
            **{kind: kinds[kind] for kind in KINDS},
            **{name: getattr(self, name) for name in counted},
        }

    def to_dict(self, *, wire: bool = False) -> dict[str, object]:
        """JSON-ready: the JSON report's form (``report/schema.json``, ``agentreplay diff --json``), or with
        ``wire`` the form :meth:`from_dict` reads back into an equal result (see ``Difference.to_dict``)."""
        return {
            "mode": self.mode,
            "compared": self.compared,
            "has_regressions": self.has_regressions,
            "counts": self.counts(),
            "differences": [d.to_dict(wire=wire) for d in self.differences],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DriftResult:
        """A result from :meth:`to_dict` (either form). Raises ``KeyError``, ``TypeError`` or
        ``AttributeError`` on a document that is not one."""
        # The counts that are fields of a result (events_recorded, ignored...): the others are computed.
        names = set(cls._fields)
        counted = {name: n for name, n in data.get("counts", {}).items() if name in names}
        return cls(
            mode=data["mode"],
            differences=tuple(Difference.from_dict(d) for d in data["differences"]),
            compared=data.get("compared", True),
            **counted,
        )
