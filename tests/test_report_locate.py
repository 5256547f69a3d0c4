"""Issue 16: the Markdown drift report points at the cassette line of each drifted field, through the
stored form (requests stored as deltas over earlier ones, payloads in the blob store)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.events import Event, RunMeta
from pytest_agentreplay.diff.compare import compare_histories
from pytest_agentreplay.report import build_report, render_report
from pytest_agentreplay.report.locate import CassetteIndex, Locator
from pytest_agentreplay.report.status import Status, TestStatus

REQUEST = "application/vnd.agentreplay.http-request+json"
RESPONSE = "application/vnd.agentreplay.http-response+json"
URL = "https://api.example.com/v1/chat/completions"
SYSTEM = "You are a careful support agent. " * 4
MESSAGES = ("input_ref", "body", "json", "messages")


def _call(seq: int, messages: list[dict[str, Any]], url: str = URL) -> dict[str, Any]:
    return {
        "run_id": "r",
        "seq": seq,
        "ts": "t",
        "type": "model.call",
        "actor": "model",
        "class": "decision",
        "data": {"status": 200},
        "input_ref": {
            "media_type": REQUEST,
            "inline": {
                "method": "POST",
                "url": url,
                "headers": {"content-type": "application/json", "x-retry": str(seq % 2)},
                "body": {
                    "content_type": "application/json",
                    "json": {"model": "m", "messages": messages, "temperature": 0},
                },
            },
        },
        "output_ref": {
            "media_type": RESPONSE,
            "inline": {
                "status": 200,
                "headers": {"content-type": "application/json"},
                "body": {"content_type": "application/json", "json": {"a": seq}, "raw": f'{{"a": {seq}}}'},
            },
        },
    }


def _conversation(calls: int, system: str = SYSTEM, url: str = URL) -> list[dict[str, Any]]:
    """Each call resends the whole history plus one new question (and then gets an answer)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    events = []
    for n in range(calls):
        messages = [*messages, {"role": "user", "content": f"question {n}: where is my order?"}]
        events.append(_call(n, messages, url))
        messages = [*messages, {"role": "assistant", "content": f"answer {n}: on its way."}]
    return events


def _save(tmp_path: Path, events: list[dict[str, Any]], inline_limit: int = 1 << 20) -> Path:
    path = tmp_path / "cassettes" / "chat.json"
    save_cassette(
        path, RunMeta(run_id="r"), [Event.model_validate(e) for e in events], inline_limit=inline_limit
    )
    return path


def _event_spans(text: str) -> list[tuple[int, int]]:
    """(first, last) line of each event of a cassette as ``save_cassette`` writes it (``dumps_cassette``:
    one space per level, so an event of the ``events`` list opens and closes at two spaces)."""
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines, 1) if line == "  {"]
    ends = [n for n, line in enumerate(lines, 1) if line in ("  },", "  }")]
    return list(zip(starts, ends, strict=True))


def _event_of(text: str, line: int) -> int:
    return next(i for i, (a, b) in enumerate(_event_spans(text)) if a <= line <= b)


def _line(text: str, number: int) -> str:
    return text.splitlines()[number - 1].strip()


def test_the_conversation_is_stored_as_deltas(tmp_path: Path) -> None:
    doc = json.loads(_save(tmp_path, _conversation(5)).read_text(encoding="utf-8"))
    deltas = [e["input_ref"]["inline"].get("delta") for e in doc["events"]]
    assert deltas[0] is None and all(d is not None for d in deltas[1:])
    assert deltas[3]["json"]["extends"] == {"messages": 6}


def test_a_kept_message_points_at_the_call_that_stored_it(tmp_path: Path) -> None:
    text = _save(tmp_path, _conversation(5)).read_text(encoding="utf-8")
    # Call 4 (seq 3) keeps the system prompt from its base, which keeps it from its own: call 1 stores it.
    line = CassetteIndex(text).locate(3, (*MESSAGES, "[0]", "content"))
    assert line is not None
    assert _line(text, line) == f'"content": {json.dumps(SYSTEM)},'
    assert _event_of(text, line) == 0
    # A whole kept item: its line (a short message stands on one), in call 1 as well.
    item = CassetteIndex(text).locate(4, (*MESSAGES, "[1]"))
    assert item is not None and _event_of(text, item) == 0
    assert _line(text, item).rstrip(",") == '{"content": "question 0: where is my order?", "role": "user"}'
    # Keys the delta takes from its base (`same`) live there too.
    model = CassetteIndex(text).locate(4, ("input_ref", "body", "json", "model"))
    assert model is not None and _line(text, model) == '"model": "m",' and _event_of(text, model) == 0


def test_a_stored_new_message_points_at_its_own_line(tmp_path: Path) -> None:
    text = _save(tmp_path, _conversation(5)).read_text(encoding="utf-8")
    # Call 3 (seq 2) stores messages[4:] (answer 1, question 2); messages[5] is its stored item 1.
    line = CassetteIndex(text).locate(2, (*MESSAGES, "[5]", "content"))
    assert line is not None and _event_of(text, line) == 2
    assert '"content": "question 2: where is my order?"' in _line(text, line)
    answer = CassetteIndex(text).locate(2, (*MESSAGES, "[4]", "role"))
    assert (
        answer is not None and _event_of(text, answer) == 2 and '"role": "assistant"' in _line(text, answer)
    )


def test_headers_kept_from_the_base_and_changed_ones(tmp_path: Path) -> None:
    text = _save(tmp_path, _conversation(5)).read_text(encoding="utf-8")
    kept = CassetteIndex(text).locate(4, ("input_ref", "headers", "content-type"))
    assert kept is not None and _event_of(text, kept) == 0
    changed = CassetteIndex(text).locate(3, ("input_ref", "headers", "x-retry"))
    assert changed is not None and _event_of(text, changed) == 3 and '"x-retry": "1"' in _line(text, changed)


def test_response_fields_and_event_fields(tmp_path: Path) -> None:
    text = _save(tmp_path, _conversation(3)).read_text(encoding="utf-8")
    # A JSON response kept byte for byte is stored as `raw` only: its line.
    raw = CassetteIndex(text).locate(1, ("output_ref", "body", "json", "a"))
    assert raw is not None and '"raw": "{\\"a\\": 1}"' in _line(text, raw) and _event_of(text, raw) == 1
    status = CassetteIndex(text).locate(2, ("data", "status"))
    assert status is not None and '"status": 200' in _line(text, status) and _event_of(text, status) == 2
    # A field the file does not hold: the nearest enclosing line (the object the update adds it to).
    absent = CassetteIndex(text).locate(2, ("data", "reason"))
    assert absent is not None and _line(text, absent).startswith('"data": {')
    whole = CassetteIndex(text).locate(1, ("@presence",))
    assert whole == _event_spans(text)[1][0]


def test_a_blob_stored_payload_points_at_its_sha256(tmp_path: Path) -> None:
    events = _conversation(3)
    big = "x" * 3000
    for event in events[1:]:  # call 2 adds a large message: that request goes to the blob store
        event["input_ref"]["inline"]["body"]["json"]["messages"][3]["content"] += big
    path = _save(tmp_path, events, inline_limit=2000)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert "sha256" in doc["events"][1]["input_ref"] and "inline" in doc["events"][2]["input_ref"]
    index = Locator().index(path)
    assert index is not None
    line = index.locate(1, (*MESSAGES, "[3]", "content"))
    assert line is not None and _line(text, line).startswith('"sha256": "') and _event_of(text, line) == 1
    # Call 3 keeps that message from the blob-stored request: its sha256 line too ...
    kept = index.locate(2, (*MESSAGES, "[3]", "content"))
    assert kept == line
    # ... and the system prompt, which the blob (a delta itself) keeps from call 1: call 1's line.
    system = index.locate(2, (*MESSAGES, "[0]", "content"))
    assert system is not None and _event_of(text, system) == 0
    # Without the blob store the count of earlier requests is unknown: the nearest line in the event.
    blind = CassetteIndex(text).locate(2, (*MESSAGES, "[0]", "content"))
    assert blind is not None and _event_of(text, blind) == 2


def test_unknown_event_and_unreadable_files(tmp_path: Path) -> None:
    path = _save(tmp_path, _conversation(2))
    text = path.read_text(encoding="utf-8")
    assert CassetteIndex(text).locate(7, ("data",)) is None
    assert CassetteIndex("not json {").locate(0, ("data",)) is None
    assert CassetteIndex('{"events": "odd"}').locate(0, ()) is None
    assert CassetteIndex('{"events": [{"seq": 0, "data": 5}]}').locate(0, ("data", "x", "[2]")) == 1
    locator = Locator()
    assert locator.locate(tmp_path / "absent.json", 0, ("data",)) is None
    assert locator.locate(tmp_path, 0, ("data",)) is None  # a directory
    assert locator.locate(path, 1, ("data", "status")) == CassetteIndex(text).locate(1, ("data", "status"))


def test_the_index_follows_the_file(tmp_path: Path) -> None:
    path = _save(tmp_path, _conversation(2))
    locator = Locator()
    first = locator.locate(path, 1, ("data", "status"))
    path.write_text('{"events": [{"seq": 1, "data": {"status": 200}}]}\n', encoding="utf-8")
    assert locator.locate(path, 1, ("data", "status")) == 1 != first


def _leaves(value: Any, tokens: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*tokens, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*tokens, f"[{i}]"))]
    return [(tokens, value)]


def _interleaved() -> list[dict[str, Any]]:
    a, b = _conversation(4, "Agent A. "), _conversation(4, "Agent B. ", URL + "?b")
    events = [e for pair in zip(a, b, strict=True) for e in pair]
    for seq, event in enumerate(events):
        event["seq"] = seq
    return events


@pytest.mark.parametrize("events", [_conversation(6), _interleaved()], ids=["one", "interleaved"])
def test_every_recorded_payload_value_is_on_its_line(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    path = _save(tmp_path, events)
    text = path.read_text(encoding="utf-8")
    index = CassetteIndex(text)
    checked = 0
    for event in load_cassette(path).event_dicts():
        for name in ("input_ref", "output_ref"):
            for tokens, value in _leaves(event[name]["inline"], (name,)):
                line = index.locate(event["seq"], tokens)
                assert line is not None
                held = _line(text, line)
                if tokens[-2:-1] == ("json",) and name == "output_ref":
                    assert '"raw": ' in held
                else:
                    # The line of the field: its own, or the one its small object stands on.
                    assert f'"{tokens[-1]}": {json.dumps(value)}' in held, (tokens, held)
                checked += 1
    assert checked > 100


def test_differences_of_a_real_comparison(tmp_path: Path) -> None:
    path = _save(tmp_path, _conversation(5))
    text = path.read_text(encoding="utf-8")
    recorded = load_cassette(path).event_dicts()
    replayed = copy.deepcopy(recorded)
    replayed[3]["input_ref"]["inline"]["body"]["json"]["messages"][0]["content"] = "You are terse."
    replayed[2]["input_ref"]["inline"]["body"]["json"]["messages"][5]["content"] = "question 2: refund?"
    drift = compare_histories(recorded, replayed)
    found = {(d.seq_recorded, d.path): d for d in drift.differences}
    system = found[(3, "input_ref.body.json.messages[0].content")]
    question = found[(2, "input_ref.body.json.messages[5].content")]
    assert system.seq_recorded is not None and question.seq_recorded is not None
    line = CassetteIndex(text).locate(system.seq_recorded, system.path_tokens)
    assert line is not None and _event_of(text, line) == 0 and SYSTEM in _line(text, line)
    line = CassetteIndex(text).locate(question.seq_recorded, question.path_tokens)
    assert line is not None and _event_of(text, line) == 2 and "question 2: where" in _line(text, line)

    # The Markdown report of that drift: each difference at its line.
    status = TestStatus(
        "test_chat.py::test_chat",
        str(path),
        Status.DRIFTED,
        "regression",
        regressions=len(drift.regressions),
        drift=drift,
    )
    markdown = render_report(".md", build_report([status]))
    assert "| cassette line |" in markdown
    places = re.findall(r"<code>([^<]*chat\.json):(\d+)</code>", markdown)
    assert [int(n) for _, n in places] == [
        CassetteIndex(text).locate(2, question.path_tokens),
        CassetteIndex(text).locate(3, system.path_tokens),
    ]


AGENT = """
from pytest_agentreplay import tool, record_policy

@tool(name="get")
def get(i):
    return {"i": i, "body": "item %d" % i}

def run(note):
    record_policy("init", "ok", version="1")
    for i in range(3):
        get(i)
    record_policy("note", note, version="1")
    record_policy("done", "ok", version="1")
"""


def _project(pytester: pytest.Pytester, note: str) -> None:
    pytester.makepyfile(agentlib=AGENT)
    pytester.makepyfile(
        test_flow=f"import agentlib\n\ndef test_a(agent_replay):\n    agentlib.run({note!r})\n"
    )


def test_the_markdown_report_names_the_line_of_the_recorded_value(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    _project(pytester, "first note")
    pytester.runpytest("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    _project(pytester, "second note")
    result = pytester.runpytest("--agentreplay-report=report.md", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    markdown = (pytester.path / "report.md").read_text(encoding="utf-8")
    places = re.findall(r"cassettes/test_flow/test_a\.json:(\d+)", markdown)
    assert len(places) == 1, markdown
    row = next(line for line in markdown.splitlines() if "test_a.json:" in line)
    assert "<code>data.verdict</code>" in row and "first note" in row
    cassette = (pytester.path / "cassettes" / "test_flow" / "test_a.json").read_text(encoding="utf-8")
    assert '"verdict": "first note"' in cassette.splitlines()[int(places[0]) - 1]
