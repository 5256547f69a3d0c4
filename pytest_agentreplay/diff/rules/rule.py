"""The rule value: a selector, a verdict and tolerances (what parsing produces and the engine matches)."""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

Verdict = Literal["ignore", "expected", "regression"]
VERDICTS: Final[tuple[Verdict, ...]] = ("ignore", "expected", "regression")


class Rule(NamedTuple):
    """One diff rule. ``source`` is the layer it came from; ``index`` its position in that layer. A named
    tuple: built at start-up by the hundred and hashed as a cache key per run, which a dataclass makes
    slow at both."""

    event: str = "*"
    path: str = "**"
    verdict: Verdict | None = None
    epsilon: float | None = None
    similarity: float | None = None
    order_insensitive: bool = False
    normalize: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    presence_only: bool = False
    unrecorded: Verdict | None = None
    # model-comparison only: (rubric, judge model) deciding a value; how much more a call may use.
    judge: tuple[str, str] | None = None
    max_increase: float | None = None
    source: str = "hook"
    index: int = 0  # type: ignore[assignment]  # the field, not tuple.index (a rule is never searched)

    @property
    def selector(self) -> str:
        return f"{self.event}:{self.path}"

    def describe(self) -> str:
        """``project rule "model.call:data.decision.text"``, with its tolerances."""
        extras = []
        if self.epsilon is not None:
            extras.append(f"epsilon={self.epsilon:g}")
        if self.similarity is not None:
            extras.append(f"similarity={self.similarity:g}")
        if self.order_insensitive:
            extras.append("order_insensitive")
        if self.normalize:
            extras.append(f"normalize={len(self.normalize)}")
        if self.presence_only:
            extras.append("presence_only")
        if self.unrecorded is not None:
            extras.append(f"unrecorded={self.unrecorded}")
        if self.judge is not None:
            extras.append(f"judge={self.judge[1]}")
        if self.max_increase is not None:
            extras.append(f"max_increase={self.max_increase:.0%}")
        tail = f" ({', '.join(extras)})" if extras else ""
        return f'{self.source} rule "{self.selector}"{tail}'

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source, "selector": self.selector}
        for name, value in zip(self._fields, self, strict=True):
            # What the rule says beside its selector and layer: the options it sets (an epsilon of 0 is one).
            if name in ("event", "path", "source", "index") or value is None or value is False:
                continue
            if value != ():
                out[name] = list(value) if isinstance(value, tuple) else value
        return out
