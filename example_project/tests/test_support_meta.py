"""Properties of the example as a whole, each checked in a subprocess:

- re-recording reproduces the committed cassettes (the scripted services are deterministic): only
  fields the diff rules call volatile may differ;
- the drift demonstration: ``SUPPORT_AGENT_DRIFT=prompt|argument`` (a one-line change to the agent)
  makes the regression suite fail with a drift report naming the drifting field.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.read import LoadedCassette, load_cassette
from pytest_agentreplay.core.config import read_pyproject_table
from pytest_agentreplay.core.events import PayloadRef
from pytest_agentreplay.diff import RuleSet, compare_histories, render_drift

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parents[1]
COMMITTED = ROOT / "cassettes" / "example_project" / "tests"
SCENARIO_MODULES = sorted(
    str(p.relative_to(ROOT)) for p in TESTS.glob("test_support_*.py") if p.name != Path(__file__).name
)
# Streamed responses keep each SSE event's arrival time (``t``, seconds since the response started): a
# latency, so volatile like ``latency_ms``. The plugin's defaults do not list it yet; say so here.
VOLATILE_EXTRA: dict[str, Any] = {
    "model.call:output_ref.body.sse[*].t": "ignore",
    # Two recordings read the clock and draw uuids anew (a replay serves each recording's own values back):
    # the date in the system prompt and the tickets' request ids differ between them by nature.
    "model.call:input_ref.body.json.messages[*].content": {"normalize": [r"\d{4}-\d{2}-\d{2}"]},
    "model.call:input_ref.body.json.system": {"normalize": [r"\d{4}-\d{2}-\d{2}"]},
    "effect:**.request_id": "ignore",  # sent in the request, echoed in the receipt
}


@pytest.fixture(autouse=True)
def _not_while_recording(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("agentreplay_record") not in (None, "none"):
        pytest.skip("checks the committed cassettes: not run while recording them")


def run_pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v for k, v in os.environ.items() if k != "SUPPORT_AGENT_DRIFT" and not k.startswith("PYTEST_")
    }
    environ.update(env or {})
    command = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-q", "--color=no"]
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=240)


def _resolver(*cassettes: LoadedCassette) -> Any:
    def resolve(ref: Any) -> Any:
        if ref is None:
            return None
        if isinstance(ref, dict) and not ref.get("sha256"):
            return ref.get("inline")
        payload_ref = ref if isinstance(ref, PayloadRef) else PayloadRef.model_validate(ref)
        for cassette in cassettes:  # content-addressed: the same sha256 is the same payload anywhere
            try:
                return cassette.payload(payload_ref)
            except Exception:
                continue
        raise LookupError(f"blob {payload_ref.sha256} is in neither blob store")

    return resolve


def test_rerecording_reproduces_the_committed_cassettes(tmp_path: Path) -> None:
    fresh_dir = tmp_path / "cassettes"
    proc = run_pytest(
        *SCENARIO_MODULES, "--agentreplay-record=all", f"--agentreplay-cassette-dir={fresh_dir}"
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    # Only the modules re-recorded here: the framework examples keep cassettes of their own beside them.
    modules = {Path(m).stem for m in SCENARIO_MODULES}
    every = (p.relative_to(COMMITTED) for p in COMMITTED.rglob("*.json"))
    committed = sorted(p for p in every if p.parts[0] in modules)
    fresh_root = fresh_dir / "example_project" / "tests"
    fresh = sorted(p.relative_to(fresh_root) for p in fresh_root.rglob("*.json"))
    assert committed, "no committed cassettes: record them first (see example_project/README.md)"
    assert fresh == committed

    project_rules = read_pyproject_table(ROOT).get("rules")
    rules = RuleSet.from_layers("regression", project=project_rules, marker=VOLATILE_EXTRA)
    reports = []
    for relative in committed:
        old, new = load_cassette(COMMITTED / relative), load_cassette(fresh_root / relative)
        result = compare_histories(
            old.event_dicts(), new.event_dicts(), rules=rules, resolve=_resolver(old, new)
        )
        if result.has_regressions:
            reports.append(render_drift(result, test=str(relative), cassette=str(COMMITTED / relative)))
    assert not reports, "re-recording changed the history:\n\n" + "\n\n".join(reports)


REGRESSION_SUITE = "example_project/tests/test_support_regression.py"


@pytest.mark.parametrize(
    ("drift", "select", "expected_lines"),
    [
        pytest.param(
            "prompt",
            "late_parcel and plain",
            [
                "input_ref.body.json.messages[0].content:  [regression",  # OpenAI: the system message
                "input_ref.body.json.system:  [regression",  # Anthropic: the system parameter
                "+ ... use issue_refund for refunds. Always offer a 10% discount code.",
            ],
            id="prompt",
        ),
        pytest.param(
            "argument",
            "late_parcel",
            ['input_ref.body.json.queue: "carrier-claims" -> "general"  [regression'],
            id="argument",
        ),
    ],
)
def test_drift_fails_the_suite_with_a_readable_report(
    drift: str, select: str, expected_lines: list[str]
) -> None:
    proc = run_pytest(REGRESSION_SUITE, "-k", select, env={"SUPPORT_AGENT_DRIFT": drift})
    out = proc.stdout

    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]
    assert " failed" in out and "drifted:" in out
    for line in expected_lines:
        assert line in out, f"{line!r} not in the drift report:\n{out[-6000:]}"
    assert "pytest --agentreplay-update 'example_project/tests/test_support_regression.py::" in out
