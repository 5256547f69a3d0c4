"""Saving a recorded conversation costs its messages once (``cassette.write``): each call's request resends
the whole history, as shared objects (``http.recording.share_repeats``), and the redaction, the secret scan
and the request hashes of the save look at each message once, with or without a project redaction hook. A
hook changes a copy of its own event: a message the next requests share is not changed under them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.read import LoadedCassette, load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core import canonical
from pytest_agentreplay.core.canonical import request_digest
from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
from pytest_agentreplay.core.events import Event, RunMeta
from pytest_agentreplay.redaction import Redactor

URL = "https://api.example.com/v1/chat/completions"


def _conversation(calls: int) -> list[Event]:
    """What a recording holds: every request's messages are the objects of the request before it."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful. " * 20}]
    events = []
    for n in range(calls):
        messages = [*messages, {"role": "user", "content": f"question {n}: " + "where is it? " * 8}]
        body = {"model": "m", "messages": messages, "temperature": 0}
        events.append(
            Event.model_validate(
                {
                    "run_id": "r",
                    "seq": n,
                    "ts": "2025-01-01T00:00:00Z",
                    "type": "model.call",
                    "actor": "model",
                    "class": "decision",
                    "data": {"provider": "openai", "request_hash": request_digest(body), "status": 200},
                    "input_ref": {
                        "data_class": "personal",
                        "media_type": HTTP_REQUEST_MEDIA_TYPE,
                        "inline": {
                            "method": "POST",
                            "url": URL,
                            "headers": {"content-type": "application/json"},
                            "body": {"content_type": "application/json", "json": body},
                        },
                    },
                    "output_ref": {
                        "media_type": HTTP_RESPONSE_MEDIA_TYPE,
                        "inline": {
                            "status": 200,
                            "headers": {},
                            "body": {"content_type": "application/json"},
                        },
                    },
                }
            )
        )
        messages = [*messages, {"role": "assistant", "content": f"answer {n}: " + "on its way. " * 8}]
    return events


def _messages(event: Event, loaded: LoadedCassette | None = None) -> list[dict[str, Any]]:
    assert event.input_ref is not None
    payload = loaded.payload(event.input_ref) if loaded is not None else event.input_ref.inline
    messages: list[dict[str, Any]] = payload["body"]["json"]["messages"]
    return messages


class _Counts:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.serialised = 0  # messages serialised to be redacted or hashed
        redact_by_content = Redactor._redact_element_by_content
        dumps = canonical.dumps_compact

        def counted_redact(redactor: Redactor, value: Any, keys: bool) -> Any:
            self.serialised += 1
            return redact_by_content(redactor, value, keys)

        def counted_dumps(value: Any) -> str:
            self.serialised += 1
            return dumps(value)

        monkeypatch.setattr(Redactor, "_redact_element_by_content", counted_redact)
        monkeypatch.setattr(canonical, "dumps_compact", counted_dumps)


def _save(tmp_path: Path, events: list[Event], hook: Any = None) -> Path:
    path = tmp_path / "cassettes" / "test_mod" / f"test_{len(events)}.json"
    save_cassette(path, RunMeta(run_id="r"), events, redactor=Redactor(), extra_redact=hook)
    return path


@pytest.mark.parametrize("hooked", [False, True], ids=["no-hook", "hook"])
def test_each_message_is_serialised_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hooked: bool
) -> None:
    def hook(event: dict[str, Any]) -> dict[str, Any]:
        return event

    figures = []
    for calls in (20, 40):
        events = _conversation(calls)
        assert _messages(events[-1])[0] is _messages(events[0])[0]  # shared, as recorded
        counts = _Counts(monkeypatch)
        path = _save(tmp_path, events, hook if hooked else None)
        monkeypatch.undo()
        distinct = 2 * calls  # the system prompt, then a question and an answer per call
        # A few passes per distinct message, and the body's other keys and values per call (about 400 at
        # 20 calls); a save that serialised every resent message again counts about three times as many.
        assert counts.serialised <= 6 * distinct + 12 * calls, (calls, counts.serialised)
        figures.append(counts.serialised)
        loaded = load_cassette(path)
        assert [_messages(e, loaded) for e in loaded.events] == [_messages(e) for e in events]
    assert figures[1] <= 2.2 * figures[0], figures


def test_a_hook_changes_its_own_event_not_the_messages_later_requests_share(tmp_path: Path) -> None:
    def hook(event: dict[str, Any]) -> dict[str, Any]:
        if event["seq"] == 3:
            event["input_ref"]["inline"]["body"]["json"]["messages"][1]["content"] = "changed by the hook"
        return event

    events = _conversation(6)
    path = _save(tmp_path, events, hook)
    loaded = load_cassette(path)
    stored = [_messages(e, loaded)[1]["content"] for e in loaded.events]
    original = _messages(events[0])[1]["content"]
    assert stored == [original, original, original, "changed by the hook", original, original]
    assert _messages(events[3])[1]["content"] == original  # the recorded events are left as they were


def test_a_conftest_redaction_hook_reaches_every_call_of_a_recorded_conversation(
    pytester: pytest.Pytester,
) -> None:
    from servers import LLMServer

    with LLMServer() as server:
        pytester.makeconftest(
            """
            def pytest_agentreplay_redact_event(event):
                ref = event.get("input_ref") or {}
                body = ((ref.get("inline") or {}).get("body") or {}).get("json") or {}
                for message in body.get("messages", []):
                    message["content"] = message["content"].replace("4711-0815", "[order]")
                return event
            """
        )
        pytester.makepyfile(
            test_chat=textwrap.dedent(
                f"""
                import httpx

                def test_chat(agent_replay):
                    messages = [{{"role": "system", "content": "Customer order 4711-0815."}}]
                    with httpx.Client() as client:
                        for turn in range(4):
                            messages.append({{"role": "user", "content": f"question {{turn}}"}})
                            reply = client.post(
                                "{server.url}/v1/chat/completions",
                                json={{"model": "gpt-4o-mini", "messages": messages}},
                            )
                            messages.append(reply.json()["choices"][0]["message"])
                """
            )
        )
        pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_chat" / "test_chat.json"
    assert "[order]" in cassette.read_text()
    assert "4711-0815" not in "".join(
        p.read_text() for p in pytester.path.rglob("cassettes/**/*") if p.is_file()
    )
    loaded = load_cassette(cassette)
    calls = [e for e in loaded.events if e.type == "model.call"]
    assert len(calls) == 4
    assert all(_messages(e, loaded)[0]["content"] == "Customer order [order]." for e in calls)
    pytester.runpytest().assert_outcomes(passed=1)  # replayed with the server gone


def test_a_conversation_captured_outside_pytest_is_saved_at_linear_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from servers import LLMServer

    from pytest_agentreplay import capture_run

    figures = []
    with LLMServer() as server:
        for calls in (10, 20):
            counts = _Counts(monkeypatch)
            path = tmp_path / f"capture_{calls}.json"
            with capture_run(path, run_id=f"run-{calls}"), httpx.Client() as client:
                messages = [{"role": "system", "content": "You are careful. " * 20}]
                for turn in range(calls):
                    messages.append({"role": "user", "content": f"question {turn}: " + "where is it? " * 8})
                    reply = client.post(
                        f"{server.url}/v1/chat/completions", json={"model": "m", "messages": messages}
                    )
                    messages.append(reply.json()["choices"][0]["message"])
            monkeypatch.undo()
            figures.append(counts.serialised)
            calls_saved = [e for e in load_cassette(path).events if e.type == "model.call"]
            assert len(calls_saved) == calls
    assert figures[1] <= 2.2 * figures[0], figures
