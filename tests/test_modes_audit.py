"""Audit mode: executes nothing (the test body does not run, no service sees a request, no ``@tool``
runs), verifies the cassette (schema, hash chain, committed effects carry an idempotency key and a
receipt, every blob present) and renders the run as a timeline in the test report. Also: every
cassette of this repository renders and verifies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_modes_regression import INNER_TEST, Lab, make_lab

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cli import main as cli_main
from pytest_agentreplay.report.timeline import render_timeline

REPO = Path(__file__).resolve().parents[1]

# The inner test leaves a trace when its body runs: audit must leave none.
TRACED_TEST = INNER_TEST.replace(
    "def test_support(agent_replay):\n",
    "def test_support(agent_replay):\n    open('body-ran.txt', 'a').write('ran\\n')\n",
)


@pytest.fixture
def lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, flaky=True, test=TRACED_TEST)


def audit(lab: Lab) -> pytest.RunResult:
    trace = lab.pytester.path / "body-ran.txt"
    trace.unlink(missing_ok=True)
    lab.kit.CALLED.clear()
    before = lab.seen()
    result = lab.run("--agentreplay-mode=audit")
    assert not trace.exists(), "audit ran the test body"
    assert lab.seen() == before, "audit sent a request"
    assert lab.kit.CALLED == [], "audit ran a @tool function"
    return result


def test_audit_executes_nothing_and_renders_the_timeline(lab: Lab) -> None:
    lab.record()
    result = audit(lab)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*Captured agentreplay audit call*",
            "audit of *test_support.json",
            "*   0  run.start*",
            "*model.call*openai gpt-4o-mini -> lookup_order(*), get_policy(*)*",
            "*http*GET http://127.0.0.1:*/orders/A1 -> 200*",
            "*tool.call*get_policy(*late delivery*)*",
            "*approval*granted by lead for ticket A1*",
            "*effect*http.post http://127.0.0.1:*/tickets not committed, receipt *, key tk-*",
            "*effect*http.post http://127.0.0.1:*/tickets committed, receipt T-1, key tk-*",
            "*effect*notify_customer committed, receipt N-*, key nt-A1*",
            "*run.end*ok*",
        ]
    )
    report = lab.pytester.path / "audit.json"
    lab.run("--agentreplay-mode=audit", f"--agentreplay-report={report}")
    (test,) = json.loads(report.read_text())["tests"]
    assert test["status"] == "audited" and test["regressions"] == 0


def test_audit_pinned_by_the_marker(lab: Lab) -> None:
    lab.record()
    lab.pytester.makepyfile(
        test_agent="import pytest\npytestmark = pytest.mark.agentreplay(mode='audit')\n" + TRACED_TEST
    )
    trace = lab.pytester.path / "body-ran.txt"
    trace.unlink()  # written by the recording
    before = lab.seen()
    audit_marker = lab.run()  # no option: the marker pins the mode
    assert not trace.exists() and lab.seen() == before
    audit_marker.assert_outcomes(passed=1)
    audit_marker.stdout.fnmatch_lines(["*Captured agentreplay audit call*"])


def test_audit_detects_an_edited_cassette(lab: Lab) -> None:
    lab.record()
    doc = json.loads(lab.cassette.read_text())
    approval = next(e for e in doc["events"] if e["type"] == "approval" and e["data"]["status"] == "granted")
    approval["data"]["by"] = "mallory"
    lab.cassette.write_text(json.dumps(doc, indent=1, sort_keys=True))
    result = audit(lab)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "integrity check" in out and "was edited" in out, out


def test_audit_flags_a_committed_effect_without_idempotency_key(lab: Lab) -> None:
    lab.monkeypatch.setenv("AGENT_VARIANT", "no_key")
    from test_modes_regression import script

    script(lab.llm)
    lab.pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-record=all").assert_outcomes(passed=1)
    result = audit(lab)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*audit of test_agent.py::test_support found 1 problem(s)*",
            "*seq * effect http.post: committed without an idempotency key*",
            "*make every write carry an Idempotency-Key and return a receipt*",
        ]
    )


def test_audit_flags_a_missing_blob(lab: Lab) -> None:
    # A conversation's requests are stored as small deltas, inline: a low limit sends payloads to blobs.
    lab.pytester.makepyprojecttoml("[tool.agentreplay]\ninline_limit = 64\n")
    lab.record()
    blobs = sorted((lab.pytester.path / "cassettes" / ".blobs").rglob("*.json"))
    assert blobs, "the recorded conversation should have blob-stored payloads"
    blobs[0].unlink()
    result = audit(lab)
    result.assert_outcomes(failed=1)
    assert blobs[0].stem[:12] in result.stdout.str()


def _cassette_roots() -> list[Path]:
    roots: list[Path] = []
    for folder in sorted(REPO.rglob("cassettes")):
        skip = any(p in (".git", ".venv", "node_modules", ".tox") for p in folder.parts)
        if folder.is_dir() and not skip and not any(r in folder.parents for r in roots):
            roots.append(folder)
    return roots


def _repository_cassettes() -> list[Path]:
    return sorted(p for root in _cassette_roots() for p in root.rglob("*.json") if ".blobs" not in p.parts)


def test_audit_renders_and_verifies_every_cassette_of_the_repository(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cassettes = _repository_cassettes()
    if not cassettes:
        pytest.skip("the repository holds no cassettes")
    problems: dict[str, list[str]] = {}
    for path in cassettes:
        loaded = load_cassette(path, mode="audit")
        found = loaded.verify()
        if found:
            problems[str(path.relative_to(REPO))] = found
        view = render_timeline(loaded.run, loaded.events, title=f"audit of {path.name}")
        assert view.count("\n") >= len(loaded.events) + 1
        assert "run.start" in view and "run.end" in view
    assert problems == {}
    assert cli_main(["verify", *map(str, _cassette_roots())]) == 0
    assert f"verify: {len(cassettes)} cassette(s) ok" in capsys.readouterr().out
