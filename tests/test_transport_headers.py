"""Issue 29 item 3: request headers the HTTP stack or the SDK's version chooses (``user-agent``,
``x-stainless-*``, ``accept-encoding``...) are left out of cassettes: comparison ignores them, and written
down they cost a model call about 500 bytes and churn on every SDK upgrade. What the agent chose stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.stored_form import (
    holds_transport_headers,
    is_transport_header,
    without_transport_headers,
)
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.events import Event, RunMeta

SDK_HEADERS = {
    "accept": "application/json",
    "accept-encoding": "gzip, deflate",
    "connection": "keep-alive",
    "host": "api.example.com",
    "user-agent": "OpenAI/Python 1.99.0",
    "x-stainless-package-version": "1.99.0",
    "x-stainless-retry-count": "0",
}
AGENT_HEADERS = {
    "content-type": "application/json",
    "authorization": "Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "anthropic-beta": "tools-2024-05-16",
    "idempotency-key": "order-7",
    "x-tenant": "acme",
}


@pytest.mark.parametrize(
    ("name", "transport"),
    [
        ("User-Agent", True),
        ("X-Stainless-Runtime-Version", True),
        ("x-goog-api-client", True),
        ("Accept-Encoding", True),
        ("traceparent", True),
        ("content-type", False),
        ("anthropic-beta", False),
        ("idempotency-key", False),
        ("authorization", False),
        ("x-stainless", False),  # the pattern is the prefix and a dash
        ("user-agent-extra", False),
    ],
)
def test_which_headers_are_transport_headers(name: str, transport: bool) -> None:
    assert is_transport_header(name) is transport


def _events(headers: dict[str, str], calls: int = 3) -> list[Event]:
    events = []
    for seq in range(calls):
        events.append(
            {
                "seq": seq,
                "run_id": "r",
                "type": "model.call",
                "actor": "model",
                "class": "decision",
                "ts": "2026-01-01T00:00:00Z",
                "data": {"provider": "openai", "turn": seq},
                "input_ref": {
                    "media_type": "application/vnd.agentreplay.http-request+json",
                    "inline": {
                        "method": "POST",
                        "url": f"https://api.example.com/v1/chat/completions?turn={seq}",
                        "headers": {**headers, "x-stainless-retry-count": str(seq)},
                        "body": {"content_type": "application/json", "json": {"model": "m", "turn": seq}},
                    },
                },
            }
        )
    return [Event.model_validate(e) for e in events]


def _headers_on_disk(path: Path) -> list[dict[str, str]]:
    events = json.loads(path.read_text())["events"]
    return [e["input_ref"]["inline"]["headers"] for e in events if "input_ref" in e]


def test_a_new_cassette_leaves_them_out_and_keeps_what_the_agent_chose(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    save_cassette(path, RunMeta(run_id="r"), _events({**SDK_HEADERS, **AGENT_HEADERS}))
    text = path.read_text()
    for name in SDK_HEADERS:
        assert f'"{name}"' not in text
    # Without the retry counter the requests' headers are the same: the later ones say so in one word.
    assert _headers_on_disk(path) == [{**AGENT_HEADERS, "authorization": "[REDACTED]"}, "@prev", "@prev"]
    loaded = load_cassette(path)  # the digests verify: they are over what is stored
    for event in loaded.events:
        assert event.input_ref is not None and isinstance(event.input_ref.inline, dict)
        assert event.input_ref.inline["headers"] == {**AGENT_HEADERS, "authorization": "[REDACTED]"}


def test_keep_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    save_cassette(
        path, RunMeta(run_id="r"), _events({**SDK_HEADERS, **AGENT_HEADERS}), transport_headers="keep"
    )
    stored = _headers_on_disk(path)
    assert stored[0]["user-agent"] == "OpenAI/Python 1.99.0"
    assert [s["x-stainless-retry-count"] for s in stored] == ["0", "1", "2"]


def test_a_cassette_that_holds_them_keeps_them_when_saved_again(tmp_path: Path) -> None:
    """An accepted change to one field stays that field's lines (and two digest lines), not a removal of
    every request's transport headers; ``drop`` sheds them."""
    path = tmp_path / "c.json"
    events = _events({**SDK_HEADERS, **AGENT_HEADERS})
    save_cassette(path, RunMeta(run_id="r"), events, transport_headers="keep")
    old_text = path.read_text()
    assert holds_transport_headers(json.loads(old_text)["events"])
    changed = [*events]
    changed[1] = Event.model_validate({**events[1].model_dump(by_alias=True), "ts": "2026-01-02T00:00:00Z"})
    save_cassette(path, RunMeta(run_id="r"), changed)
    new_text = path.read_text()
    lines = [a for a, b in zip(old_text.splitlines(), new_text.splitlines(), strict=True) if a != b]
    assert len(lines) == 3, lines
    save_cassette(path, RunMeta(run_id="r"), changed, transport_headers="drop")
    assert not holds_transport_headers(json.loads(path.read_text())["events"])
    assert all("user-agent" not in h for h in _headers_on_disk(path))


def test_a_value_outside_the_choices_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="auto, drop, keep"):
        save_cassette(tmp_path / "c.json", RunMeta(run_id="r"), _events({}), transport_headers="none")
    assert not (tmp_path / "c.json").exists()


def test_events_without_an_inline_request_are_left_as_they_are() -> None:
    event = {
        "type": "tool.call",
        "input_ref": {"media_type": "application/json", "inline": {"headers": {"host": "x"}}},
    }
    assert without_transport_headers(event) is event
    request = {"media_type": "application/vnd.agentreplay.http-request+json", "sha256": "ab" * 32}
    assert without_transport_headers({"input_ref": request})["input_ref"] is request
    shared = {"accept": "*/*", "x-tenant": "acme"}
    event = {
        "input_ref": {
            "media_type": "application/vnd.agentreplay.http-request+json",
            "inline": {"headers": shared},
        }
    }
    assert without_transport_headers(event)["input_ref"]["inline"]["headers"] == {"x-tenant": "acme"}
    assert shared == {"accept": "*/*", "x-tenant": "acme"}  # shared containers are not changed


SDK_TEST = """
import os
import openai

def test_chat(agent_replay):
    client = openai.OpenAI(base_url=os.environ["LLM_BASE"] + "/v1", api_key="sk-test", max_retries=0)
    for turn in range(2):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "turn %d" % turn}],
            extra_headers={"x-tenant": "acme"},
        )
        assert reply.choices[0].message.content == "answer %d" % turn
"""


def test_the_openai_sdk_recorded_and_replayed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    from servers import LLMServer, ModelReply

    pytester.makepyfile(test_chat=SDK_TEST)
    cassette = pytester.path / "cassettes" / "test_chat" / "test_chat.json"
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_BASE", llm.url)
        llm.queue("chat", *[ModelReply(text=f"answer {n}") for n in range(2)])
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        sent = llm.log[0]
    assert any(k.lower().startswith("x-stainless") for k in sent.headers), "the SDK sent none"
    text = cassette.read_text()
    assert "x-stainless" not in text and "user-agent" not in text and "OpenAI/Python" not in text
    first = json.loads(text)["events"][1]["input_ref"]["inline"]["headers"]
    assert first["x-tenant"] == "acme" and first["authorization"] == "[REDACTED]"
    # Replayed by an SDK that sends them: no drift, nothing reported about them.
    replay = pytester.runpytest("-rA")
    replay.assert_outcomes(passed=1)
    assert "user-agent" not in replay.stdout.str()

    # keep, from [tool.agentreplay]; a value outside the choices is a usage error naming them.
    pytester.makepyprojecttoml('[tool.agentreplay]\ntransport_headers = "keep"\n')
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_BASE", llm.url)
        llm.queue("chat", *[ModelReply(text=f"answer {n}") for n in range(2)])
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    assert '"x-stainless-package-version"' in cassette.read_text()
    pytester.makepyprojecttoml('[tool.agentreplay]\ntransport_headers = "strip"\n')
    bad = pytester.runpytest()
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*transport_headers*auto, drop, keep*"])


def test_a_cassette_whose_headers_sit_in_a_blob_keeps_them(tmp_path: Path) -> None:
    """A request over the inline limit is stored in the blob store, and the later ones take its headers
    ("same" / "@prev"): the headers are looked for there too."""
    path = tmp_path / "c.json"
    events = _events({**SDK_HEADERS, **AGENT_HEADERS}, calls=4)
    save_cassette(path, RunMeta(run_id="r"), events, transport_headers="keep", inline_limit=300)
    old_text = path.read_text()
    assert '"user-agent"' not in old_text, "the test needs the headers in a blob"
    blobs = sorted((tmp_path / ".blobs").rglob("*.json"))
    assert blobs
    changed = list(events)
    changed[1] = Event.model_validate({**events[1].model_dump(by_alias=True), "ts": "2026-01-02T00:00:00Z"})
    save_cassette(path, RunMeta(run_id="r"), changed, inline_limit=300)
    new_text = path.read_text()
    lines = [a for a, b in zip(old_text.splitlines(), new_text.splitlines(), strict=True) if a != b]
    assert len(lines) == 3, lines
    assert sorted((tmp_path / ".blobs").rglob("*.json")) == blobs
    loaded = load_cassette(path)
    assert all(loaded.payload(e.input_ref)["headers"]["user-agent"] for e in loaded.events if e.input_ref)


def test_headers_kept_whatever_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    headers = {**SDK_HEADERS, "x-request-id": "order-7", "x-stainless-os": "Linux"}
    save_cassette(
        path, RunMeta(run_id="r"), _events(headers), keep_headers={"X-Request-Id", "x-stainless-os"}
    )
    stored = _headers_on_disk(path)[0]
    assert stored["x-request-id"] == "order-7" and stored["x-stainless-os"] == "Linux"
    assert "user-agent" not in stored and "accept" not in stored
    # Saved again with the same kept names: still a cassette without the other transport headers.
    save_cassette(
        path, RunMeta(run_id="r"), _events(headers), keep_headers={"x-request-id", "x-stainless-os"}
    )
    assert "user-agent" not in _headers_on_disk(path)[0]


WRITES_TEST = """
import os
import httpx

def test_writes(agent_replay):
    keys = ["k-A", "k-B"] if os.environ.get("ORDER") != "reversed" else ["k-B", "k-A"]
    seen = {}
    with httpx.Client() as client:
        for key in keys:
            seen[key] = client.post(
                os.environ["LLM_BASE"] + "/tools/tickets", json={}, headers={"x-request-id": key}
            ).json()["id"]
    print("SEEN", sorted(seen.items()))
"""


def test_an_idempotency_header_named_like_a_transport_header_is_kept(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay matches writes by the project's idempotency header: it is stored even when its name is a
    transport header's (``x-request-id``), so writes sent in another order get their own receipts."""
    from servers import LLMServer

    pytester.makepyprojecttoml(
        '[tool.agentreplay]\nidempotency_header = "x-request-id"\n'
        '[tool.agentreplay.rules]\n"effect:@order" = "expected"\n'
    )
    pytester.makepyfile(test_writes=WRITES_TEST)
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_BASE", llm.url)
        recorded = pytester.runpytest("--agentreplay-record=all", "-s")
        recorded.assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_writes" / "test_writes.json"
    assert '"x-request-id": "k-A"' in cassette.read_text()
    seen = [line for line in recorded.outlines if line.startswith("SEEN")]
    monkeypatch.setenv("ORDER", "reversed")
    replayed = pytester.runpytest("-s")
    replayed.assert_outcomes(passed=1)
    assert [line for line in replayed.outlines if line.startswith("SEEN")] == seen


ACCEPT_TEST = """
import os
import httpx

def test_get(agent_replay):
    accept = os.environ.get("ACCEPT", "application/json")
    httpx.get(os.environ["LLM_BASE"] + "/tools/weather?city=Paris", headers={"accept": accept})
"""


def test_a_project_rule_on_a_transport_header_is_warned_about(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cassettes leave the header out, so the rule would compare nothing: the session says so at start-up,
    and replay compares the header only in cassettes that keep transport headers."""
    from servers import LLMServer

    rule = '[tool.agentreplay.rules]\n"http:input_ref.headers.accept" = "regression"\n'
    pytester.makepyfile(test_get=ACCEPT_TEST)
    with LLMServer() as llm:
        monkeypatch.setenv("LLM_BASE", llm.url)
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
        cassette = pytester.path / "cassettes" / "test_get" / "test_get.json"
        assert '"accept"' not in cassette.read_text()
        # The rule added after the recording: warned about, and no regression from a header never recorded.
        pytester.makepyprojecttoml(rule)
        monkeypatch.setenv("ACCEPT", "application/xml")
        replayed = pytester.runpytest()
        replayed.assert_outcomes(passed=1, warnings=1)
        replayed.stdout.fnmatch_lines(
            ['*"http:input_ref.headers.accept" compares the transport header accept*']
        )
        # With transport_headers = "keep" the header is recorded and compared, and nothing is warned about.
        pytester.makepyprojecttoml('[tool.agentreplay]\ntransport_headers = "keep"\n' + rule)
        monkeypatch.delenv("ACCEPT")
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    assert '"accept": "application/json"' in cassette.read_text()
    pytester.runpytest().assert_outcomes(passed=1)
    monkeypatch.setenv("ACCEPT", "application/xml")
    drifted = pytester.runpytest()
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(["*headers.accept*"])


def test_import_vcr_reads_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentreplay.cli import main

    vcr = tmp_path / "vcr" / "test_flow.yaml"
    vcr.parent.mkdir()
    interaction = {
        "request": {
            "method": "GET",
            "uri": "https://crm.example.com/customers/7",
            "body": None,
            "headers": {"User-Agent": ["python-requests/2.32"], "X-Tenant": ["acme"]},
        },
        "response": {
            "status": {"code": 200, "message": "OK"},
            "headers": {"Content-Type": ["application/json"]},
            "body": {"string": '{"name": "Ada"}'},
        },
    }
    vcr.write_text(json.dumps({"interactions": [interaction], "version": 1}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "imported" / "test_flow.json"

    def imported_headers() -> dict[str, str]:
        assert main(["import-vcr", str(vcr.parent), "--out", str(out.parent)]) == 0
        return _headers_on_disk(out)[0]

    assert imported_headers() == {"x-tenant": "acme"}
    (tmp_path / "pyproject.toml").write_text('[tool.agentreplay]\ntransport_headers = "keep"\n')
    out.unlink()
    assert imported_headers() == {"user-agent": "python-requests/2.32", "x-tenant": "acme"}
    (tmp_path / "pyproject.toml").write_text('[tool.agentreplay]\ntransport_headers = "no"\n')
    assert main(["import-vcr", str(vcr.parent), "--out", str(out.parent)]) == 2


def test_the_fast_paths_leave_out_what_the_header_walk_leaves_out() -> None:
    # Every header a transport header (a plain GET's) gives no headers without a walk; no headers at all
    # hold none without asking which names are transport headers.
    media = "application/vnd.agentreplay.http-request+json"
    keep = frozenset({"idempotency-key", "user-agent"})
    for headers in [
        {},
        dict(SDK_HEADERS),
        {**SDK_HEADERS, **AGENT_HEADERS},
        {"Accept": "*/*", "User-Agent": "x", "X-Stainless-OS": "Linux"},
        {"content-type": "application/json"},
        {"user-agent": "kept", "accept": "*/*"},
    ]:
        for names in (frozenset(), keep):
            event = {"type": "http", "input_ref": {"media_type": media, "inline": {"headers": headers}}}
            walked = {k: v for k, v in headers.items() if not is_transport_header(k) or k.lower() in names}
            out = without_transport_headers(event, names)
            assert out["input_ref"]["inline"]["headers"] == walked
            assert (out is event) is (walked == headers)
            assert holds_transport_headers([event], keep=names) is (walked != headers)


def test_a_request_left_the_same_as_its_twins_is_the_twins_record() -> None:
    # ``like``: the recorded event at a replayed one's place. Where the request left is the same JSON as
    # the twin's, the result holds the twin's record itself; else what leaving the headers out gives. Either
    # way, the same JSON as without ``like``.
    from pytest_agentreplay.core.canonical import same_json

    media = "application/vnd.agentreplay.http-request+json"
    body = {"content_type": "application/json", "json": {"n": 1, "flag": True}}

    def event(headers: dict[str, str], **inline: object) -> dict[str, object]:
        request = {"method": "POST", "url": "http://svc/x", "headers": headers, "body": body, **inline}
        return {"type": "http", "ts": "t", "input_ref": {"media_type": media, "inline": request}}

    kept = {"content-type": "application/json", "x-tenant": "acme"}
    twin = event(dict(kept))
    same = [
        event({**SDK_HEADERS, **kept}),
        event(dict(kept)),
        event({**kept, "user-agent": "another SDK"}),
        event(
            {**SDK_HEADERS, **kept},
            body={"json": {"flag": True, "n": 1}, "content_type": body["content_type"]},
        ),
    ]
    other = [
        event({**SDK_HEADERS, "content-type": "application/json"}),  # a header the twin holds left out
        event({**SDK_HEADERS, **kept, "x-extra": "1"}),  # one it does not hold
        event({**SDK_HEADERS, **kept, "x-tenant": "other"}),
        event({**SDK_HEADERS, **kept}, url="http://svc/y"),
        event({**SDK_HEADERS, **kept}, body={**body, "json": {"n": 1.0, "flag": True}}),  # 1.0 is not 1
        event({**SDK_HEADERS, **kept}, body={**body, "json": {"n": 1, "flag": 1}}),  # nor 1 true
        event({**SDK_HEADERS, **kept}, timeout=3),
        {**event(kept), "input_ref": {**event(kept)["input_ref"], "data_class": "personal"}},
    ]
    for replayed in [*same, *other]:
        plain = without_transport_headers(replayed)
        for like in (twin, {"type": "http"}, {"input_ref": {"media_type": media, "sha256": "ab" * 32}}):
            out = without_transport_headers(replayed, like=like)
            assert same_json(out, plain), (out, plain)
            shared = out["input_ref"] is twin["input_ref"]
            assert shared is (like is twin and any(replayed is s for s in same)), replayed
    # A name ``keep`` names stays, and counts.
    keep = frozenset({"user-agent"})
    agent = event({**kept, "user-agent": "x"})
    assert without_transport_headers(agent, keep, like=twin)["input_ref"] is not twin["input_ref"]
    assert without_transport_headers(agent, keep, like=agent) is agent
