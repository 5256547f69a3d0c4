"""The replayed side of the comparison (``replay.replayed_history``): what redacting it whole would give,
at a cost that does not grow with the recorded conversation when the requests differ only by headers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_agentreplay.core.canonical import request_digest, same_json
from pytest_agentreplay.core.events import Event, event_to_shared_dict
from pytest_agentreplay.http.exchange import REQUEST_MEDIA_TYPE
from pytest_agentreplay.redaction import Redactor
from pytest_agentreplay.replay.replayed_history import redacted_replay

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
                "media_type": REQUEST_MEDIA_TYPE,
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
                "media_type": REQUEST_MEDIA_TYPE,
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
    out = redacted_replay(replayed, recorded, Redactor()).compared
    expected = _whole(replayed, Redactor())
    assert len(out) == len(expected)
    for got, want in zip(out, expected, strict=True):
        assert same_json(got, want), (got, want)
    assert SECRET not in repr(out)


def test_a_request_sent_with_other_headers_reuses_the_recorded_body() -> None:
    redactor = Redactor()
    recorded = _whole(_history(_headers()), redactor)
    replayed = _history(_headers(**{"accept-encoding": "gzip, deflate, br, zstd"}))
    out = redacted_replay(replayed, recorded, redactor).compared
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
    out = redacted_replay(replayed, recorded, Redactor()).compared
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
    out = redacted_replay(history, recorded, Redactor()).compared
    assert password not in repr(out[1:])
    assert same_json(out[2], recorded[2])
