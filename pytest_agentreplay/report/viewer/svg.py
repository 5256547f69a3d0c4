"""The sequence picture of a run: one lane per actor, one row per event, as inline SVG. Each row links to
its timeline entry (``data-target``; the page script scrolls to it)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from ...core.constants import ACTORS
from ...core.events import Event
from .markup import esc

LANE_WIDTH = 120
ROW_HEIGHT = 24
# The ``data`` field a row of the picture names its event by.
_HINTS = {"model.call": "model", "policy.decision": "verdict", "approval": "status"}
ACTOR_COLORS = {
    "model": "#8250df",
    "runtime": "#0969da",
    "tool": "#1a7f37",
    "human": "#bf8700",
    "policy": "#cf222e",
}


def _arrow(event: Event) -> tuple[str, str]:
    """(from lane, to lane) of the event's arrow in the sequence picture."""
    actor = event.actor
    if event.type == "tool.call":
        return "runtime", "tool"
    if event.type == "approval" and actor == "runtime":
        return "runtime", "human"
    if actor == "runtime":
        return "runtime", "runtime"
    inbound = event.type in ("tool.result", "retrieval", "http", "approval", "policy.decision", "error")
    return (actor, "runtime") if inbound else ("runtime", actor)


def render_sequence_svg(events: Sequence[Event], *, anchor: str = "") -> str:
    lanes = list(ACTORS)
    x_of = {lane: 60 + i * LANE_WIDTH for i, lane in enumerate(lanes)}
    top = 34
    height = top + ROW_HEIGHT * max(len(events), 1) + 16
    width = 60 + LANE_WIDTH * (len(lanes) - 1) + 260
    out = [
        f'<svg class="sequence" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="sequence of the run">'
        '<defs><marker id="arrowhead" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#57606a"/></marker></defs>'
    ]
    for lane in lanes:
        x = x_of[lane]
        out.append(
            f'<g class="lane" data-lane="{lane}"><text x="{x}" y="18" text-anchor="middle" '
            f'font-weight="bold" fill="{ACTOR_COLORS[lane]}">{lane}</text>'
            f'<line x1="{x}" y1="26" x2="{x}" y2="{height - 6}" stroke="#d0d7de" stroke-dasharray="4 3"/></g>'
        )
    label_x = x_of[lanes[-1]] + 24
    for row, event in enumerate(events):
        y = top + ROW_HEIGHT * row + ROW_HEIGHT // 2
        src, dst = _arrow(event)
        color = ACTOR_COLORS.get(event.actor, "#57606a")
        target = f"{anchor}ev-{event.seq}"
        out.append(
            f'<g class="seq-row" data-seq="{event.seq}" data-target="{html.escape(target)}" '
            'style="cursor:pointer">'
        )
        out.append(f"<title>{esc(f'{event.seq} {event.type} ({event.actor})')}</title>")
        if src != dst:
            x1, x2 = x_of[src], x_of[dst]
            shrink = -6 if x2 > x1 else 6
            out.append(
                f'<line x1="{x1}" y1="{y}" x2="{x2 + shrink}" y2="{y}" stroke="{color}" stroke-width="1.5" '
                'marker-end="url(#arrowhead)"/>'
            )
        out.append(f'<circle cx="{x_of[event.actor]}" cy="{y}" r="5" fill="{color}"/>')
        out.append(
            f'<text x="{label_x}" y="{y + 4}" fill="#1f2328">{event.seq:>3} {esc(event.type)}'
            f"{esc(' ' + _sequence_hint(event))}</text></g>"
        )
    out.append("</svg>")
    return "".join(out)


def _sequence_hint(event: Event) -> str:
    if event.type in ("tool.call", "tool.result", "effect") and event.tool is not None:
        return event.tool.name
    key = _HINTS.get(event.type)
    return str(event.data.get(key) or "") if key else ""
