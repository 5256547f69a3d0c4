"""The self-contained HTML drift report: the summary, a table of tests and, per drifting test, the
run viewer (drift side by side, the sequence picture and the recorded timeline)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cassette.read import load_cassette
from ..exceptions import AgentReplayError
from .markdown import display_path
from .summary import PYTEST_WORDS, differences_text
from .viewer import esc, page, render_drift_html, render_run_section

NOTABLE = ("drifted", "failed", "error", "updated")
RED = ("drifted", "failed", "error")


def _label(test: Mapping[str, Any]) -> str:
    status = str(test["status"])
    return f"{status} ({test['cause']})" if status in ("failed", "error") and test.get("cause") else status


def _test_section(index: int, test: Mapping[str, Any]) -> str:
    anchor = f"t{index}-"
    drift = test.get("drift") if isinstance(test.get("drift"), Mapping) else None
    head = (
        f'<section class="test" id="test-{index}" data-status="{esc(test["status"])}">'
        f'<h2><span class="badge {"regression" if test["status"] in RED else ""}">'
        f"{esc(_label(test))}</span>"
        f"<code>{esc(test['nodeid'])}</code></h2>"
        # The whole message, as the terminal showed it: headline, evidence, location and numbered fixes.
        + (f'<pre class="message">{esc(test["message"])}</pre>' if test.get("message") else "")
        + f'<p class="meta">cassette <code>{esc(display_path(test["cassette"]))}</code> · '
        f"mode {esc(test['mode'])} · "
        f"{int(test['regressions'])} regression(s) · {int(test['expected'])} expected</p>"
    )
    body = ""
    cassette_path = Path(str(test["cassette"]))
    loaded = None
    error = None
    if cassette_path.is_file():
        try:
            loaded = load_cassette(cassette_path)
        except AgentReplayError as exc:
            error = exc.headline
    if loaded is not None:
        body = render_run_section(
            loaded.run, loaded.events, resolve=loaded.payload, drift=drift, anchor=anchor, heading_level=3
        )
    else:
        if drift is not None:
            body = (
                '<h3 class="drift-title">Drift: recorded vs replayed</h3>'
                f'<div class="drift">{render_drift_html(drift, anchor=anchor)}</div>'
            )
        note = f"cassette not readable: {error}" if error else "cassette not found next to this report"
        body += f'<p class="absent">{esc(note)}</p>'
    return head + body + "</section>"


def _network(network: object) -> str:
    if not isinstance(network, Mapping):
        return ""
    why = f" ({network['reason']})" if network.get("reason") else ""
    level, isolation = esc(network["level"]), esc(network["isolation"] + why)
    return f'<p class="network">Network guard: <b>{level}</b>, isolation {isolation}</p>'


def render_html(doc: Mapping[str, Any]) -> str:
    summary = doc["summary"]
    tests = list(doc["tests"])
    keys: tuple[str, ...] = ("replayed", "recorded", "drifted", "failed", "updated", "audited")
    keys += (*(word for word in PYTEST_WORDS if summary.get(word)), "unused")
    badges = "".join(
        f'<span class="badge{" regression" if key in RED and summary[key] else ""}">'
        f"{summary[key]} {key}</span>"
        for key in keys
    )
    rows = []
    for index, test in enumerate(tests):
        link = (
            f'<a href="#test-{index}">{esc(test["nodeid"])}</a>'
            if test["status"] in NOTABLE or test["regressions"] or test["expected"]
            else esc(test["nodeid"])
        )
        rows.append(
            f'<tr data-status="{esc(test["status"])}"><td>{esc(_label(test))}</td>'
            f"<td class=mono>{link}</td>"
            f"<td class=mono>{esc(display_path(test['cassette']))}</td><td>{esc(test['mode'])}</td>"
            f"<td>{int(test['regressions'])}</td><td>{int(test['expected'])}</td></tr>"
        )
    steps = "".join(f"<li><code>{esc(step)}</code></li>" for step in doc.get("next_steps") or [])
    lists = ""
    for key in ("unused",):
        items = doc.get(key) or []
        if items:
            lists += (
                f"<h2>{key.capitalize()} cassettes</h2><ul>"
                + "".join(f"<li><code>{esc(i)}</code></li>" for i in items)
                + "</ul>"
            )
    sections = [
        _test_section(index, test)
        for index, test in enumerate(tests)
        if test["status"] in NOTABLE or test["regressions"] or test["expected"]
    ]
    body = (
        "<h1>Agent replay report</h1>"
        f'<p class="counts">{badges}</p><p class="differences">{esc(differences_text(summary))}</p>'
        + _network(doc.get("network"))
        + (f"<h2>Next steps</h2><ul>{steps}</ul>" if steps else "")
        + "<h2>Tests</h2><table class=tests><tr><th>result</th><th>test</th><th>cassette</th><th>mode</th>"
        "<th>regressions</th><th>expected</th></tr>" + "".join(rows) + "</table>" + lists + "".join(sections)
    )
    return page("Agent replay report", body)
