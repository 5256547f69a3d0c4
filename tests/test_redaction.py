"""Secrets never reach disk: one test per place a credential hides, plus the final scan as a backstop."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta
from pytest_agentreplay.exceptions import ConfigError, SecretLeakError
from pytest_agentreplay.redaction import Redactor, find_secrets, redact, redact_body
from pytest_agentreplay.redaction.encoded import mask

# Built from parts so that no key-shaped literal sits in the repository (secret scanners flag it).
OPENAI_KEY = "sk-" + "proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345"
ANTHROPIC_KEY = "sk-ant-" + "api03-Zz9yXw8vUt7sRq6pOn5mLk4j"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
JWT = "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
BEARER_TOKEN = "opaque-token-9f8e7d6c5b4a"
GITHUB_TOKEN = "gh" + "p_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
PLAIN_SECRET = "hunter2-correct-horse"
PAD = "filler text " * 250  # pushes the payload over the inline limit, so the blob files are checked too


def request(headers: dict[str, str], url: str = "https://api.example.com/v1/chat", body: Any = None) -> Any:
    return {"method": "POST", "url": url, "headers": headers, "body": body}


def save(tmp_path: Path, payload: Any, redactor: Redactor | None = None, **kwargs: Any) -> Path:
    path = tmp_path / "cassettes" / "test_mod" / "test_secret.json"
    events = [
        Event.model_validate(
            {
                "run_id": "r",
                "seq": seq,
                "ts": "2025-01-01T00:00:00Z",
                "type": "http",
                "actor": "runtime",
                "class": "input",
                "input_ref": PayloadRef(inline=value),
                "data": {"note": "copy", "payload": value} if seq == 0 else {},
            }
        )
        for seq, value in enumerate([payload, {"big": [payload, PAD]}])
    ]
    save_cassette(path, RunMeta(run_id="r"), events, redactor=redactor, **kwargs)
    return path


def assert_not_on_disk(tmp_path: Path, *secrets: str) -> None:
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 2, "expected the cassette and at least one blob"
    for file in files:
        data = file.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, f"{secret!r} leaked into {file}"


@pytest.mark.parametrize(
    "header",
    [
        "authorization",
        "Authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "anthropic-api-key",
        "openai-api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
    ],
)
def test_secret_headers(tmp_path: Path, header: str) -> None:
    path = save(tmp_path, request({header: PLAIN_SECRET, "content-type": "application/json"}))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)
    loaded = load_cassette(path)
    headers = loaded.payload(loaded.events[0].input_ref)["headers"]
    assert headers == {header: REDACTED, "content-type": "application/json"}


def test_header_pairs(tmp_path: Path) -> None:
    save(tmp_path, {"headers": [["Authorization", f"Basic {PLAIN_SECRET}"], ["Accept", "*/*"]]})
    assert_not_on_disk(tmp_path, PLAIN_SECRET)


def test_response_set_cookie(tmp_path: Path) -> None:
    save(
        tmp_path,
        {"status": 200, "headers": {"set-cookie": f"session={PLAIN_SECRET}; HttpOnly"}, "body": None},
    )
    assert_not_on_disk(tmp_path, PLAIN_SECRET)


def test_query_parameters(tmp_path: Path) -> None:
    url = (
        f"https://maps.example.com/api?q=coffee&api_key={PLAIN_SECRET}1&key={PLAIN_SECRET}2"
        f"&access_token={PLAIN_SECRET}3&sig={PLAIN_SECRET}4&page=2"
    )
    path = save(tmp_path, request({}, url=url))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)
    loaded = load_cassette(path)
    assert loaded.payload(loaded.events[0].input_ref)["url"] == (
        f"https://maps.example.com/api?q=coffee&api_key={REDACTED}&key={REDACTED}"
        f"&access_token={REDACTED}&sig={REDACTED}&page=2"
    )


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/vnd.api+json"])
def test_json_body_as_text(tmp_path: Path, content_type: str) -> None:
    text = json.dumps({"data": {"attributes": {"password": PLAIN_SECRET, "name": "ann"}}})
    path = save(tmp_path, request({}, body={"text": text, "content_type": content_type}))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)
    loaded = load_cassette(path)
    body = loaded.payload(loaded.events[0].input_ref)["body"]
    assert body == {
        "json": {"data": {"attributes": {"password": REDACTED, "name": "ann"}}},
        "content_type": content_type,
    }


def test_structured_json_body(tmp_path: Path) -> None:
    body = {"json": {"client_secret": PLAIN_SECRET, "grant_type": "x"}, "content_type": "application/json"}
    save(tmp_path, request({}, body=body))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)


def test_base64_json_body(tmp_path: Path) -> None:
    raw = json.dumps({"api_key": PLAIN_SECRET}).encode()
    body = {"base64": base64.b64encode(raw).decode(), "content_type": "application/json"}
    save(tmp_path, request({}, body=body))
    assert_not_on_disk(tmp_path, PLAIN_SECRET, base64.b64encode(raw).decode())


def test_form_body(tmp_path: Path) -> None:
    body = {
        "text": f"grant_type=client_credentials&client_secret={PLAIN_SECRET}",
        "content_type": "application/x-www-form-urlencoded",
    }
    save(tmp_path, request({}, body=body))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)


def test_sse_stream(tmp_path: Path) -> None:
    body = {
        "sse": [
            {
                "event": "delta",
                "data": json.dumps({"text": f"your key is {OPENAI_KEY}"}),
                "id": None,
                "t": 0.1,
            },
            {"event": None, "data": {"token": PLAIN_SECRET}, "id": "2", "t": 0.2},
        ],
        "content_type": "text/event-stream",
    }
    save(tmp_path, {"status": 200, "headers": {}, "body": body})
    assert_not_on_disk(tmp_path, OPENAI_KEY, PLAIN_SECRET)


@pytest.mark.parametrize("secret", [OPENAI_KEY, ANTHROPIC_KEY, AWS_KEY, JWT, GITHUB_TOKEN, "sk-" + "a1" * 24])
def test_key_shaped_values_in_tool_result(tmp_path: Path, secret: str) -> None:
    result = {"stdout": f'export CREDS="{secret}"\ndone', "exit_code": 0}
    save(tmp_path, result)
    assert_not_on_disk(tmp_path, secret)


@pytest.mark.parametrize("secret", [OPENAI_KEY, ANTHROPIC_KEY, AWS_KEY, JWT, GITHUB_TOKEN])
def test_key_shaped_values_in_model_message(tmp_path: Path, secret: str) -> None:
    body = {
        "json": {
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"use {secret} please"}]}]
        },
        "content_type": "application/json",
    }
    save(tmp_path, request({"content-type": "application/json"}, body=body))
    assert_not_on_disk(tmp_path, secret)


def test_bearer_in_free_text(tmp_path: Path) -> None:
    path = save(tmp_path, {"log": f"curl -H 'Authorization: Bearer {BEARER_TOKEN}' https://x"})
    assert_not_on_disk(tmp_path, BEARER_TOKEN)
    loaded = load_cassette(path)
    assert "Bearer [REDACTED]" in loaded.payload(loaded.events[0].input_ref)["log"]


def test_project_configured_key_and_pattern(tmp_path: Path) -> None:
    redactor = Redactor.from_config(
        {
            "redact_keys": ["customer_pin", "^x_internal_.*$"],
            "redact_patterns": [r"ACME-[0-9]{6}"],
            "redact_headers": ["x-tenant-signature"],
        }
    )
    payload = {
        "customer_pin": "4711-0815",
        "X_Internal_Ref": "internal-ref-77",
        "note": "ticket ACME-123456 resolved",
        "headers": {"x-tenant-signature": "tenant-sig-99"},
    }
    path = save(tmp_path, payload, redactor=redactor)
    assert_not_on_disk(tmp_path, "4711-0815", "internal-ref-77", "ACME-123456", "tenant-sig-99")
    loaded = load_cassette(path)
    assert loaded.payload(loaded.events[0].input_ref)["note"] == f"ticket {REDACTED} resolved"


def test_redactors_of_one_table_share_its_rules_and_learn_each_on_its_own() -> None:
    # Every test's run makes a redactor from the same table: the rules it compiles to are built once and
    # shared, what a run learns is its own. Each redacts as one built by hand from the same rules.
    import re

    table = {
        "redact_keys": ["customer_pin", "^x_internal_.*$"],
        "redact_patterns": [r"ACME-[0-9]{6}"],
        "redact_headers": ["x-tenant-signature"],
    }

    def by_hand() -> Redactor:
        return Redactor(
            extra_headers=["x-tenant-signature"],
            extra_keys=["customer_pin"],
            extra_key_patterns=["^x_internal_.*$"],
            extra_value_patterns=[re.compile(r"ACME-[0-9]{6}")],
        )

    payload = {
        "customer_pin": "4711-0815",
        "X_Internal_Ref": "internal-ref-77",
        "note": "ticket ACME-123456 resolved, pw hunter2-Rosebud!42",
        "headers": {"x-tenant-signature": "tenant-sig-99", "X-Internal-Ref": "7"},
    }
    first = Redactor.from_config(table)
    assert first.redact(payload) == by_hand().redact(payload)
    first.redact({"password": "hunter2-Rosebud!42"})  # learnt mid-run: this run's only
    assert "hunter2" not in json.dumps(first.redact(payload))
    second = Redactor.from_config(dict(table))
    assert second.redact(payload) == by_hand().redact(payload)
    assert "hunter2-Rosebud!42" in json.dumps(second.redact(payload))
    # Another table is other rules; a bad one is refused every time it is asked for.
    assert Redactor.from_config({**table, "redact_keys": []}).redact(payload)["customer_pin"] == "4711-0815"
    for _ in range(2):
        with pytest.raises(ConfigError, match="unclosed"):
            Redactor.from_config({**table, "redact_patterns": ["(unclosed"]})


def test_final_scan_refuses_a_reintroduced_secret(tmp_path: Path) -> None:
    def hook(event: dict[str, Any]) -> dict[str, Any]:
        event["data"]["debug"] = f"Authorization: Bearer {BEARER_TOKEN}"
        return event

    path = tmp_path / "cassettes" / "test_mod" / "test_secret.json"
    with pytest.raises(SecretLeakError) as info:
        save(tmp_path, {"big": PAD}, extra_redact=hook)
    message = str(info.value)
    assert "events[0].data.debug" in message and path.name in message and "How to fix:" in message
    assert not path.exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_final_scan_covers_blobs(tmp_path: Path) -> None:
    def hook(event: dict[str, Any]) -> dict[str, Any]:
        ref = event.get("input_ref")
        if ref and isinstance(ref.get("inline"), dict) and "big" in ref["inline"]:
            ref["inline"]["big"].append({"password": PLAIN_SECRET})
        return event

    with pytest.raises(SecretLeakError, match=r"blob [0-9a-f]{64}: big\[2\]\.password"):
        save(tmp_path, {"x": 1}, extra_redact=hook)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


# -- what must survive ----------------------------------------------------------------------------


def test_usage_and_bookkeeping_fields_pass_through() -> None:
    value = {
        "max_tokens": 1024,
        "input_tokens": 1,
        "output_tokens": 2,
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 5,
        "cache_creation_input_tokens": 6,
        "cache_read_input_tokens": 7,
        "idempotency_key": "idem-1",
        "idempotency-key": "idem-2",
        "Idempotency-Key": "idem-3",
        "cache_key": "ck",
        "tokens": [1, 2, 3],
        "maxTokens": 9,
        "usage": {"input_tokens": 10, "output_tokens": 20},
        "signature": "EqQBCkYIARgCIkA",  # Anthropic thinking signature: not a credential
        "key_points": ["a"],
    }
    assert redact(value) == value
    assert find_secrets(value) == []


@pytest.mark.parametrize(
    "text",
    [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "550e8400-e29b-41d4-a716-446655440000",
        "claude-3-5-sonnet-20241022",
        "gpt-4o-mini-2024-07-18",
        "text-embedding-3-small",
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        "chatcmpl-9pWbPv3L9zYbBqUo0c9hZbX1aBcDe",
        "the bearer of bad news said the task-force risk-assessment-framework is done",
        "https://example.com/search?q=tokens&page=2&sort=asc",
        "Use the key: value syntax; the token budget is 4096.",
    ],
)
def test_no_false_positives(text: str) -> None:
    assert redact(text) == text
    assert find_secrets({"text": text}) == []


def test_secret_named_keys_with_empty_values_are_kept() -> None:
    value = {"password": None, "token": "", "auth": False, "api_key": REDACTED}
    assert redact(value) == value and find_secrets(value) == []


def test_redaction_is_idempotent() -> None:
    value = {
        "headers": {"authorization": f"Bearer {BEARER_TOKEN}"},
        "url": f"https://x/y?key={PLAIN_SECRET}",
        "text": f"{OPENAI_KEY} and Bearer {BEARER_TOKEN}",
        "body": {"text": json.dumps({"secret": "s"}), "content_type": "application/json"},
    }
    once = redact(value)
    assert redact(once) == once
    assert find_secrets(once) == []


def test_find_secrets_paths() -> None:
    doc = {
        "events": [
            {},
            {},
            {},
            {"output_ref": {"inline": {"headers": {"authorization": "Bearer x"}, "note": f"k={AWS_KEY}"}}},
        ]
    }
    assert find_secrets(doc) == [
        "events[3].output_ref.inline.headers.authorization",
        "events[3].output_ref.inline.note",
    ]


def test_redact_body_keeps_non_json_text() -> None:
    body = {"text": "hello", "content_type": "text/plain"}
    assert redact_body(body) == body
    body = {"text": "{not json", "content_type": "application/json"}
    assert redact_body(body) == body
    clean = {"text": '{"a": 1}', "content_type": "application/json"}
    assert redact_body(clean) == clean  # untouched bytes when nothing needs hiding


def test_config_errors_name_the_bad_entry() -> None:
    with pytest.raises(ConfigError) as info:
        Redactor.from_config({"redact_patterns": ["ok", "(unclosed"]})
    assert "(unclosed" in str(info.value) and "redact_patterns" in str(info.value)
    with pytest.raises(ConfigError, match=r"\[a-"):
        Redactor.from_config({"redact_keys": ["[a-"]})
    with pytest.raises(ConfigError, match="list of strings"):
        Redactor.from_config({"redact_headers": [1]})
    assert Redactor.from_config({"unrelated": 1, "redact_headers": "x-one"}).is_secret_name("X-One")


# -- decoded views: what is on the wire, not how it is stored -------------------------------------


@pytest.mark.parametrize(
    "header",
    ["X-Auth-Key", "X-Session-Id", "X-Amz-Security-Token", "X-Signature", "X-Csrftoken", "X-Password"],
)
def test_headers_named_like_credentials(tmp_path: Path, header: str) -> None:
    path = save(tmp_path, request({header: PLAIN_SECRET}))
    assert_not_on_disk(tmp_path, PLAIN_SECRET)
    loaded = load_cassette(path)
    assert loaded.payload(loaded.events[0].input_ref)["headers"] == {header: REDACTED}


def test_readable_headers_stay_readable() -> None:
    headers = {
        "Idempotency-Key": "idem-1",
        "X-Idempotency-Key": "idem-2",
        "x-ratelimit-remaining-tokens": "9000",
        "anthropic-ratelimit-input-tokens-remaining": "100",
        "keep-alive": "timeout=5",
        "content-type": "application/json",
    }
    value = request(headers)
    assert redact(value) == value and find_secrets(value) == []
    assert redact(request({"X-Auth-Key": "x", **headers}))["headers"] == {"X-Auth-Key": REDACTED, **headers}


def test_header_pairs_named_like_credentials() -> None:
    value = {"headers": [["X-Auth-Key", PLAIN_SECRET], ["Idempotency-Key", "idem-1"]]}
    assert redact(value) == {"headers": [["X-Auth-Key", REDACTED], ["Idempotency-Key", "idem-1"]]}
    assert find_secrets(value) == ["headers[0][1]"]


def test_url_userinfo_is_redacted_and_stays_a_url() -> None:
    from urllib.parse import urlsplit

    redactor = Redactor()
    url = f"http://ann:{PLAIN_SECRET}@127.0.0.1:8080/v1/x?page=2"
    once = redactor.redact_url(url)
    assert PLAIN_SECRET not in once and urlsplit(once).hostname == "127.0.0.1"
    assert redactor.redact_url(once) == once == redact(url)
    assert find_secrets({"url": url}) == ["url"] and find_secrets({"url": once}) == []
    assert redactor.redact_url("https://api.example.com/v1/chat") == "https://api.example.com/v1/chat"
    assert redact("ssh://[::1]:22/x and mail ann@example.com") == "ssh://[::1]:22/x and mail ann@example.com"


def _multipart(password: str) -> bytes:
    return (
        b'--b1\r\nContent-Disposition: form-data; name="user"\r\n\r\nann\r\n'
        b'--b1\r\nContent-Disposition: form-data; name="password"\r\n\r\n' + password.encode() + b"\r\n"
        b'--b1\r\nContent-Disposition: form-data; name="f"; filename="a.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n\x00\xff" + OPENAI_KEY.encode() + b"\x01\r\n"
        b"--b1--\r\n"
    )


def test_multipart_parts(tmp_path: Path) -> None:
    raw = _multipart(PLAIN_SECRET)
    body = {"base64": base64.b64encode(raw).decode(), "content_type": "multipart/form-data; boundary=b1"}
    path = save(tmp_path, request({}, body=body))
    assert_not_on_disk(tmp_path, PLAIN_SECRET, OPENAI_KEY)
    loaded = load_cassette(path)
    stored = base64.b64decode(loaded.payload(loaded.events[0].input_ref)["body"]["base64"])
    # The named part by its name; the binary part's key masked in place (at its own length).
    assert stored == _multipart(REDACTED).replace(OPENAI_KEY.encode(), mask(len(OPENAI_KEY)).encode())
    assert find_secrets(request({}, body=body)) == ["body.base64"]


def test_binary_body_is_scanned_decoded(tmp_path: Path) -> None:
    raw = bytes(range(256)) + b"key=" + OPENAI_KEY.encode() + b"\xfe\xff"
    body = {"base64": base64.b64encode(raw).decode(), "content_type": "application/octet-stream"}
    path = save(tmp_path, request({}, body=body))
    assert_not_on_disk(tmp_path, OPENAI_KEY)
    loaded = load_cassette(path)
    stored = base64.b64decode(loaded.payload(loaded.events[0].input_ref)["body"]["base64"])
    # Masked in place (the key's bytes overwritten at their own length): a binary format stays valid.
    assert stored == bytes(range(256)) + b"key=" + mask(len(OPENAI_KEY)).encode() + b"\xfe\xff"
    clean = {"base64": base64.b64encode(bytes(range(256))).decode(), "content_type": "image/png"}
    assert redact_body(clean) == clean


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", None])
def test_json_recognised_by_content(content_type: str | None) -> None:
    text = json.dumps({"user": "ann", "password": PLAIN_SECRET})
    body = {"text": text, "content_type": content_type}
    assert redact_body(body) == {"json": {"user": "ann", "password": REDACTED}, "content_type": content_type}
    b64 = {"base64": base64.b64encode(text.encode()).decode(), "content_type": content_type}
    assert PLAIN_SECRET not in json.dumps(redact_body(b64))
    assert find_secrets({"body": body}) == ["body.text"]


def test_json_nested_in_json_strings() -> None:
    arguments = json.dumps({"user": "ann", "password": PLAIN_SECRET})
    call = {"function": {"name": "login", "arguments": arguments}}
    redacted = redact(call)
    # Same serialisation as the original, so only the secret changes.
    assert redacted["function"]["arguments"] == json.dumps({"user": "ann", "password": REDACTED})
    assert find_secrets(call) == ["function.arguments"] and find_secrets(redacted) == []
    deeper = {"content": json.dumps({"tool": json.dumps({"api_key": PLAIN_SECRET})})}
    assert PLAIN_SECRET not in json.dumps(redact(deeper))
    for text in ["{not json}", "[1, 2]", '{"key_points": ["a"]}']:
        assert redact(text) == text


def _chunk(text: str) -> dict[str, Any]:
    return {"data": {"choices": [{"delta": {"content": text}}], "id": "c1"}, "t": 0.0}


def test_sse_scanned_joined(tmp_path: Path) -> None:
    cut = 12  # neither half is key-shaped on its own
    args = json.dumps({"password": PLAIN_SECRET})
    stream = [
        _chunk("key: " + OPENAI_KEY[:cut]),
        _chunk(OPENAI_KEY[cut:] + " ok"),
        {"event": "args", "data": {"delta": args[:16]}, "t": 0.0},
        {"event": "args", "data": {"delta": args[16:]}, "t": 0.0},
        {"data": "[DONE]", "t": 0.0},
    ]
    body = {"sse": stream, "content_type": "text/event-stream"}
    assert find_secrets({"body": body}) == ["body.sse"]
    redacted = redact_body(body)
    texts = [ev["data"]["choices"][0]["delta"]["content"] for ev in redacted["sse"][:2]]
    assert "".join(texts) == f"key: {REDACTED} ok"
    assert redacted["sse"][2]["data"]["delta"] + redacted["sse"][3]["data"]["delta"] == json.dumps(
        {"password": REDACTED}
    )
    assert redact_body(redacted) == redacted and find_secrets({"body": redacted}) == []
    assert body["sse"][0] == _chunk("key: " + OPENAI_KEY[:cut]), "the input is not modified"
    save(tmp_path, {"status": 200, "headers": {}, "body": body})
    raw = b"\n".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    tail = OPENAI_KEY[len("sk-proj-") :]
    assert not [tail[i : i + 8] for i in range(len(tail) - 7) if tail[i : i + 8].encode() in raw]


def test_secret_spans_on_cut_json() -> None:
    redactor = Redactor()
    text = '{"user": "ann", "password": "hunt'
    assert redactor.secret_spans(text) == [(text.index("hunt"), len(text))]
    assert redactor.secret_spans('{"password": "[REDACTED]"}') == []


def test_final_scan_and_verify_see_joined_streams(tmp_path: Path) -> None:
    # Written past redaction (a hand-edited or old cassette): the scans must see the joined view too.
    from pytest_agentreplay.cassette.atomic import atomic_write_bytes
    from pytest_agentreplay.core.canonical import dumps_pretty

    stream = [_chunk("key: " + OPENAI_KEY[:12]), _chunk(OPENAI_KEY[12:])]
    body = {"sse": stream, "content_type": "text/event-stream"}
    plain = {"text": "ok", "content_type": "text/plain"}
    path = save(tmp_path, {"status": 200, "headers": {}, "body": plain})
    doc = json.loads(path.read_bytes())
    doc["events"][0]["input_ref"]["inline"]["body"] = body
    doc["events"][0]["data"]["payload"]["body"] = body
    from pytest_agentreplay.cassette.chain import build_document

    rebuilt = build_document(doc["run"], doc["events"])
    atomic_write_bytes(path, dumps_pretty(rebuilt).encode())
    problems = load_cassette(path).verify()
    assert any("input_ref.inline.body.sse" in p for p in problems), problems


def test_cassette_file_names_never_hold_a_key(tmp_path: Path) -> None:
    from pytest_agentreplay.core.paths import item_cassette_path

    module = tmp_path / "tests" / "test_m.py"
    path = item_cassette_path(
        tmp_path / "cassettes", tmp_path, module, f"tests/test_m.py::test_x[{OPENAI_KEY}]"
    )
    assert OPENAI_KEY not in str(path) and path.name.startswith(f"test_x[{REDACTED}]-")
    other = item_cassette_path(
        tmp_path / "cassettes", tmp_path, module, f"tests/test_m.py::test_x[{ANTHROPIC_KEY}]"
    )
    assert other != path, "two keys still get two cassettes"
    plain = item_cassette_path(tmp_path / "cassettes", tmp_path, module, "tests/test_m.py::test_x[case-1]")
    assert plain.name == "test_x[case-1].json"
    with pytest.raises(SecretLeakError, match="file name"):
        save_cassette(tmp_path / f"test_y[{OPENAI_KEY}].json", RunMeta(run_id="r"), [])
    assert not list(tmp_path.glob("test_y*"))


def test_reports_show_redacted_values() -> None:
    from pytest_agentreplay.diff import compare_histories
    from pytest_agentreplay.report import build_report, render_report
    from pytest_agentreplay.report.status import Cause, Status, TestStatus

    def note(value: str) -> list[dict[str, Any]]:
        return [{"seq": 1, "type": "policy", "data": {"note": value}}]

    drift = compare_histories(note(AWS_KEY), note("x"))
    assert drift.differences[0].recorded == AWS_KEY
    status = TestStatus(
        f"test_m.py::test_x[{OPENAI_KEY}]",
        "cassettes/test_m/test_x.json",
        Status.FAILED,
        "regression",
        Cause.TEST,
        f"GET http://ann:{PLAIN_SECRET}@host/ failed; Authorization: Bearer {BEARER_TOKEN}",
        drift=drift,
    )
    for suffix in (".json", ".md", ".html"):
        report = render_report(suffix, build_report([status]))
        assert "test_m.py::test_x[" in report and "@host/ failed" in report and "data.note" in report
        for secret in (OPENAI_KEY, PLAIN_SECRET, BEARER_TOKEN, AWS_KEY):
            assert secret not in report, (suffix, secret)


def test_repeated_messages_are_redacted_once() -> None:
    # A conversation resends its whole history with every call: each message's text is redacted once.
    redactor = Redactor()
    history = [{"role": "user", "content": f"message {i} " + "words " * 40} for i in range(50)]
    calls = 0
    original = redactor._redact_string

    def counting(text: str, keys: bool) -> str:
        nonlocal calls
        calls += text.startswith("message ")
        return original(text, keys)

    redactor._redact_string = counting  # type: ignore[method-assign]
    for n in range(1, 51):
        redactor.redact({"messages": history[:n]})
    assert calls == 50


def test_the_default_redactor_shares_no_container_between_calls() -> None:
    # The process-wide redactor serves callers that know nothing of each other (reports, scans, paths): one
    # changing its result must not change what the next caller gets for an equal value.
    from pytest_agentreplay.redaction import default_redactor

    value = [{"role": "user", "content": "the same message, sent by two callers"}]
    first = default_redactor().redact(json.loads(json.dumps(value)))
    first[0]["content"] = "changed by the first caller"
    second = default_redactor().redact(json.loads(json.dumps(value)))
    assert second == value
    assert redact(json.loads(json.dumps(value))) == value


def test_a_run_redactor_shares_redacted_messages_only_when_built_to() -> None:
    # Sharing is the redactor's declared choice: a run's redactor hands one redacted copy of a message to
    # every request resending it (memory stays linear in the conversation); NONE builds every result afresh.
    from pytest_agentreplay.redaction import Sharing

    message = {"role": "user", "content": f"key {OPENAI_KEY}"}
    expected = [{"role": "user", "content": f"key {REDACTED}"}]
    for sharing, shared in (
        (Sharing.BY_CONTENT_AND_IDENTITY, True),
        (Sharing.BY_CONTENT, True),
        (Sharing.NONE, False),
    ):
        redactor = Redactor(sharing=sharing)
        first = redactor.redact([message])
        second = redactor.redact([dict(message)])
        assert first == second == expected
        assert (first[0] is second[0]) is shared


def test_a_tool_schema_keeps_parameters_named_like_secrets() -> None:
    """An MCP ``tools/list`` or a model request's tool definitions name parameters ``api_key``/``token``:
    the schema under the name is kept (a replaced one is a listing the client rejects when served back),
    while a secret value stored under such a name is still redacted."""
    redactor = Redactor()
    listed = {
        "name": "rotate",
        "inputSchema": {
            "type": "object",
            "properties": {
                "api_key": {"type": "string", "description": "the key to rotate"},
                "token": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["api_key"],
        },
    }
    assert redactor.redact(listed) == listed
    assert redactor.find_secrets(listed) == []
    # Not schemas: a value, or an object holding a value, under a secret name is still replaced.
    assert redactor.redact({"properties": {"password": "hunter2", "name": "x"}}) == {
        "properties": {"password": REDACTED, "name": "x"}
    }
    assert redactor.redact({"properties": {"password": {"value": "hunter2"}}}) == {
        "properties": {"password": REDACTED}
    }
    schema_with_secret = {"properties": {"token": {"type": "string", "default": "sk-" + "a1b2c3d4" * 5}}}
    assert redactor.redact(schema_with_secret)["properties"]["token"]["default"] == REDACTED
