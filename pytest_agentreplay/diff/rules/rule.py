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
        extras = [
            f"epsilon={self.epsilon:g}" if self.epsilon is not None else "",
            f"similarity={self.similarity:g}" if self.similarity is not None else "",
            "order_insensitive" if self.order_insensitive else "",
            f"normalize={len(self.normalize)}" if self.normalize else "",
            "presence_only" if self.presence_only else "",
            f"unrecorded={self.unrecorded}" if self.unrecorded is not None else "",
            f"judge={self.judge[1]}" if self.judge is not None else "",
            f"max_increase={self.max_increase:.0%}" if self.max_increase is not None else "",
        ]
        tail = f" ({', '.join(e for e in extras if e)})" if any(extras) else ""
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
