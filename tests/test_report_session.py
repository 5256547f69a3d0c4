"""Session drift reports from a real pytest session with drift: Markdown (snapshot), JSON (schema), HTML,
the GitHub step summary, JUnit properties and the terminal summary."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_agentreplay.report import report_json_schema, validate_report

SNAPSHOTS = Path(__file__).parent / "snapshots"

AGENT = """
from pytest_agentreplay import tool, record_policy, record_approval, record_retrieval

LIMIT = {limit}
QUERY = {query!r}

@tool(name="lookup_order", schema_version="2")
def lookup_order(order_id):
    return {{"order_id": order_id, "total": 40, "status": "delivered"}}

@tool(name="issue_refund", effect="write", idempotency_key="refund_ref")
def issue_refund(order_id, amount, refund_ref):
    return {{"id": "rf_" + str(order_id), "amount": amount}}

@tool(name="send_message", schema_version="1")
def send_message(text):
    return {{"sent": True}}

def refund_agent(order_id):
    order = lookup_order(order_id)
    if order["total"] < LIMIT:
        record_policy("refund-limit", "allow", version="3")
    else:
        record_policy("refund-limit", "needs_approval", version="3", reason="over the limit")
        record_approval("granted", by="agent-lead")
    return issue_refund(order_id, order["total"], refund_ref=f"refund-{{order_id}}")

def greeting_agent(name):
    record_retrieval(QUERY.format(name=name), document_ids=["kb-1"], corpus_version="2025-04")
    return send_message("Hello " + name)
"""

TESTS = """
import agentlib

def test_refund(agent_replay):
    assert agentlib.refund_agent(17)["id"] == "rf_17"

def test_greeting(agent_replay):
    assert agentlib.greeting_agent("Ada")["sent"]

def test_lookup_only(agent_replay):
    assert agentlib.lookup_order(3)["order_id"] == 3
"""


def normalise(text: str, root: Path) -> str:
    text = text.replace(str(root), "<root>")
    return re.sub(r"\d+\.\d+s", "<t>s", text)


def assert_snapshot(name: str, text: str) -> None:
    """Compare with ``tests/snapshots/<name>``; ``UPDATE_SNAPSHOTS=1`` rewrites it."""
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"snapshot {path} is missing: run with UPDATE_SNAPSHOTS=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"snapshot {name} differs: review, then run with UPDATE_SNAPSHOTS=1 to accept"


@pytest.fixture
def drift_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Record three tests, then change the agent so two drift (one regression, one wording change)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # The report names the network level: a suite run in its own namespace must not change the snapshot.
    monkeypatch.delenv("PYTEST_AGENTREPLAY_NETNS", raising=False)
    pytester.makepyfile(agentlib=AGENT.format(limit=100, query="greeting for {name}"))
    pytester.makepyfile(test_agent=TESTS)
    pytester.makefile(
        ".toml",
        pyproject='[tool.agentreplay.rules]\n"retrieval:data.query" = { verdict = "expected" }\n',
    )
    pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    pytester.makepyfile(agentlib=AGENT.format(limit=25, query="how to greet {name} | `politely`"))
    return pytester


# One xdist worker runs the tests in the file's order: the same report, every status having come from the
# worker as its wire form (``TestStatus.to_wire``).
@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_markdown_report_reads_as_a_pull_request_comment(
    drift_session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    summary_file = drift_session.path / "step_summary.md"
    summary_file.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    (drift_session.path / "out").mkdir()  # the report's folder must exist: none is created for it
    # The report lists the tests in the order they ran: the snapshot holds the file's order, which
    # pytest-randomly (loaded by an inner session too when it is installed) would shuffle.
    result = drift_session.runpytest(
        *xdist, "--agentreplay-report=out/report.md", "-p", "no:cacheprovider", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=2, failed=1)
    text = (drift_session.path / "out" / "report.md").read_text(encoding="utf-8")
    normalised = normalise(text, drift_session.path)
    assert_snapshot("report_session.md", normalised)
    assert "<details>" in text and "</details>" in text
    assert "data.verdict" in text
    assert summary_file.read_text(encoding="utf-8") == "# earlier step\n" + text


def test_terminal_summary_counts_and_next_command(drift_session: pytest.Pytester) -> None:
    result = drift_session.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*2 replayed, 0 recorded, 1 drifted, 0 failed, 0 updated, 0 audited, 0 unused*",
            "*drifted: test_agent.py::test_refund*",
            "*next:*",
            "*pytest --agentreplay-update test_agent.py::test_refund*",
        ]
    )


def test_json_report_validates_against_the_published_schema(drift_session: pytest.Pytester) -> None:
    import jsonschema  # type: ignore[import-untyped]

    result = drift_session.runpytest("--agentreplay-report=report.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    doc = json.loads((drift_session.path / "report.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(report_json_schema())
    jsonschema.validate(doc, report_json_schema(), cls=jsonschema.Draft202012Validator)
    assert validate_report(doc) == []
    assert doc["summary"]["drifted"] == 1 and doc["summary"]["replayed"] == 2
    by_test = {t["nodeid"].split("::")[-1]: t for t in doc["tests"]}
    assert by_test["test_refund"]["status"] == "drifted"
    assert by_test["test_greeting"]["expected"] == 1
    paths = {d["path"] for d in by_test["test_refund"]["drift"]["differences"]}
    assert "data.verdict" in paths
    # A broken document is rejected by the same schema.
    doc["tests"][0]["status"] = "exploded"
    assert validate_report(doc)


def test_html_report_embeds_the_viewer_for_drifting_tests(drift_session: pytest.Pytester) -> None:
    result = drift_session.runpytest("--agentreplay-report=report.html", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    page = (drift_session.path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert 'class="drift-pair"' in page
    assert "drift-marker" in page
    assert '<svg class="sequence"' in page
    assert "<script src" not in page and "<link" not in page


def test_junit_xml_carries_per_test_properties(drift_session: pytest.Pytester) -> None:
    result = drift_session.runpytest("--junitxml=junit.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    tree = ET.parse(drift_session.path / "junit.xml")
    cases = {case.get("name"): case for case in tree.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_refund"].iter("property")}
    assert props["agentreplay.mode"] == "regression"
    assert props["agentreplay.status"] == "drifted"
    assert int(str(props["agentreplay.regressions"])) >= 1
    assert props["agentreplay.expected"] == "0"
    assert str(props["agentreplay.cassette"]).endswith("test_refund.json")
    greeting = {p.get("name"): p.get("value") for p in cases["test_greeting"].iter("property")}
    assert greeting["agentreplay.expected"] == "1"


POLICY_AGENT = """
from pytest_agentreplay import record_policy


def test_policy(agent_replay):
    record_policy({name!r}, "allow")
"""


@pytest.mark.parametrize("suffix", [".md", ".json", ".html"])
def test_a_report_of_text_no_utf8_can_hold_is_written_escaped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Replayed, the agent names its policy with a lone surrogate: the drift carries it, and writing the
    report (and the step summary) raised UnicodeEncodeError out of pytest_sessionfinish, which crashed the
    session; the report was never written. It is written with the character escaped (``\\ud800``)."""
    summary_file = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    pytester.makepyfile(test_agent=POLICY_AGENT.format(name="refund-limit"))
    pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=POLICY_AGENT.format(name="refund\ud800limit"))
    result = pytester.runpytest(f"--agentreplay-report=report{suffix}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = (pytester.path / f"report{suffix}").read_text(encoding="utf-8")
    assert "refund\\ud800limit" in text
    assert "refund\\ud800limit" in summary_file.read_text(encoding="utf-8")
    if suffix == ".json":
        doc = json.loads(text)
        assert validate_report(doc) == []
        # The escape reads back as the character the agent gave.
        assert "refund\ud800limit" in json.dumps(doc["tests"][0]["drift"], ensure_ascii=False)
