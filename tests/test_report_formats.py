"""Report formats from statuses carrying real drift results: Markdown (snapshot), JSON, HTML, escaping of
untrusted values, the GitHub step summary and the terminal summary lines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_cli_support import build_run
from test_report_session import assert_snapshot

from pytest_agentreplay.diff import DriftResult, RuleSet, compare_histories
from pytest_agentreplay.exceptions import ReportError
from pytest_agentreplay.report import build_report, render_report, validate_report, write_report
from pytest_agentreplay.report.status import Cause, Status, TestStatus
from pytest_agentreplay.report.summary import summary_lines


def drift_between(
    tmp_path: Path, name: str, mode: str = "regression", **changes: Any
) -> tuple[str, DriftResult]:
    recorded = build_run(tmp_path / "cassettes" / f"{name}.json")
    replayed = build_run(tmp_path / "replayed" / f"{name}.json", run_id="run-0002", **changes)
    result = compare_histories(
        recorded.event_dicts(), replayed.event_dicts(), rules=RuleSet.from_layers(mode), resolve=None
    )
    return f"cassettes/tests/test_agent/{name}.json", result


def missing(nodeid: str, cassette: str) -> TestStatus:
    """A test whose cassette does not exist."""
    message = f"no cassette for {nodeid}"
    return TestStatus(nodeid, cassette, Status.FAILED, "regression", Cause.MISSING_CASSETTE, message)


@pytest.fixture
def outcomes(tmp_path: Path) -> list[TestStatus]:
    refund_cassette, refund_drift = drift_between(
        tmp_path, "test_refund", refund_amount=400, final_text="Your refund of 400 EUR | is on its `way`."
    )
    wording_cassette, wording_drift = drift_between(
        tmp_path, "test_wording", mode="model-comparison", final_text="Refund sent: 40 EUR."
    )
    agent = "tests/test_agent.py::"
    return [
        TestStatus(
            agent + "test_refund",
            refund_cassette,
            Status.DRIFTED,
            "regression",
            regressions=len(refund_drift.regressions),
            expected=len(refund_drift.expected),
            drift=refund_drift,
        ),
        TestStatus(
            agent + "test_wording",
            wording_cassette,
            Status.REPLAYED,
            "model-comparison",
            expected=len(wording_drift.expected),
            drift=wording_drift,
        ),
        TestStatus(
            agent + "test_lookup",
            "cassettes/tests/test_agent/test_lookup.json",
            Status.REPLAYED,
            "regression",
        ),
        TestStatus(
            agent + "test_new_flow",
            "cassettes/tests/test_agent/test_new_flow.json",
            Status.UPDATED,
            "regression",
            regressions=1,
        ),
    ]


def test_markdown_snapshot(outcomes: list[TestStatus]) -> None:
    text = render_report(".md", build_report(outcomes, unused=["cassettes/tests/test_old.json"]))
    assert_snapshot("report_outcomes.md", text)


def test_markdown_structure(outcomes: list[TestStatus]) -> None:
    text = render_report(".md", build_report(outcomes))
    assert text.startswith("## Agent replay report\n")
    assert "**1 drifted**" in text
    assert text.count("<details>") == 2 and text.count("</details>") == 2
    # Untrusted values cannot break the table: pipes and backticks are entities.
    assert "400 EUR &#124; is on its &#96;way&#96;." in text
    for line in text.splitlines():
        if line.startswith("| ") and "data.decision.text" in line:
            assert line.count(" | ") == 6
    assert "pytest --agentreplay-update tests/test_agent.py::test_refund" in text


def test_json_report_is_valid(outcomes: list[TestStatus], tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    outcomes.append(missing("tests/test_a.py::test_b", "cassettes/tests/test_a/test_b.json"))
    write_report(path, outcomes, unused=["x.json"], step_summary=False)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert validate_report(doc) == []
    assert doc["summary"]["unused"] == 1 and doc["summary"]["failed"] == 1
    assert any("--agentreplay-record=missing" in step for step in doc["next_steps"])


def test_a_report_is_never_written_into_a_folder_it_creates(
    outcomes: list[TestStatus], tmp_path: Path
) -> None:
    path = tmp_path / "gone" / "report.md"
    with pytest.raises(ReportError, match="the agentreplay report was not written") as info:
        write_report(path, outcomes, step_summary=False)
    assert f"its folder {path.parent} does not exist" in str(info.value)
    assert not path.parent.exists()


def test_a_report_that_cannot_be_written_names_the_os_error(
    outcomes: list[TestStatus], tmp_path: Path
) -> None:
    folder = tmp_path / "taken.md"
    folder.mkdir()  # a folder where the file should go: the rename fails whatever the user's rights
    with pytest.raises(ReportError, match=r"IsADirectoryError|OSError") as info:
        write_report(folder, outcomes, step_summary=False)
    assert str(folder) in info.value.headline


def test_a_step_summary_that_cannot_be_appended_is_an_error(
    outcomes: list[TestStatus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "missing" / "summary.md"))
    with pytest.raises(ReportError, match=r"\$GITHUB_STEP_SUMMARY was not written"):
        write_report(tmp_path / "report.md", outcomes)
    assert (tmp_path / "report.md").is_file()


def test_html_report_escapes_untrusted_values(outcomes: list[TestStatus], tmp_path: Path) -> None:
    drift = outcomes[0].drift
    assert drift is not None
    first = replace(drift.differences[0], replayed="</pre><script>alert('x')</script>")
    outcomes[0] = outcomes[0]._replace(
        nodeid="tests/test_agent.py::test_refund[<script>alert(1)</script>]",
        drift=drift._replace(differences=(first, *drift.differences[1:])),
    )
    page = render_report(".html", build_report(outcomes))
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert" in page
    assert page.count("<script>") == 2  # the page's own two inline scripts


def test_step_summary_is_appended(
    outcomes: list[TestStatus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_report(tmp_path / "report.json", outcomes)
    write_report(tmp_path / "report.html", outcomes)
    text = summary.read_text(encoding="utf-8")
    assert text.count("## Agent replay report") == 2


def test_no_step_summary_without_the_variable(
    outcomes: list[TestStatus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    write_report(tmp_path / "report.md", outcomes)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["report.md"]


def test_summary_lines(outcomes: list[TestStatus]) -> None:
    outcomes.append(
        missing("tests/test_x.py::test_y", "cassettes/tests/test_x/test_y.json")._replace(message=None)
    )
    lines = summary_lines(outcomes, unused=["cassettes/old.json"])
    assert lines[0] == "2 replayed, 0 recorded, 1 drifted, 1 failed, 1 updated, 0 audited, 1 unused"
    failed = "  failed (missing-cassette: the cassette does not exist): tests/test_x.py::test_y"
    assert any(line.startswith(failed) for line in lines)
    text = "\n".join(lines)
    assert "drifted: tests/test_agent.py::test_refund -> cassettes/tests/test_agent/test_refund.json" in text
    assert "updated: tests/test_agent.py::test_new_flow" in text
    assert "unused: cassettes/old.json" in text
    assert "pytest --agentreplay-update tests/test_agent.py::test_refund" in text
    assert "pytest --agentreplay-record=missing tests/test_x.py::test_y" in text


def test_summary_lines_all_green() -> None:
    outcome = TestStatus("t::a", "c.json", Status.REPLAYED, "regression")
    assert summary_lines([outcome]) == [
        "1 replayed, 0 recorded, 0 drifted, 0 failed, 0 updated, 0 audited, 0 unused"
    ]


def test_build_report_counts(outcomes: list[TestStatus]) -> None:
    summary = build_report(outcomes).summary
    assert summary["tests"] == 4
    # The updated test's regression was accepted: only the drifted test's regressions fail the run.
    drifted = sum(o.regressions for o in outcomes if o.status == Status.DRIFTED)
    updated = sum(o.regressions for o in outcomes if o.status == Status.UPDATED)
    assert drifted and updated
    assert summary["regressions"] == drifted
    assert summary["regressions_accepted"] == updated
    assert summary["expected_differences"] == sum(o.expected for o in outcomes)
