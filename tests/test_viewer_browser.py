"""The HTML run viewer in a real headless Chromium: loads without console errors, shows the timeline,
the actor lanes and the drift markers, escapes hostile payloads; leaves screenshots under artifacts/."""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_cli_support import build_run

from pytest_agentreplay.diff import DriftResult, RuleSet, compare_histories
from pytest_agentreplay.report import build_report, render_report
from pytest_agentreplay.report.status import Status, TestStatus
from pytest_agentreplay.report.viewer import page, render_cassette_page

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
BROWSERS = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "headless_shell",
)


def find_browser() -> str | None:
    explicit = os.environ.get("AGENTREPLAY_BROWSER")
    if explicit:
        return explicit
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> str:
    found = find_browser()
    if found is None:
        pytest.skip(
            "no headless Chromium found (looked for "
            + ", ".join(BROWSERS)
            + " on PATH and $AGENTREPLAY_BROWSER); "
            "install Debian's `chromium` package to run the viewer browser test"
        )
    return found


def run_browser(browser: str, tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        url,
    ]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"headless browser timed out on {url}")


def console_errors(stderr: str) -> list[str]:
    """Console messages the page logged (our pages log nothing, so any is a problem)."""
    return [line for line in stderr.splitlines() if ":CONSOLE(" in line or "Uncaught" in line]


def load(browser: str, tmp_path: Path, file: Path) -> str:
    result = run_browser(browser, tmp_path, file.as_uri(), "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_errors(result.stderr) == []
    dom = result.stdout
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None, dom[:500]
    errors = re.search(r'data-js-errors="([^"]*)"', root.group(0))
    assert errors is not None, "the error probe did not run"
    assert json.loads(htmllib.unescape(errors.group(1))) == []
    assert 'data-ready="1"' in root.group(0), "the page script did not finish"
    return dom


def screenshot(browser: str, tmp_path: Path, file: Path, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / name
    target.unlink(missing_ok=True)
    result = run_browser(
        browser, tmp_path, file.as_uri(), f"--screenshot={target}", "--window-size=1280,2000"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    return target


@pytest.fixture
def drift_page(tmp_path: Path) -> tuple[Path, DriftResult]:
    recorded = build_run(tmp_path / "cassettes" / "recorded.json", html_payload=True)
    replayed = build_run(
        tmp_path / "cassettes" / "replayed.json",
        run_id="run-0002",
        refund_amount=400,
        final_text="<img src=x onerror=alert(1)> refund of 400 EUR",
        html_payload=True,
    )
    drift = compare_histories(
        recorded.event_dicts(), replayed.event_dicts(), rules=RuleSet.from_layers("regression")
    )
    out = tmp_path / "viewer.html"
    out.write_text(render_cassette_page(recorded, drift=drift), encoding="utf-8")
    return out, drift


def test_viewer_renders_in_chromium(
    browser: str, tmp_path: Path, drift_page: tuple[Path, DriftResult]
) -> None:
    file, drift = drift_page
    dom = load(browser, tmp_path, file)
    # The timeline: one entry per event.
    assert len(re.findall(r'<li id="ev-\d+" class="entry', dom)) == 12
    # The sequence picture: one lane per actor, one row per event.
    lanes = re.findall(r'<g class="lane" data-lane="(\w+)"', dom)
    assert lanes == ["model", "runtime", "tool", "human", "policy"]
    assert len(re.findall(r'<g class="seq-row"', dom)) == 12
    # Drift: every drifting recorded event is marked, and each pair is shown side by side.
    drifted = {d.seq_recorded for d in drift.differences}
    assert len(drifted) == 3
    assert dom.count("drift-marker") == len(drifted)
    assert dom.count('class="drift-pair"') == len(drifted)
    assert dom.count('data-side="recorded"') == dom.count('data-side="replayed"') == len(drift.differences)
    # Model decisions, tools, checkpoints, state and effects are all there.
    for text in (
        "tool_calls",
        "lookup_order",
        "needs_approval",
        "agent-lead",
        "refund-order-17",
        "rf_9001",
        "state hash",
        "kb-12",
        "812",
    ):
        assert text in dom, text
    # Hostile payloads stay text: no element was created from them.
    assert "<img" not in dom
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in dom or "&lt;script&gt;alert(&#x27;x&#x27;)" in dom
    shot = screenshot(browser, tmp_path, file, "viewer.png")
    assert shot.is_file()


def test_html_report_renders_in_chromium(
    browser: str, tmp_path: Path, drift_page: tuple[Path, DriftResult]
) -> None:
    _, drift = drift_page
    outcomes = [
        TestStatus(
            "tests/test_agent.py::test_refund",
            str(tmp_path / "cassettes" / "recorded.json"),
            Status.DRIFTED,
            "regression",
            regressions=len(drift.regressions),
            expected=len(drift.expected),
            drift=drift,
        ),
        TestStatus(
            "tests/test_agent.py::test_other",
            str(tmp_path / "cassettes" / "missing.json"),
            Status.REPLAYED,
            "regression",
        ),
    ]
    file = tmp_path / "report.html"
    file.write_text(render_report(".html", build_report(outcomes)), encoding="utf-8")
    dom = load(browser, tmp_path, file)
    assert len(re.findall(r'<li id="t0-ev-\d+"', dom)) == 12
    assert dom.count("drift-marker") == 3
    screenshot(browser, tmp_path, file, "report.png")


def test_error_probe_catches_script_errors(browser: str, tmp_path: Path) -> None:
    """The harness itself: a page whose script fails must be reported, not pass silently."""
    broken = page("broken", "<p>x</p>").replace("</body>", "<script>notAFunction();</script></body>")
    file = tmp_path / "broken.html"
    file.write_text(broken, encoding="utf-8")
    result = run_browser(browser, tmp_path, file.as_uri(), "--dump-dom")
    root = re.search(r"<html[^>]*>", result.stdout)
    assert root is not None
    errors = re.search(r'data-js-errors="([^"]*)"', root.group(0))
    assert errors is not None
    assert "notAFunction" in htmllib.unescape(errors.group(1))
