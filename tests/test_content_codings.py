"""Content codings (gzip, deflate, br, zstd, chains) and secrets hidden in encodings (base64,
percent-encoding, URL fragments, compressed frames): the decoders, the redaction views, and each client
reading in replay what it read while recording."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import json
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import zstandard
from servers import LLMServer, MemoryCassette, http_events, run_in

from pytest_agentreplay.exceptions import CassetteError, ContentCodingError
from pytest_agentreplay.http import bodies
from pytest_agentreplay.http.bodies import Decoder, decode_content, encode_content
from pytest_agentreplay.redaction import Redactor, find_secrets
from pytest_agentreplay.redaction.encoded import mask

# Built from parts so that no key-shaped literal sits in the repository (secret scanners flag it).
KEY = "sk-" + "proj-" + hashlib.sha256(b"codings").hexdigest()[:40]
TEXT = b'{"items": [1, 2, 3], "note": "' + b"x" * 300 + b'"}'

# -- decoders ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "gzip, br", "br, zstd", "zstd, gzip"])
def test_every_coding_and_chain_decodes_whole_and_byte_by_byte(coding: str) -> None:
    coded = encode_content(TEXT, coding)
    assert coded != TEXT
    assert decode_content(coded, coding) == TEXT
    decoder = Decoder(coding.upper())
    assert decoder.coding == coding
    out = b"".join(decoder.feed(coded[i : i + 1]) for i in range(len(coded))) + decoder.flush()
    assert out == TEXT


def test_zstd_body_of_several_frames() -> None:
    compressor = zstandard.ZstdCompressor()
    coded = compressor.compress(TEXT[:100]) + compressor.compress(TEXT[100:])
    assert decode_content(coded, "zstd") == TEXT


def test_a_chain_with_an_unknown_coding_is_left_as_received() -> None:
    decoder = Decoder("gzip, x-private")
    assert not decoder.active and decoder.coding is None
    assert decode_content(b"opaque", "x-private") == b"opaque"
    assert Decoder("identity").coding is None


def test_zstd_without_zstandard_is_an_error_not_an_opaque_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard raises ImportError
    with pytest.raises(ContentCodingError) as info:
        Decoder("gzip, zstd")
    assert isinstance(info.value, CassetteError)
    text = str(info.value)
    assert "zstandard" in text and "cannot be scanned for secrets" in text
    assert "How to fix:" in text and "pip install zstandard" in text


def test_stored_body_notes_its_coding() -> None:
    body = bodies.encode_body(TEXT, "application/json", coding="zstd")
    assert body is not None and body["coding"] == "zstd" and body["json"]["items"] == [1, 2, 3]
    assert bodies.body_bytes(body) == TEXT


# -- redaction views --------------------------------------------------------------------------------


def _decoded_everywhere(value: str, depth: int = 3) -> list[bytes]:
    """``value`` and what a reviewer could decode it into: base64 (both alphabets, repeatedly), gzip and
    zstd frames, percent-encoding."""
    from urllib.parse import unquote, unquote_to_bytes

    out = [value.encode(), unquote_to_bytes(value), unquote_to_bytes(unquote(value))]
    tail = value.split(",", 1)[-1].replace("\n", "")
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(tail + "=" * (-len(tail) % 4))
        except ValueError:
            continue
        out.append(raw)
        for expand in (gzip.decompress, zstandard.ZstdDecompressor().decompress):
            with contextlib.suppress(Exception):
                out.append(expand(raw))
        if depth and raw.isascii():
            out.extend(_decoded_everywhere(raw.decode(), depth - 1))
    return out


def _b64(text: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(text.encode()).decode()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(_b64(f"notes\nthe key is {KEY}\nbye"), id="standard"),
        pytest.param(_b64(f"the key is {KEY}!", urlsafe=True).rstrip("="), id="urlsafe-unpadded"),
        pytest.param(base64.encodebytes(f"{'notes ' * 20}{KEY}".encode()).decode(), id="mime-lines"),
        pytest.param("data:text/plain;base64," + _b64(f"key {KEY}"), id="data-url"),
        pytest.param(_b64(json.dumps({"user": "ann", "password": "hunter2-hunter2"})), id="json-name-rule"),
        pytest.param(_b64(_b64(f"twice {KEY}")), id="base64-twice"),
        pytest.param(base64.b64encode(gzip.compress(f"key {KEY}".encode())).decode(), id="gzip-frame"),
        pytest.param(
            base64.b64encode(zstandard.ZstdCompressor().compress(f"key {KEY}".encode())).decode(),
            id="zstd-frame",
        ),
        pytest.param("https://app.example/s?q=my%20key%20" + KEY.replace("-", "%2D"), id="percent"),
        pytest.param("https://app.example/s?q=" + KEY.replace("-", "%252D"), id="percent-twice"),
        pytest.param("https://app.example/cb#access_token=ya29.a0AfH6SMBxyz&state=s1", id="fragment"),
    ],
)
def test_secret_inside_an_encoding_is_redacted_and_found(value: str) -> None:
    redactor = Redactor()
    secrets = (KEY, "hunter2-hunter2", "ya29.a0AfH6SMBxyz")
    assert any(s.encode() in view for view in _decoded_everywhere(value) for s in secrets)
    redacted = redactor.redact({"field": value})["field"]
    for view in _decoded_everywhere(redacted):
        assert not any(s.encode() in view for s in secrets), (redacted, view)
    assert find_secrets({"field": value}) == ["field"]
    assert redactor.redact(redacted) == redacted  # nothing left for a second pass (the scan is clean)


def test_redacted_base64_keeps_its_alphabet_padding_and_document() -> None:
    redactor = Redactor()
    urlsafe = _b64(f"??>>{KEY}", urlsafe=True).rstrip("=")
    out = redactor.redact_string(urlsafe)
    assert "=" not in out and "+" not in out and "/" not in out
    # Bytes that are not a JSON document are masked in place, at the secret's length (encoded.mask_bytes).
    assert base64.urlsafe_b64decode(out + "=" * (-len(out) % 4)) == b"??>>" + mask(len(KEY)).encode()
    url = "data:text/plain;base64," + _b64(f"line one\n{KEY}\n")
    decoded = base64.b64decode(redactor.redact_string(url).split(",", 1)[1])
    assert decoded == b"line one\n" + mask(len(KEY)).encode() + b"\n"
    document = _b64(json.dumps({"note": f"key {KEY}"}))
    assert json.loads(base64.b64decode(redactor.redact_string(document))) == {"note": "key [REDACTED]"}
    fragment = redactor.redact_string("https://app.example/cb#access_token=ya29.a0AfH6SMBxyz&state=s1")
    assert fragment == "https://app.example/cb#access_token=[REDACTED]&state=s1"


def test_binary_base64_and_plain_identifiers_are_left_alone() -> None:
    redactor = Redactor()
    # A PNG whose bytes happen to hold a key: the key is masked in place at its length, every other byte
    # (and so the format) is kept; binary without a secret and identifiers are never rewritten.
    head = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    png = base64.b64encode(head + KEY.encode()).decode()
    assert base64.b64decode(redactor.redact_string(png)) == head + mask(len(KEY)).encode()
    assert find_secrets({"v": png}) == ["v"]
    pdf = base64.b64encode(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(range(256)) * 8).decode()
    for value in (pdf, "chatcmpl-9f8e7d6c5b4a39281706", "123e4567-e89b-12d3-a456-426614174000"):
        assert redactor.redact_string(value) == value
        assert find_secrets({"v": value}) == []


def test_base64_over_the_cap_is_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentreplay.redaction import encoded as redaction_encoded

    value = _b64(f"key {KEY} " + "padding " * 10)
    monkeypatch.setattr(redaction_encoded, "MAX_ENCODED_CHARS", len(value) - 1)
    assert Redactor().redact_string(value) == value


def test_a_stored_zstd_frame_body_is_reported_and_redacted_decoded() -> None:
    frame = zstandard.ZstdCompressor().compress(json.dumps({"user": "ann", "password": "pw-123456"}).encode())
    body = {"base64": base64.b64encode(frame).decode(), "content_type": "application/json"}
    assert find_secrets({"output": body}) == ["output.base64"]
    assert Redactor().redact(body) == {
        "json": {"user": "ann", "password": "[REDACTED]"},
        "content_type": "application/json",
    }


def test_idempotency_key_argument_agrees_with_tool_idempotency_key() -> None:
    redactor = Redactor()
    event = {
        "type": "tool.call",
        "tool": {"name": "create_ticket", "idempotency_key": "k-1"},
        "data": {"arguments": {"subject": "late", "key": "k-1", "password": "pw-secret-1"}},
    }
    out = redactor.redact(event)
    assert out["tool"]["idempotency_key"] == "k-1"
    assert out["data"]["arguments"] == {"subject": "late", "key": "k-1", "password": "[REDACTED]"}
    assert find_secrets(event) == ["data.arguments.password"]
    # A key shaped like a credential is hidden in both places alike.
    event["tool"]["idempotency_key"] = event["data"]["arguments"]["key"] = KEY
    out = redactor.redact(event)
    assert out["tool"]["idempotency_key"] == out["data"]["arguments"]["key"] == "[REDACTED]"


# -- each client reads in replay what it read while recording --------------------------------------


def _observed(status: int, headers: Any, content: bytes) -> tuple[Any, ...]:
    """What a client read: the decoded JSON, or a (partly) coded frame, with the codings it still holds and
    what it decodes to (a frame coded again in replay need not be the recorded frame byte for byte)."""
    try:
        return status, True, json.loads(content)
    except ValueError:
        pass
    names = bodies.codings(headers.get("content-encoding"))
    for kept in range(len(names), 0, -1):
        try:
            return status, names[:kept], json.loads(decode_content(content, ", ".join(names[:kept])))
        except Exception:
            continue
    raise AssertionError(f"undecodable body {content[:40]!r}")


def _observed_stream(headers: Any, content: bytes) -> tuple[Any, ...]:
    if content.startswith(b"event:"):
        return True, content
    return headers.get("content-encoding"), decode_content(content, headers.get("content-encoding"))


def _httpx_like(module: str) -> Callable[[str], list[Any]]:
    def agent(url: str) -> list[Any]:
        mod = pytest.importorskip(module)
        out = []
        with mod.Client(base_url=url, headers={"accept-encoding": "gzip, deflate, br, zstd"}) as client:
            # No chain with zstd: httpx fails on those live ("cannot use a decompressobj multiple times").
            for coding in ("gzip", "br", "zstd", "gzip+br", "br+deflate"):
                r = client.get(f"/tools/compressed/{coding}")
                out.append(_observed(r.status_code, r.headers, r.content))
            with client.stream("GET", "/tools/sse/zstd") as r:
                out.append(_observed_stream(r.headers, b"".join(r.iter_bytes())))
        return out

    return agent


def _requests_agent(url: str) -> list[Any]:
    import requests

    out = []
    with requests.Session() as s:
        s.headers["accept-encoding"] = "gzip, deflate, br, zstd"
        # Not "zstd+gzip": urllib3 without zstd support fails on that chain, live as in replay.
        for coding in ("gzip", "br", "zstd", "gzip+br"):
            r = s.get(f"{url}/tools/compressed/{coding}")
            out.append(_observed(r.status_code, r.headers, r.content))
    return out


def _aiohttp_agent(url: str) -> list[Any]:
    import aiohttp

    async def run() -> list[Any]:
        out = []
        async with aiohttp.ClientSession() as session:
            for coding in ("gzip", "br", "zstd", "gzip+br", "zstd+gzip"):
                # aiohttp cannot read zstd without backports.zstd: read raw; chains it passes through itself.
                auto = coding != "zstd"
                async with session.get(f"{url}/tools/compressed/{coding}", auto_decompress=auto) as r:
                    out.append(_observed(r.status, r.headers, await r.read()))
        return out

    return asyncio.run(run())


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param(_httpx_like("httpx"), id="httpx"),
        pytest.param(_httpx_like("httpx2"), id="httpx2"),
        pytest.param(_requests_agent, id="requests"),
        pytest.param(_aiohttp_agent, id="aiohttp"),
    ],
)
def test_each_client_reads_in_replay_what_it_read_while_recording(agent: Callable[[str], list[Any]]) -> None:
    server = LLMServer().start()
    try:
        with run_in("record") as rec_ctx:
            recorded = agent(server.url)
    finally:
        server.stop()
    with run_in("regression", recorded=MemoryCassette(rec_ctx.recorder.events)) as rep_ctx:
        replayed = agent(server.url)
    assert list(rep_ctx.failures) == []
    assert replayed == recorded
    for event in http_events(rec_ctx):
        out = event.output_ref.inline
        coding = event.data["url"].rsplit("/", 1)[1].replace("+", ", ")
        # Stored decoded, whatever the client did with the coding, and the coding noted.
        assert out["body"]["coding"] == coding and "content-encoding" not in out["headers"]
        if "/sse/" in event.data["url"]:
            assert [ev["data"] for ev in out["body"]["sse"]] == [{"n": i} for i in range(5)]
        else:
            assert out["body"]["json"]["items"] == list(range(50))


def test_zstd_request_body_is_stored_decoded_and_matches_in_replay() -> None:
    import httpx

    payload = json.dumps({"title": "zipped", "api_key": "pw-zstd-body-1"}).encode()
    headers = {"content-type": "application/json", "content-encoding": "zstd"}
    server = LLMServer().start()
    try:
        with run_in("record") as rec_ctx, httpx.Client(base_url=server.url) as client:
            sent = client.post("/tools/tickets", content=encode_content(payload, "zstd"), headers=headers)
    finally:
        server.stop()
    (event,) = http_events(rec_ctx)
    body = event.input_ref.inline["body"]
    assert body["json"]["title"] == "zipped" and body["coding"] == "zstd"
    assert Redactor().redact(body)["json"]["api_key"] == "[REDACTED]"
    recorded = MemoryCassette(rec_ctx.recorder.events)
    with run_in("regression", recorded=recorded) as rep_ctx, httpx.Client(base_url=server.url) as client:
        again = client.post("/tools/tickets", content=encode_content(payload, "zstd"), headers=headers)
    assert list(rep_ctx.failures) == [] and again.json() == sent.json()


def test_recording_a_zstd_response_without_zstandard_fails_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    def unimportable(name: str) -> None:
        raise ImportError(f"No module named {name!r}")

    # Only for this package: the test server and httpx itself keep compressing and decoding zstd.
    monkeypatch.setattr(bodies, "importlib", SimpleNamespace(import_module=unimportable))
    server = LLMServer().start()
    try:
        with (
            run_in("record") as ctx,
            httpx.Client(base_url=server.url) as client,
            pytest.raises(ContentCodingError) as info,
        ):
            client.get("/tools/compressed/zstd")
    finally:
        server.stop()
    assert list(ctx.failures) == [info.value]  # kept: the agent may swallow the exception
    assert "mem://test" in str(info.value) and "/tools/compressed/zstd" in str(info.value)
    assert http_events(ctx) == []  # nothing of the frame is recorded
