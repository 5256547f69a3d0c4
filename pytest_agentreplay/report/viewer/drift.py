"""The drift view: recorded and replayed values side by side, one card per event pair, each differing field
marked with its verdict and the rule that decided it; and which recorded events carry a difference."""

from __future__ import annotations

import html

from ...diff.result import Difference, DriftResult
from ...diff.text import ABSENT
from .markup import css_token, esc, pretty


def drifted_seqs(drift: DriftResult | None) -> set[int]:
    """Recorded seq numbers that carry a reported difference."""
    seqs: set[int] = set()
    for diff in drift.differences if drift is not None else ():
        # A change every later model call resends is reported once: each call carrying it is marked.
        seqs.update(s for s in (diff.seq_recorded, *(rec for rec, _ in diff.carriers)) if s is not None)
    return seqs


def _value_block(value: object) -> str:
    return '<span class="absent">(absent)</span>' if value is ABSENT else pretty(value, 6000)


def render_drift_html(drift: DriftResult, *, anchor: str = "") -> str:
    head = (
        '<p class="drift-counts"><span class="badge regression">'
        f"{len(drift.regressions)} regression(s)"
        f'</span><span class="badge expected">{len(drift.expected)} expected</span>'
        f'<span class="badge">mode {esc(drift.mode)}</span>'
        f'<span class="badge">{drift.ignored} ignored</span></p>'
    )
    if not drift.differences:
        return head + "<p>No reported differences.</p>"
    groups: dict[tuple[int | None, int | None, str], list[Difference]] = {}
    for diff in drift.differences:
        key = (diff.seq_recorded, diff.seq_replayed, diff.label or diff.event_type)
        groups.setdefault(key, []).append(diff)
    cards = []
    for (seq_rec, seq_rep, label), diffs in groups.items():
        kinds = sorted({d.kind for d in diffs})
        rec_title = html.escape(f"recorded #{seq_rec}" if seq_rec is not None else "recorded (no such event)")
        rep_title = f"replayed #{seq_rep}" if seq_rep is not None else "replayed (no such event)"
        if seq_rec is not None:
            rec_title = f'<a href="#{html.escape(anchor)}ev-{seq_rec}">{rec_title}</a>'
        left: list[str] = []
        right: list[str] = []
        for diff in diffs:
            summary = diff.summary
            field_head = (
                (f'<div class="change-summary">{esc(summary)}</div>' if summary else "")
                + f'<div class="path mono">{esc(diff.path or "(event)")}</div>'
                f'<span class="badge {esc(diff.verdict)}">{esc(diff.verdict)}</span>'
                f'<span class="badge">{esc(diff.kind)}</span>'
                f'<span class="meta">rule {esc(f"{diff.rule.selector} ({diff.rule.source})")}</span>'
            )
            cls = f"drift-field {css_token(diff.verdict)}"
            for side, value, out in (("recorded", diff.recorded, left), ("replayed", diff.replayed, right)):
                out.append(f'<div class="{cls}" data-side="{side}">{field_head}{_value_block(value)}</div>')
        cards.append(
            f'<div class="drift-pair" data-kinds="{esc(" ".join(kinds))}"><h3 class="full">{esc(label)}</h3>'
            f'<div class="side recorded"><h4>{rec_title}</h4>{"".join(left)}</div>'
            f'<div class="side replayed"><h4>{html.escape(rep_title)}</h4>{"".join(right)}</div></div>'
        )
    return head + "".join(cards)
