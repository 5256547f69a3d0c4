"""The page: one run's section and the self-contained HTML document around any body, with its assets
inlined (the Content-Security-Policy allows nothing external)."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ...cassette.atomic import atomic_write_bytes
from ...core.events import Event, RunMeta
from ...diff.result import DriftResult
from ...replay.audit import audit_advice
from .drift import drifted_seqs, render_drift_html
from .entries import render_timeline_html
from .markup import PayloadResolver, esc, kv
from .svg import render_sequence_svg

if TYPE_CHECKING:
    from ...cassette.read import LoadedCassette

_PACKAGE = __name__.rpartition(".")[0]
# The run header's fields the page shows, each labelled by its name with spaces: in its head line, and
# in the list below it.
_META_FIELDS = ("agent", "test", "provider", "model", "code_version", "corpus_version")
_EXTRA_FIELDS = ("decoding", "tool_schema_versions", "policy_versions", "labels")


@cache
def _asset(name: str) -> str:
    """A file of this folder (package data), read once per process; inlined verbatim into each page."""
    return files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")


def render_run_section(
    run: RunMeta,
    events: Sequence[Event],
    *,
    resolve: PayloadResolver | None = None,
    problems: Sequence[str] = (),
    drift: DriftResult | None = None,
    anchor: str = "",
    heading_level: int = 2,
) -> str:
    """The viewer body for one run; ``anchor`` prefixes element ids so several runs fit in one page."""
    h = f"h{heading_level}"
    named = [(key.replace("_", " "), getattr(run, key)) for key in _META_FIELDS]
    meta = [("run", run.run_id), *named, ("recorded", run.recorded_at)]
    meta_html = "".join(f"<span><b>{html.escape(k)}</b> {esc(v)}</span>" for k, v in meta if v)
    extra = kv((key.replace("_", " "), getattr(run, key)) for key in _EXTRA_FIELDS)
    counts = Counter(event.type for event in events)
    count_html = "".join(f'<span class="badge">{esc(t)} x {n}</span>' for t, n in sorted(counts.items()))
    parts = [f'<section class="run" data-run="{esc(run.run_id)}">', f'<p class="meta">{meta_html}</p>', extra]
    parts.append(f'<p class="counts">{count_html}</p>')
    if problems:
        items = "".join(f"<li>{esc(p)}</li>" for p in problems)
        parts.append(f'<div class="problems"><b>{len(problems)} audit problem(s)</b><ul>{items}</ul></div>')
    if drift is not None:
        parts.append(f'<{h} class="drift-title">Drift: recorded vs replayed</{h}>')
        parts.append(f'<div class="drift">{render_drift_html(drift, anchor=anchor)}</div>')
    parts.append(f"<{h}>Sequence</{h}>")
    parts.append(render_sequence_svg(events, anchor=anchor))
    parts.append(f"<{h}>Timeline ({len(events)} events)</{h}>")
    parts.append(render_timeline_html(events, resolve=resolve, anchor=anchor, drifted=drifted_seqs(drift)))
    parts.append("</section>")
    return "".join(p for p in parts if p)


def page(title: str, body: str) -> str:
    """A complete self-contained HTML document. The error probe runs first, marking script errors on
    ``<html>`` for a headless browser's DOM dump (the browser test); ``viewer.js`` last, only adding the
    filters: the page is readable without it."""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>\n{_asset('viewer.css')}</style>"
        f"<script>\n{_asset('error_probe.js')}</script></head>"
        f"<body>{body}<script>\n{_asset('viewer.js')}</script></body></html>\n"
    )


def render_cassette_page(
    cassette: LoadedCassette,
    *,
    drift: DriftResult | None = None,
    problems: Sequence[str] | None = None,
) -> str:
    """The viewer page of one loaded cassette (audit problems are computed when not given)."""
    if problems is None:
        problems = [*cassette.verify(), *audit_advice(cassette)]
    title = f"agent run {cassette.run.test or cassette.run.run_id}"
    body = (
        f"<h1>{esc(title)}</h1><p class=meta>cassette <code>{esc(str(cassette.path))}</code></p>"
        + render_run_section(
            cassette.run, cassette.events, resolve=cassette.payload, problems=problems, drift=drift
        )
    )
    return page(title, body)


def write_html(path: Path, text: str) -> None:
    """Write a page (UTF-8, atomically), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
