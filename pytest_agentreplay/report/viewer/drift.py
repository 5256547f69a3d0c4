"""The drift view: recorded and replayed values side by side, one card per event pair, each differing field
marked with its verdict and the rule that decided it; and which recorded events carry a difference."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ...core.documents import Document
from ...diff.result import carrier_seqs, summary_of
from .markup import css_token, esc, pretty


def drifted_seqs(drift: Document | None) -> set[int]:
    """Recorded seq numbers that carry a reported difference."""
    seqs: set[int] = set()
    for diff in (drift or {}).get("differences", []) or []:
        # A change every later model call resends is reported once: each call carrying it is marked.
        seqs.update(carrier_seqs(diff))
    return seqs


def _value_block(diff: Mapping[str, object], side: str) -> str:
    if diff.get(f"{side}_absent") or side not in diff:
        return '<span class="absent">(absent)</span>'
    return pretty(diff.get(side), 6000)


def render_drift_html(drift: Document, *, anchor: str = "") -> str:
    """Recorded and replayed side by side, one card per event pair, each differing field marked."""
    differences = list(drift.get("differences") or [])
    counts = drift.get("counts") or {}
    head = (
        '<p class="drift-counts"><span class="badge regression">'
        f"{int(counts.get('regression', 0))} regression(s)"
        f'</span><span class="badge expected">{int(counts.get("expected", 0))} expected</span>'
        f'<span class="badge">mode {esc(drift.get("mode", "?"))}</span>'
        f'<span class="badge">{int(counts.get("ignored", 0))} ignored</span></p>'
    )
    if not differences:
        return head + "<p>No reported differences.</p>"
    groups: dict[tuple[Any, Any, str], list[Mapping[str, object]]] = {}
    for diff in differences:
        key = (
            diff.get("seq_recorded"),
            diff.get("seq_replayed"),
            str(diff.get("label") or diff.get("event_type")),
        )
        groups.setdefault(key, []).append(diff)
    cards = []
    for (seq_rec, seq_rep, label), diffs in groups.items():
        kinds = sorted({str(d.get("kind")) for d in diffs})
        rec_title = f"recorded #{seq_rec}" if seq_rec is not None else "recorded (no such event)"
        rep_title = f"replayed #{seq_rep}" if seq_rep is not None else "replayed (no such event)"
        if isinstance(seq_rec, int):
            rec_title = f'<a href="#{html.escape(anchor)}ev-{seq_rec}">{html.escape(rec_title)}</a>'
        else:
            rec_title = html.escape(rec_title)
        left, right = [], []
        for diff in diffs:
            verdict = str(diff.get("verdict"))
            rule = diff.get("rule") or {}
            rule_text = (
                f"{rule.get('selector', '?')} ({rule.get('source', '?')})"
                if isinstance(rule, Mapping)
                else str(rule)
            )
            summary = summary_of(diff)
            field_head = (
                (f'<div class="change-summary">{esc(summary)}</div>' if summary else "")
                + f'<div class="path mono">{esc(diff.get("path") or "(event)")}</div>'
                f'<span class="badge {esc(verdict)}">{esc(verdict)}</span>'
                f'<span class="badge">{esc(diff.get("kind"))}</span>'
                f'<span class="meta">rule {esc(rule_text)}</span>'
            )
            cls = f"drift-field {css_token(verdict)}"
            left.append(
                f'<div class="{cls}" data-side="recorded">{field_head}{_value_block(diff, "recorded")}</div>'
            )
            right.append(
                f'<div class="{cls}" data-side="replayed">{field_head}{_value_block(diff, "replayed")}</div>'
            )
        cards.append(
            f'<div class="drift-pair" data-kinds="{esc(" ".join(kinds))}"><h3 class="full">{esc(label)}</h3>'
            f'<div class="side recorded"><h4>{rec_title}</h4>{"".join(left)}</div>'
            f'<div class="side replayed"><h4>{html.escape(rep_title)}</h4>{"".join(right)}</div></div>'
        )
    return head + "".join(cards)
