"""The drift demonstrations of the framework-built agents, each run in a subprocess on the committed
cassettes: ``FRAMEWORK_AGENT_DRIFT=docstring`` rewords the Pydantic AI agent's ``search_kb`` docstring (its
tool description), ``FRAMEWORK_AGENT_DRIFT=edge`` rewires the LangGraph graph so that the intake node no
longer runs. Both must fail the regression replay with a report naming the step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _not_while_recording(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("agentreplay_record") not in (None, "none"):
        pytest.skip("checks the committed cassettes: not run while recording them")


def run_pytest(target: str, drift: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environ["FRAMEWORK_AGENT_DRIFT"] = drift
    command = [sys.executable, "-m", "pytest", target, "-p", "no:cacheprovider", "-q", "--color=no"]
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize(
    ("framework", "drift", "target", "expected_lines"),
    [
        pytest.param(
            "pydantic_ai",
            "docstring",
            "example_project/tests/test_framework_pydantic_ai.py::test_late_parcel_opens_ticket[openai]",
            [
                "model.call gpt-4.1-mini (openai chat.completions)",
                "input_ref.body.json.tools[1].function.description: "
                '"Search the support knowledge base (policies, shipping, refunds)." -> '
                '"Search the help-center articles for an answer."  [regression',
            ],
            id="pydantic_ai-docstring",
        ),
        pytest.param(
            "langgraph",
            "edge",
            "example_project/tests/test_framework_langgraph.py::test_order_status",
            [
                "state.update intake\n  missing: recorded, not replayed",
                "state.update agent\n  data.step: 2 -> 1  [regression",
                "state_hash: ",
            ],
            id="langgraph-edge",
        ),
    ],
)
def test_framework_drift_fails_with_a_readable_report(
    framework: str, drift: str, target: str, expected_lines: list[str]
) -> None:
    pytest.importorskip(framework)
    proc = run_pytest(target, drift)
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]
    assert "1 failed" in out and "drifted:" in out
    for line in expected_lines:
        assert line in out, f"{line!r} not in the drift report:\n{out[-6000:]}"
    assert "pytest --agentreplay-update" in out
