"""The replayed side of the comparison (``replay.replayed_history``): what redacting it whole would give,
at a cost that does not grow with the recorded conversation when the requests differ only by headers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.core.canonical import request_digest, same_json
from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE, REDACTED
from pytest_agentreplay.core.events import Event, ToolInfo, event_to_shared_dict
from pytest_agentreplay.http.recording import served
from pytest_agentreplay.redaction import Redactor
from pytest_agentreplay.replay.replayed_history import RecordedSide, ReplayedHistory

SECRET = "sk-proj-" + "A1b2C3d4" * 6


def _headers(**extra: str) -> dict[str, str]:
    return {"accept-encoding": "gzip, deflate", "content-type": "application/json", **extra}


def _model_call(seq: int, turns: int, headers: dict[str, str], latency: float = 1.0) -> Event:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn} " + "." * 40})
        messages.append({"role": "assistant", "content": f"answer {turn}, token {SECRET}"})
    body = {"model": "gpt-4o-mini", "messages": messages}
    return Event.model_validate(
        {
            "run_id": "r",
            "seq": seq,
            "ts": f"t{seq}",
            "type": "model.call",
            "actor": "model",
            "class": "decision",
            "data": {"provider": "openai", "request_hash": request_digest(body), "latency_ms": latency},
            "input_ref": {
                "data_class": "personal",
                "media_type": HTTP_REQUEST_MEDIA_TYPE,
                "inline": {
                    "method": "POST",
                    "url": "https://api.openai.com/v1/chat/completions",
                    "headers": headers,
                    "body": {"content_type": "application/json", "json": body},
                },
            },
        }
    )


def _read(seq: int, headers: dict[str, str], latency: float = 1.0) -> Event:
    return Event.model_validate(
        {
            "run_id": "r",
            "seq": seq,
            "ts": f"t{seq}",
            "type": "http",
            "actor": "tool",
            "class": "input",
            "data": {"method": "GET", "status": 200, "latency_ms": latency},
            "input_ref": {
                "media_type": HTTP_REQUEST_MEDIA_TYPE,
                "inline": {
                    "method": "GET",
                    "url": f"http://svc/items/{seq}",
                    "headers": headers,
                    "body": None,
                },
            },
            "output_ref": {"inline": {"status": 200, "headers": {}, "body": {"content_type": "text/plain"}}},
        }
    )


def _history(headers: dict[str, str], latency: float = 1.0) -> list[Event]:
    events: list[Event] = []
    for turn in range(6):
        events.append(_read(len(events), headers, latency))
        events.append(_model_call(len(events), turn + 1, headers, latency))
    return events


def _whole(events: list[Event], redactor: Redactor) -> list[dict[str, Any]]:
    # What a cassette holds: every event redacted whole when it was saved.
    return [redactor.redact(copy.deepcopy(event_to_shared_dict(e))) for e in events]


@pytest.mark.parametrize(
    "replayed_headers",
    [
        _headers(),
        _headers(**{"accept-encoding": "gzip, deflate, br, zstd"}),
        _headers(authorization=f"Bearer {SECRET}"),
        {"content-type": "application/json"},
    ],
    ids=["same", "other-encoding", "secret-header", "header-dropped"],
)
def test_the_replayed_side_is_what_redacting_it_whole_gives(replayed_headers: dict[str, str]) -> None:
    redactor = Redactor()
    recorded = _whole(_history(_headers()), redactor)
    replayed = _history(replayed_headers, latency=2.5)
    out = ReplayedHistory(replayed, recorded, Redactor()).compared
    expected = _whole(replayed, Redactor())
    assert len(out) == len(expected)
    for got, want in zip(out, expected, strict=True):
        assert same_json(got, want), (got, want)
    assert SECRET not in repr(out)


@pytest.mark.parametrize(
    "replayed_headers",
    [
        _headers(),
        _headers(**{"accept-encoding": "gzip, deflate, br, zstd", "user-agent": "another SDK"}),
        _headers(authorization=f"Bearer {SECRET}"),
        {"content-type": "application/json"},
        {"accept-encoding": "gzip"},
    ],
    ids=["same", "other-transport", "secret-header", "header-dropped", "content-type-dropped"],
)
def test_against_a_recording_without_transport_headers_the_compared_side_is_the_stripped_one_redacted(
    replayed_headers: dict[str, str],
) -> None:
    # What a save writes leaves the transport headers out (``cassette.stored_form``): the compared side is
    # the replayed events with them left out, redacted; a request then the same as the recorded one at its
    # place is that recorded record itself.
    from pytest_agentreplay.cassette.stored_form import without_transport_headers

    recorded = [without_transport_headers(e) for e in _whole(_history(_headers()), Redactor())]
    replayed = _history(replayed_headers, latency=2.5)
    out = ReplayedHistory(replayed, recorded, Redactor()).compared
    redactor = Redactor()
    expected = [
        redactor.redact(without_transport_headers(copy.deepcopy(event_to_shared_dict(e)))) for e in replayed
    ]
    assert [same_json(got, want) for got, want in zip(out, expected, strict=True)] == [True] * len(out)
    assert SECRET not in repr(out)
    shared = [got["input_ref"] is rec["input_ref"] for got, rec in zip(out, recorded, strict=True)]
    kept = {k: v for k, v in replayed_headers.items() if k in ("content-type", "authorization")}
    assert all(shared) is (kept == {"content-type": "application/json"}), shared


def test_a_request_sent_with_other_headers_reuses_the_recorded_body() -> None:
    redactor = Redactor()
    recorded = _whole(_history(_headers()), redactor)
    replayed = _history(_headers(**{"accept-encoding": "gzip, deflate, br, zstd"}))
    out = ReplayedHistory(replayed, recorded, redactor).compared
    calls = [(got, rec) for got, rec in zip(out, recorded, strict=True) if got["type"] == "model.call"]
    assert calls
    for got, rec in calls:
        # The very recorded (redacted) body: the history was not redacted again.
        assert got["input_ref"]["inline"]["body"] is rec["input_ref"]["inline"]["body"]
        assert got["input_ref"]["inline"]["headers"]["accept-encoding"] == "gzip, deflate, br, zstd"


def test_a_changed_body_is_redacted_again() -> None:
    redactor = Redactor()
    recorded = _whole(_history(_headers()), redactor)
    replayed = _history(_headers())
    changed = _model_call(1, 2, _headers())  # another conversation at the first call's place
    replayed[1] = changed
    out = ReplayedHistory(replayed, recorded, Redactor()).compared
    assert out[1]["input_ref"]["inline"]["body"] is not recorded[1]["input_ref"]["inline"]["body"]
    assert same_json(out[1], _whole([changed], Redactor())[0])
    assert SECRET not in repr(out[1])


def test_a_secret_learnt_mid_run_is_replaced_in_a_conversations_later_requests() -> None:
    # The first call's headers repeat a password in free text before any event names it a secret; a read
    # then sends it under a secret header. The later call's (same) headers must be redacted with what was
    # learnt, as the save did, not reused from before.
    password = "hunter2-Rosebud!42"
    noted = _headers(**{"x-note": f"pw {password}"})
    keyed = _headers(**{"x-api-key": password})
    history = [_model_call(0, 1, noted), _read(1, keyed), _model_call(2, 1, noted)]
    recorded = _whole(history, Redactor())
    out = ReplayedHistory(history, recorded, Redactor()).compared
    assert password not in repr(out[1:])
    assert same_json(out[2], recorded[2])


# -- the redacted views: one boundary for the save, the matcher, the comparison and an update ---------------


def test_a_redacted_event_is_made_by_the_redaction_module_and_never_changed() -> None:
    import dataclasses

    from pytest_agentreplay.redaction import RedactedEvent, redact_event

    view = redact_event(event_to_shared_dict(_read(0, _headers())), Redactor())
    with pytest.raises(TypeError, match="redact_event"):
        RedactedEvent(view.doc, view.doc, None, Redactor(), 0, object())  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.doc = {}  # type: ignore[misc]


def test_a_view_made_before_the_run_learnt_a_secret_is_stale_and_redone() -> None:
    from pytest_agentreplay.redaction import redact_event

    password = "hunter2-Rosebud!42"
    redactor = Redactor()
    early = redact_event(event_to_shared_dict(_read(0, _headers(**{"x-note": f"pw {password}"}))), redactor)
    assert early.fresh(redactor) and early.current(redactor) is early
    assert password in repr(early.doc)  # nothing named it a secret yet
    redact_event(event_to_shared_dict(_read(1, _headers(**{"x-service-token": password}))), redactor)
    assert not early.fresh(redactor) and not early.fresh(Redactor())
    redone = early.current(redactor)
    assert redone.fresh(redactor) and password not in repr(redone.doc)
    assert redone.doc["input_ref"]["inline"]["headers"]["x-note"] == f"pw {REDACTED}"


def test_the_replayed_side_keeps_what_redaction_reads_beyond_one_key() -> None:
    # An @tool argument carrying the idempotency key stays readable, and record_value data is judged by its
    # values only: the replayed side, redacted like its recording, is what redacting it alone gives.
    from pytest_agentreplay.redaction import redact_event

    key = "k-17"  # too short to be remembered as a secret: named like one, it is kept readable
    tool = {
        "run_id": "r",
        "seq": 0,
        "ts": "t0",
        "type": "tool.call",
        "actor": "tool",
        "class": "effect",
        "tool": {"name": "pay", "idempotency_key": key},
        "data": {"arguments": {"request_token": key, "amount": 3}, "latency_ms": 1.0},
    }
    values = {
        "run_id": "r",
        "seq": 1,
        "ts": "t1",
        "type": "runtime.values",
        "actor": "runtime",
        "class": "input",
        "data": {"values": {"csrf_token": {"main": ["c5rf-value-0001"]}}, "latency_ms": 1.0},
    }
    history = [Event.model_validate(tool), Event.model_validate(values)]
    recorded = [redact_event(event_to_shared_dict(e), Redactor()).doc for e in history]
    replayed = [e.model_copy(update={"data": {**e.data, "latency_ms": 2.0}}) for e in history]
    out = ReplayedHistory(replayed, recorded, Redactor()).compared
    want = [redact_event(event_to_shared_dict(e), Redactor()).doc for e in replayed]
    assert [same_json(a, b) for a, b in zip(out, want, strict=True)] == [True, True], (out, want)
    assert out[0]["data"]["arguments"]["request_token"] == key
    assert out[1]["data"]["values"] is recorded[1]["data"]["values"]


def test_an_update_writes_the_views_it_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentreplay.cassette import write
    from pytest_agentreplay.cassette.read import load_cassette
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.redaction import event as redaction_event
    from pytest_agentreplay.replay.update import merge_for_update

    redactor = Redactor()
    recorded = _whole(_history(_headers()), Redactor())
    replayed = ReplayedHistory(
        _history(_headers(authorization=f"Bearer {SECRET}"), latency=2.5), recorded, redactor
    )
    merged = merge_for_update(recorded, replayed.views, "r")
    redone: list[object] = []
    original = redaction_event.redact_event
    monkeypatch.setattr(
        redaction_event, "redact_event", lambda *a, **k: redone.append(a) or original(*a, **k)
    )
    monkeypatch.setattr(write, "redact_event", lambda *a, **k: redone.append(a) or original(*a, **k))
    path = tmp_path / "c.json"
    write.save_cassette(path, RunMeta(run_id="r"), merged, redactor=redactor, transport_headers="keep")
    assert redone == []  # written as compared, not redacted again
    loaded = load_cassette(path)
    assert SECRET not in path.read_text()
    for event, view, compared in zip(loaded.events, merged, replayed.compared, strict=True):
        payload = loaded.payload(event.input_ref)
        assert same_json(payload, view.doc["input_ref"]["inline"])
        assert same_json(payload["body"], compared["input_ref"]["inline"]["body"])
        assert event.ts == view.doc["ts"] and event.data["latency_ms"] == 1.0  # the recorded ones kept


def test_the_matchers_redaction_of_a_live_body_is_the_one_its_event_holds() -> None:
    from pytest_agentreplay.redaction import redact_event

    redactor = Redactor()
    redactor.learn(SECRET)
    body = {"content_type": "application/json", "json": {"note": f"token {SECRET}", "q": "x"}}
    matched = redactor.redact_body(body)  # what http.serve matches a live read by
    event = event_to_shared_dict(_read(0, _headers()))
    event["input_ref"] = {**event["input_ref"], "inline": {**event["input_ref"]["inline"], "body": body}}
    assert redact_event(event, redactor).doc["input_ref"]["inline"]["body"] is matched
    assert matched["json"]["note"] == f"token {REDACTED}"


def _served_from(recorded: list[Event]) -> list[Event]:
    """A replay that served ``recorded``'s responses: each event holds the recorded response records that
    ``http.recording.served`` hands it when they match field for field."""
    replayed = _history(_headers(), latency=2.5)
    out = []
    for event, twin in zip(replayed, recorded, strict=True):
        built = event.output_ref
        if built is not None and twin.output_ref is not None:
            built = built.model_copy(update={"inline": twin.output_ref.inline})
            built = _served(twin.output_ref, built)
        out.append(event.model_copy(update={"output_ref": built}))
    return out


def _served(recorded: Any, built: Any) -> Any:
    """``served`` given the fields of ``built``: the recorded record itself, else one equal to ``built``."""
    out = served(type(built), dict(built.__dict__), recorded)
    assert out is recorded or (type(out) is type(built) and out.__dict__ == built.__dict__)
    return out


def test_a_response_record_is_served_only_when_equal_field_for_field() -> None:
    recorded = _history(_headers())[0].output_ref
    assert recorded is not None
    same = recorded.model_copy()
    assert _served(recorded, same) is recorded
    # The response must be the recorded one itself, not an equal copy; a scalar equal only across types
    # (``true`` and ``1``) or another data class is no match.
    copied = recorded.model_copy(update={"inline": copy.deepcopy(recorded.inline)})
    assert _served(recorded, copied) is not recorded
    for update in ({"data_class": "personal"}, {"size": 1}, {"media_type": "text/plain"}):
        built = recorded.model_copy(update=update)
        assert _served(recorded, built) is not recorded
    flagged = ToolInfo.construct_trusted({"name": "svc", "schema_version": None, "idempotency_key": None})
    assert _served(ToolInfo(name="svc"), flagged).name == "svc"
    key = ToolInfo(name="svc", idempotency_key="1")
    assert _served(key, flagged) is not key and _served(key, flagged).idempotency_key is None
    assert _served(None, flagged).__dict__ == flagged.__dict__


def test_served_records_compare_by_identity_and_as_the_slow_path_does() -> None:
    recorded_events = _history(_headers())
    replayed = _served_from(recorded_events)
    recorded = [event_to_shared_dict(e) for e in recorded_events]
    side = RecordedSide(recorded_events)
    slow = ReplayedHistory(replayed, recorded, Redactor())
    fast = ReplayedHistory(replayed, side, Redactor())
    assert [json.dumps(e) for e in fast.compared] == [json.dumps(e) for e in slow.compared]
    assert [json.dumps(v.doc) for v in fast.views] == [json.dumps(v.doc) for v in slow.views]
    # The served response is the recorded dict itself, and the comparison finds it so.
    reads = [(c, r) for c, r in zip(fast.compared, side.dicts, strict=True) if r["type"] == "http"]
    assert reads and all(c["output_ref"] is r["output_ref"] for c, r in reads)
    # Recorded events that differ from what was served (a changed response, ``true`` for ``1``) are walked.
    changed = list(recorded_events)
    changed[0] = changed[0].model_copy(
        update={"output_ref": changed[0].output_ref.model_copy(update={"inline": {"status": True}})}
    )
    changed_dicts = [event_to_shared_dict(e) for e in changed]
    slow = ReplayedHistory(replayed, changed_dicts, Redactor())
    fast = ReplayedHistory(replayed, RecordedSide(changed), Redactor())
    assert [json.dumps(e) for e in fast.compared] == [json.dumps(e) for e in slow.compared]
    assert fast.compared[0]["output_ref"]["inline"]["status"] == 200


def test_a_string_equal_to_the_recorded_one_is_taken_as_saved_and_only_such_a_string() -> None:
    # ``Redactor.redact(..., like=)``: the recorded object for an equal string, whatever its name says (the
    # save redacted it); a string equal as Python sees it to a value of another type, or one that differs,
    # is redacted as a value of its own.
    token = "sk-" + "a1b2c3d4" * 5
    recorded = Redactor().redact(
        {"note": "a plain note long enough", "password": "hunter2!", "n": 1, "flag": True, "kind": "x"}
    )
    replayed = {
        "note": "a plain note long enough",
        "password": recorded["password"],
        "n": "1",
        "flag": "True",
        "kind": f"x {token}",
        "extra": token,
    }
    out = Redactor().redact(replayed, like=recorded)
    assert out["note"] is recorded["note"] and out["password"] is recorded["password"]
    assert out["n"] == "1" and out["flag"] == "True"
    assert out["kind"] == f"x {REDACTED}" and out["extra"] == REDACTED
    assert out == Redactor().redact(replayed)
