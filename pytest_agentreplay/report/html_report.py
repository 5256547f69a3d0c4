"""The self-contained HTML drift report: the summary, a table of tests and, per drifting test, the
run viewer (drift side by side, the sequence picture and the recorded timeline)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..cassette.read import load_cassette
from ..exceptions import AgentReplayError
from .markdown import display_path, notable
from .status import RED, TestStatus
from .summary import SessionReport, differences_text, shown_counts
from .viewer import esc, page, render_drift_html, render_run_section

if TYPE_CHECKING:
    from .comparison_table import Comparison


def _test_section(index: int, test: TestStatus) -> str:
    anchor = f"t{index}-"
    head = (
        f'<section class="test" id="test-{index}" data-status="{esc(test.status)}">'
        f'<h2><span class="badge {"regression" if test.red else ""}">'
        f"{esc(test.label())}</span>"
        f"<code>{esc(test.nodeid)}</code></h2>"
        # The whole message, as the terminal showed it: headline, evidence, location and numbered fixes.
        + (f'<pre class="message">{esc(test.message)}</pre>' if test.message else "")
        + f'<p class="meta">cassette <code>{esc(display_path(test.cassette))}</code> · '
        f"mode {esc(test.mode)} · "
        f"{test.regressions} regression(s) · {test.expected} expected</p>"
    )
    path = Path(test.cassette)
    note = "cassette not found next to this report"
    try:
        loaded = load_cassette(path) if path.is_file() else None
    except AgentReplayError as exc:
        loaded, note = None, f"cassette not readable: {exc.headline}"
    if loaded is not None:
        run = render_run_section(
            loaded.run,
            loaded.events,
            resolve=loaded.payload,
            drift=test.drift,
            anchor=anchor,
            heading_level=3,
        )
        return head + run + "</section>"
    drift = "" if test.drift is None else render_drift_html(test.drift, anchor=anchor, h="h3")
    return head + drift + f'<p class="absent">{esc(note)}</p></section>'


def _comparison(comparison: Comparison | None) -> str:
    if comparison is None:
        return ""
    from .comparison_table import html_table

    not_spent = comparison.not_spent_text()
    spent = f"<p class=not-spent>Replay did not spend {esc(not_spent)}</p>" if not_spent else ""
    return html_table(comparison.tests) + spent


def render_html(report: SessionReport) -> str:
    summary = report.summary
    keys = shown_counts(summary)
    badges = "".join(
        f'<span class="badge{" regression" if key in RED and summary[key] else ""}">'
        f"{summary[key]} {key}</span>"
        for key in keys
    )
    rows = []
    for index, test in enumerate(report.tests):
        link = f'<a href="#test-{index}">{esc(test.nodeid)}</a>' if notable(test) else esc(test.nodeid)
        rows.append(
            f'<tr data-status="{esc(test.status)}"><td>{esc(test.label())}</td>'
            f"<td class=mono>{link}</td>"
            f"<td class=mono>{esc(display_path(test.cassette))}</td><td>{esc(test.mode)}</td>"
            f"<td>{test.regressions}</td><td>{test.expected}</td></tr>"
        )
    steps = "".join(f"<li><code>{esc(step)}</code></li>" for step in report.next_steps)
    unused = "".join(f"<li><code>{esc(path)}</code></li>" for path in report.unused)
    pending = "".join(
        f"<li><code>{esc(display_path(t.pending))}</code></li>" for t in report.tests if t.pending
    )
    sections = [_test_section(index, test) for index, test in enumerate(report.tests) if notable(test)]
    body = (
        "<h1>Agent replay report</h1>"
        f'<p class="counts">{badges}</p><p class="differences">{esc(differences_text(summary))}</p>'
        + (
            f'<p class="network">Network guard: <b>{esc(network.level)}</b>, isolation '
            f"{esc(network.isolation_text)}</p>"
            if (network := report.network) is not None
            else ""
        )
        + (f"<h2>Next steps</h2><ul>{steps}</ul>" if steps else "")
        + "<h2>Tests</h2><table class=tests><tr><th>result</th><th>test</th><th>cassette</th><th>mode</th>"
        "<th>regressions</th><th>expected</th></tr>"
        + "".join(rows)
        + "</table>"
        + _comparison(report.comparison)
        + (f"<h2>Unused cassettes</h2><ul>{unused}</ul>" if unused else "")
        + (f"<h2>Pending drift (agentreplay review)</h2><ul>{pending}</ul>" if pending else "")
        + "".join(sections)
    )
    return page("Agent replay report", body)
