"""The HTML run viewer: one self-contained page (inline CSS and JS, no network) showing a run.

It shows the run as a timeline (model decisions, tool calls and results, retrievals, policy and
approval checkpoints, state hashes, effects with idempotency keys and receipts), a sequence picture
with one lane per actor (inline SVG), and, for a drift, the recorded and replayed values side by
side with the differing fields marked. Everything from the cassette is escaped: payloads are
untrusted. The page needs no JavaScript to be readable; the script only adds filters.

This folder owns:

- ``document.py``: a run's section and the HTML document around it (``render_cassette_page``, ``page``);
- ``entries.py``: the timeline list, one entry per event with its details, and its toolbar;
- ``svg.py``: the sequence picture (inline SVG);
- ``drift.py``: the drift view, recorded and replayed side by side;
- ``markup.py``: escaping and the small HTML pieces the others share;
- ``viewer.css``, ``error_probe.js``, ``viewer.js``: the page's style and scripts, package data read once
  and inlined verbatim into every page (so whatever they hold, comments included, ships in each page).
"""

from __future__ import annotations

from .document import page, render_cassette_page, render_run_section, write_html
from .drift import render_drift_html
from .markup import esc

__all__ = ["esc", "page", "render_cassette_page", "render_drift_html", "render_run_section", "write_html"]
