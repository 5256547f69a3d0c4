"""Redaction that hides secrets and nothing else: ambiguous names judged by their value, a secret value
replaced wherever it appears (and in its encoded forms), the user's own value names left to the user."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from json_server import JsonHandler, JsonServer

from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.redaction import Redactor

# Real API payloads (shapes as their APIs return them): nothing in them is a credential.
REAL_PAYLOADS: list[Any] = [
    # Jira: an issue's key names it
    {
        "id": "10001",
        "key": "PROJ-123",
        "self": "https://example.atlassian.net/rest/api/3/issue/10001",
        "fields": {"summary": "Refund not received", "status": {"name": "Open"}},
    },
    # GitHub: a user's node_id, a repository's key-less fields
    {
        "login": "octocat",
        "id": 1,
        "node_id": "MDQ6VXNlcjE=",
        "avatar_url": "https://github.com/images/x.gif",
        "type": "User",
        "site_admin": False,
    },
    # Stripe: object ids
    {"id": "cus_NffrFeUfNV2Hib", "object": "customer", "email": "jenny@example.com", "livemode": False},
    # an HTTP client's auth block, a shell's working directory, an analytics session id, a cache key
    {"auth": {"type": "none"}, "pwd": "/home/jenny/project", "session_id": "s-42", "key": "orders:17"},
    {"items": [{"key": "color", "value": "blue"}, {"key": "size", "value": "XL"}]},
]


@pytest.mark.parametrize("payload", REAL_PAYLOADS)
def test_real_api_payloads_are_stored_unchanged(payload: Any) -> None:
    redactor = Redactor()
    assert redactor.redact(payload) == payload
    assert redactor.find_secrets(payload) == []


def test_an_ambiguous_name_holding_a_credential_is_redacted() -> None:
    redactor = Redactor()
    token = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
    assert redactor.redact({"key": token, "auth": token, "session_id": token}) == {
        "key": REDACTED,
        "auth": REDACTED,
        "session_id": REDACTED,
    }
    assert redactor.redact_string(f"https://maps.example/v1?key={token}&q=PROJ-123") == (
        f"https://maps.example/v1?key={REDACTED}&q=PROJ-123"
    )
    assert (
        redactor.redact_string("https://x.example/search?key=PROJ-123")
        == "https://x.example/search?key=PROJ-123"
    )
    # Unambiguous names hold a secret whatever it looks like.
    assert redactor.redact({"password": "hunter2", "token": "abc"}) == {
        "password": REDACTED,
        "token": REDACTED,
    }


def test_a_secret_value_is_replaced_wherever_it_appears_in_every_form() -> None:
    redactor = Redactor()
    secret = "correct horse/battery+staple"
    raw = secret.encode()
    request = {
        "note": f"pw is {secret}",  # before the field that names it a secret
        "password": secret,
        "echo": {
            "b64": base64.b64encode(raw).decode(),
            "url": "https://x.example/?q=" + quote(secret, safe=""),
        },
    }
    out = redactor.redact(request)
    text = json.dumps(out)
    assert (
        secret not in text
        and base64.b64encode(raw).decode() not in text
        and quote(secret, safe="") not in text
    )
    assert out["note"] == f"pw is {REDACTED}"
    # Later values of the run (a response echoing it, a tool result) too.
    assert redactor.redact({"reply": f"stored {secret}!"}) == {"reply": f"stored {REDACTED}!"}
    # The final scan sees a known secret left anywhere.
    assert redactor.find_secrets({"later": f"x {secret}"}) != []


def test_short_values_are_not_replaced_everywhere() -> None:
    redactor = Redactor()
    assert redactor.redact({"pin": "12", "password": "1234"}) == {"pin": "12", "password": REDACTED}
    assert redactor.redact({"text": "call 1234 now"}) == {"text": "call 1234 now"}


def test_credential_variables_of_the_environment_are_secrets_everywhere() -> None:
    redactor = Redactor()
    token = "tok_8f3a9c1b2d4e5f60718293a4"
    redactor.learn_environment({"MY_SERVICE_TOKEN": token, "PWD": "/work/project", "HOME": "/root"})
    assert redactor.redact({"prompt": f"use {token} to log in"}) == {"prompt": f"use {REDACTED} to log in"}
    assert redactor.redact({"cwd": "/work/project"}) == {"cwd": "/work/project"}


def test_the_sessions_memory_of_the_environment_sees_a_secret_set_later() -> None:
    from pytest_agentreplay.redaction.known import EnvironmentCredentials

    seen, token = EnvironmentCredentials(), "tok_8f3a9c1b2d4e5f60718293a4"
    environ = {"PYTEST_CURRENT_TEST": "t.py::a (setup)", "HOME": "/root"}
    Redactor().learn_environment(environ, seen)
    environ["PYTEST_CURRENT_TEST"] = "t.py::b (setup)"
    environ["MY_SERVICE_TOKEN"] = token  # a test's monkeypatch.setenv
    redactor = Redactor()
    redactor.learn_environment(environ, seen)
    assert redactor.redact({"prompt": f"use {token}"}) == {"prompt": f"use {REDACTED}"}
    environ["MY_SERVICE_TOKEN"] = token[::-1]  # the same names, a secret's value changed
    redactor = Redactor()
    redactor.learn_environment(environ, seen)
    assert redactor.redact({"a": token[::-1], "b": f"x {token}"}) == {"a": REDACTED, "b": f"x {token}"}


# -- through pytest, against a local server ---------------------------------------------------------------

SECRET = "hunter2-Rosebud!42"


class _Service(JsonHandler):
    def do_GET(self) -> None:
        if self.path == "/issue":
            self.send_json({"id": "10001", "key": "PROJ-123", "fields": {"summary": "Refund"}})
        elif self.path == "/issue/PROJ-123/comments":
            self.send_json({"comments": [{"body": "on it"}]})
        else:
            self.send_json({"error": self.path}, 404)

    def do_POST(self) -> None:
        self.send_json({"account": "A-1", "note": json.loads(self.body()).get("note")}, 201)


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[JsonServer]:
    with JsonServer(_Service) as server:
        monkeypatch.setenv("SERVICE", server.url)
        yield server


AGENT = f"""
import os

import httpx
from pytest_agentreplay import record_value

SECRET = {SECRET!r}


def test_sign_up(agent_replay):
    base = os.environ["SERVICE"]
    reply = httpx.post(base + "/accounts", json={{"note": "pw is " + SECRET, "password": SECRET}},
                       headers={{"Idempotency-Key": "k1"}})
    # The echo is served as stored: the cassette never holds the secret, so replay hands back the marker.
    assert reply.json()["note"] in ("pw is " + SECRET, "pw is [REDACTED]")


def test_issue_key(agent_replay):
    base = os.environ["SERVICE"]
    key = httpx.get(base + "/issue").json()["key"]
    assert key == "PROJ-123"
    assert httpx.get(base + f"/issue/{{key}}/comments").json() == {{"comments": [{{"body": "on it"}}]}}


def test_csrf_value(agent_replay):
    assert record_value("csrf_token", lambda: "c5rf-value-0001") == "c5rf-value-0001"
    assert record_value("session", lambda: {{"id": 7}}) == {{"id": 7}}
"""


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_record_and_replay_hide_the_secret_everywhere_and_nothing_else(
    pytester: pytest.Pytester, service: JsonServer
) -> None:
    pytester.makepyfile(test_agent=AGENT)
    recorded = pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all", "--junitxml=junit.xml")
    recorded.assert_outcomes(passed=3)
    cassettes = pytester.path / "cassettes"
    stored = b"".join(_files(cassettes).values())
    for form in (SECRET, base64.b64encode(SECRET.encode()).decode(), quote(SECRET, safe="")):
        assert form.encode() not in stored, form
    assert b"PROJ-123" in stored and b"c5rf-value-0001" in stored
    service.stop()
    before = _files(cassettes)
    for _ in range(2):
        replayed = pytester.runpytest(
            "-p", "no:randomly", "--junitxml=junit.xml", "--agentreplay-report=r.md"
        )
        replayed.assert_outcomes(passed=3)
        replayed.stdout.fnmatch_lines(["*3 replayed, 0 recorded, 0 drifted*"])
        assert SECRET not in replayed.stdout.str()
    pytester.runpytest("-p", "no:randomly", "--agentreplay-update").assert_outcomes(passed=3)
    assert _files(cassettes) == before
    for path in (pytester.path / "junit.xml", pytester.path / "r.md"):
        assert SECRET.encode() not in path.read_bytes()


LATE_AGENT = f"""
import os

import httpx


def test_late_secret(agent_replay):
    base = os.environ["SERVICE"]
    # Free text first; only the call after it sends the value under a secret header.
    assert httpx.get(base + "/issue", headers={{"X-Note": "pw is " + {SECRET!r}}}).status_code == 200
    assert httpx.get(base + "/issue", headers={{"X-Service-Token": {SECRET!r}}}).status_code == 200
"""


def test_a_secret_a_later_call_teaches_is_hidden_in_the_calls_before_it(
    pytester: pytest.Pytester, service: JsonServer
) -> None:
    # The events redacted before the run learnt the secret are redone: the recording is saved (not refused
    # as a leak), replay compares them without drift, and an accepted update writes the same file.
    pytester.makepyfile(test_late=LATE_AGENT)
    recorded = pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all")
    recorded.assert_outcomes(passed=1)
    cassettes = pytester.path / "cassettes"
    stored = _files(cassettes)
    assert stored and SECRET.encode() not in b"".join(stored.values())
    assert b"pw is [REDACTED]" in b"".join(stored.values())
    service.stop()
    replayed = pytester.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted*"])
    assert SECRET not in replayed.stdout.str()
    pytester.runpytest("-p", "no:randomly", "--agentreplay-update").assert_outcomes(passed=1)
    assert _files(cassettes) == stored


def test_a_secret_learnt_inside_a_list_element_is_replaced_earlier_in_that_element() -> None:
    # List elements are remembered by content and identity (a conversation resends them): an element whose
    # redaction taught a new secret must not be reused in the form redacted before it was learnt.
    token = "tok-0123456789abcdefXYZ"
    for redactor in (Redactor(), Redactor.from_config({})):
        message = {"note": "see " + token, "access_token": token}
        out = redactor.redact({"messages": [message, dict(message)]})
        assert token not in json.dumps(out)
        assert out["messages"][0] == {"note": f"see {REDACTED}", "access_token": REDACTED}


def test_a_secret_learnt_from_a_header_clears_what_was_remembered() -> None:
    redactor = Redactor()
    token = "hdr-0123456789abcdefXYZ"
    text = "x" * 60 + token  # long enough to be remembered
    assert redactor.redact_string(text) == text
    redactor.redact_headers({"X-Api-Key": token})
    assert redactor.redact_string(text) == "x" * 60 + REDACTED


def test_the_process_wide_redactor_learns_nothing_from_one_caller_for_another() -> None:
    from pytest_agentreplay.redaction import redact

    assert redact({"password": "granted-by-lead"}) == {"password": REDACTED}
    assert redact({"status": "granted-by-lead"}) == {"status": "granted-by-lead"}
