"""The suite's model comparison, one row per test, in every ``--agentreplay-report`` format (rows as
``report/schema.json`` describes), and what replay did not spend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from ..core.documents import Document
from ..core.prices import PRICES_DATE

_COLUMNS: Final = (
    "test", "recorded model", "live model", "runs", "agreement", "interval", "paths", "answers",
    "tokens rec/live", "cost rec/live", "latency rec/live", "verdict",
)  # fmt: skip


def table_rows(comparisons: Iterable[Mapping[str, object]]) -> list[Document]:
    """One JSON-able row per test, from the comparisons the tests reported (``replay.comparison``)."""
    rows = []
    for c in comparisons:
        tokens: Document = dict(c.get("tokens") or {})  # type: ignore[call-overload]
        answers: Document = dict(c.get("answers") or {})  # type: ignore[call-overload]
        rows.append(
            {
                "test": c.get("test") or "",
                "recorded_model": c.get("recorded_model"),
                "live_model": c.get("live_model"),
                "runs": c.get("runs", 1),
                "agreement": c.get("agreement", 1.0 if c.get("agree") else 0.0),
                "interval": c.get("interval", [0.0, 1.0]),
                "paths": c.get("paths") or [],
                "answers": {
                    "equivalent": answers.get("agreeing", 0),
                    "rate": answers.get("rate", 0.0),
                    "interval": answers.get("interval", [0.0, 1.0]),
                },
                "judged": len(c.get("judged") or []),  # type: ignore[arg-type]
                "tokens": {side: _total(tokens.get(side)) for side in ("recorded", "live")},
                "cost": c.get("cost") or {"recorded": None, "live": None},
                "latency_ms": c.get("latency_ms") or {"recorded": 0.0, "live": 0.0},
                "verdict": c.get("verdict", "pass" if c.get("agree") else "fail"),
                "min_agreement": c.get("min_agreement", 0.9),
            }
        )
    return rows


def _total(side: object) -> float:
    if not isinstance(side, Mapping):
        return 0
    total = float(side.get("input") or 0) + float(side.get("output") or 0)
    return int(total) if total.is_integer() else round(total, 1)


def _cost(value: object) -> str:
    return f"${value:.4f}" if isinstance(value, int | float) else "?"


def _cells(row: Document) -> list[tuple[str, object]]:
    """(shown text, sort key) per column."""
    low, high = row["interval"]
    paths = "; ".join(
        f"{p['runs']}x {p['path']}" + (" (recorded)" if p["recorded"] else "") for p in row["paths"]
    )
    answers = row["answers"]
    cost, latency, tokens = row["cost"], row["latency_ms"], row["tokens"]
    return [
        (row["test"], row["test"]),
        (str(row["recorded_model"]), str(row["recorded_model"])),
        (str(row["live_model"]), str(row["live_model"])),
        (str(row["runs"]), row["runs"]),
        (f"{row['agreement']:.0%}", row["agreement"]),
        (f"{low:.2f}-{high:.2f}", low),
        (paths, len(row["paths"])),
        (f"{answers['equivalent']}/{row['runs']}", answers["rate"]),
        (f"{tokens['recorded']}/{tokens['live']}", tokens["live"]),
        (f"{_cost(cost.get('recorded'))}/{_cost(cost.get('live'))}", cost.get("live") or 0),
        (f"{latency['recorded']:.0f}/{latency['live']:.0f} ms", latency["live"]),
        (str(row["verdict"]), str(row["verdict"])),
    ]


def markdown_table(rows: Sequence[Document]) -> list[str]:
    if not rows:
        return []
    lines = [
        f"### Model comparison (prices of {PRICES_DATE})",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "---|" * len(_COLUMNS),
    ]
    for row in rows:
        lines.append("| " + " | ".join(text.replace("|", "\\|") for text, _ in _cells(row)) + " |")
    lines.append("")
    return lines


def html_table(rows: Sequence[Document]) -> str:
    if not rows:
        return ""
    # loaded already by the HTML report, its one caller
    from .viewer import asset, esc

    head = "".join(f'<th title="sort by {esc(name)}">{esc(name)}</th>' for name in _COLUMNS)
    body = "".join(
        f'<tr data-verdict="{esc(row["verdict"])}">'
        + "".join(f'<td data-sort="{esc(str(key))}">{esc(text)}</td>' for text, key in _cells(row))
        + "</tr>"
        for row in rows
    )
    return (
        f"<h2>Model comparison</h2><p>prices of {esc(PRICES_DATE)}, US dollars</p>"
        f"<table class=comparison><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        # Sorts the table by the clicked column: numbers by their data-sort value, text by its text.
        f"<script>\n{asset('sort_table.js')}</script>"
    )


class NotSpent(NamedTuple):
    """What every replaying test served instead of spending, added up (``report/schema.json``)."""

    tests: int
    model_calls: int
    tokens: int
    cost: float
    unpriced_models: list[str]
    prices_date: str = PRICES_DATE

    @classmethod
    def total(cls, items: Iterable[Mapping[str, object]]) -> NotSpent:
        """The sum of what each test reported (``replay.modes.not_spent``, as it came from a worker)."""
        rows: list[Any] = list(items)
        return cls(
            len(rows),
            sum(int(i.get("calls") or 0) for i in rows),
            sum(int(i.get("tokens") or 0) for i in rows),
            round(sum((float(i.get("cost") or 0) for i in rows), 0.0), 6),
            sorted({str(m) for i in rows for m in i.get("unpriced") or []}),
        )

    def line(self) -> str | None:
        """The session summary's line (None: replay served no model call, as in model-comparison, which
        sends them, or audit, which runs nothing)."""
        if not self.model_calls:
            return None
        line = (
            f"not spent: {self.model_calls} model call(s) served from cassettes, {self.tokens} tokens, "
            f"${self.cost:.4f} at the price table of {PRICES_DATE}"
        )
        if self.unpriced_models:
            line += f" (no price for {', '.join(self.unpriced_models)}: [tool.agentreplay.prices] adds one)"
        return line


class Comparison(NamedTuple):
    """The reports' model comparison across tests (``table_rows``) and what replay did not spend."""

    tests: list[Document]
    not_spent: NotSpent | None = None

    def to_dict(self) -> Document:
        return {
            "tests": self.tests,
            "not_spent": None if self.not_spent is None else self.not_spent._asdict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        not_spent = data["not_spent"]
        return cls(data["tests"], None if not_spent is None else NotSpent(**not_spent))

    def not_spent_text(self) -> str | None:
        """What replay did not spend, as the Markdown and HTML reports say it (None: no model call)."""
        total = self.not_spent
        if total is None or not total.model_calls:
            return None
        return (
            f"{total.model_calls} model call(s), {total.tokens} tokens, ${total.cost:.4f} "
            f"(prices of {total.prices_date})"
        )
