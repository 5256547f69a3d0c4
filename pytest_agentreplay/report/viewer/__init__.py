"""The HTML run viewer: one self-contained page (inline CSS and JS, no network) showing a run's
timeline, sequence picture and drift. Everything from the cassette is escaped: payloads are untrusted."""

from __future__ import annotations

from .document import page, render_cassette_page, render_run_section, write_html
from .drift import render_drift_html
from .markup import esc

__all__ = ["esc", "page", "render_cassette_page", "render_drift_html", "render_run_section", "write_html"]
