"""Byte-faithful serving (issue 12, item 5): what a client receives in replay is byte for byte what it
received while recording (key order, spacing, number spelling, SSE framing), through a cassette written
to disk and read back (keys sorted, readable), for httpx, httpx2, requests and aiohttp, plain and
streamed. The body stays structured in the cassette and comparisons read the parsed value.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import run_in

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.http import bodies, sse

# Unsorted keys, odd spacing, numbers json.dumps would spell differently, a trailing newline.
ODD_JSON = (
    b'{"zeta": 1,   "alpha" :{"b":2,"a":[1, 2.50, 1E+2, -0.0]},\n'
    b' "big": 123456789012345678901234567890, "f": 1.10, "text": "caf\\u00e9 \xc3\xa9"}\n'
)
# CRLF and LF line ends, a comment, data without a space, retry:, JSON with spaces and unsorted keys.
ODD_SSE = (
    b": stream opened\r\n\r\n"
    b'data:{"delta": "He",  "index": 0}\r\n\r\n'
    b"retry: 1000\n"
    b'event: chunk\ndata: {"z": 1, "a": [1,2]}\nid: 7\n\n'
    b"data: plain\ndata: two lines\n\n"
    b"data: [DONE]\n\n"
    b": bye\n"
)
CANONICAL_JSON = json.dumps({"a": 1, "b": [1, 2]}, separators=(",", ":")).encode()
PATHS = {
    "/odd.json": (ODD_JSON, "application/json", None),
    "/odd.gz.json": (gzip.compress(ODD_JSON), "application/json", "gzip"),
    "/canonical.json": (CANONICAL_JSON, "application/json", None),
    "/odd.sse": (ODD_SSE, "text/event-stream", None),
}
EXPECTED = {
    "/odd.json": ODD_JSON,
    "/odd.gz.json": ODD_JSON,
    "/canonical.json": CANONICAL_JSON,
    "/odd.sse": ODD_SSE,
}
# Streams beyond what stays in the cassette: many small events (keys unsorted, so each keeps its exact
# text), and a few events one of which is above the inline limit.
LONG_SSE = b"".join(b'data: {"text": "%s", "i": %d}\n\n' % (b"delta " * 25, i) for i in range(400))
BIG_SSE = b'data: {"i": 0}\n\nevent: done\ndata: {"text": "%s"}\n\ndata: [DONE]\n\n' % (b"word " * 700)
STREAMS = {"/odd.sse": ODD_SSE, "/long.sse": LONG_SSE, "/big.sse": BIG_SSE}


class _Odd(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body, content_type, encoding = PATHS.get(self.path) or (STREAMS[self.path], "text/event-stream", None)
        self.send_response(200)
        self.send_header("content-type", content_type)
        if encoding:
            self.send_header("content-encoding", encoding)
        if content_type == "text/event-stream":
            # Chunked, in pieces that cut lines and CRLF pairs in two.
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            # The long streams in pieces of a few events: 7 bytes at a time would take seconds.
            step = 7 if self.path in PATHS else 1000
            for start in range(0, len(body), step):
                piece = body[start : start + step]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def odd_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _httpx_like(name: str) -> Callable[[str, str, bool], bytes]:
    def fetch(base: str, path: str, stream: bool) -> bytes:
        mod = pytest.importorskip(name)
        with mod.Client() as client:
            if not stream:
                return bytes(client.get(base + path).content)
            with client.stream("GET", base + path) as response:
                return b"".join(response.iter_bytes())

    return fetch


def _httpx_async(base: str, path: str, stream: bool) -> bytes:
    import httpx

    async def run() -> bytes:
        async with httpx.AsyncClient() as client:
            if not stream:
                return (await client.get(base + path)).content
            async with client.stream("GET", base + path) as response:
                return b"".join([chunk async for chunk in response.aiter_bytes()])

    return asyncio.run(run())


def _requests(base: str, path: str, stream: bool) -> bytes:
    requests = pytest.importorskip("requests")
    with requests.Session() as session:
        if not stream:
            return bytes(session.get(base + path).content)
        with session.get(base + path, stream=True) as response:
            return b"".join(response.iter_content(chunk_size=5))


def _aiohttp(base: str, path: str, stream: bool) -> bytes:
    aiohttp = pytest.importorskip("aiohttp")

    async def run() -> bytes:
        async with aiohttp.ClientSession() as session, session.get(base + path) as response:
            if not stream:
                return bytes(await response.read())
            return b"".join([chunk async for chunk in response.content.iter_any()])

    return asyncio.run(run())


CLIENTS = {
    "httpx": _httpx_like("httpx"),
    "httpx-async": _httpx_async,
    "httpx2": _httpx_like("httpx2"),
    "requests": _requests,
    "aiohttp": _aiohttp,
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_replayed_bytes_are_the_recorded_bytes(
    client: str, stream: bool, odd_server: str, tmp_path: Path
) -> None:
    fetch = CLIENTS[client]
    with run_in("record") as rec_ctx:
        recorded = {path: fetch(odd_server, path, stream) for path in PATHS}
    assert recorded == EXPECTED, "the client's own view while recording"
    cassette = tmp_path / "c.json"
    save_cassette(cassette, rec_ctx.recorder.run, rec_ctx.recorder.events)
    loaded = load_cassette(cassette)
    with run_in("regression", recorded=loaded) as rep_ctx:
        replayed = {path: fetch(odd_server, path, stream) for path in PATHS}
    assert list(rep_ctx.failures) == []
    for path in PATHS:
        assert replayed[path] == recorded[path], path


def _record_stream(odd_server: str, path: str, cassette: Path) -> bytes:
    fetch = CLIENTS["httpx"]
    with run_in("record") as ctx:
        received = fetch(odd_server, path, True)
    assert received == STREAMS[path]
    save_cassette(cassette, ctx.recorder.run, ctx.recorder.events)
    return received


def _replay_stream(odd_server: str, path: str, cassette: Path) -> bytes:
    loaded = load_cassette(cassette, verify_blobs=True)
    assert loaded.verify() == []
    with run_in("regression", recorded=loaded) as ctx:
        replayed = CLIENTS["httpx"](odd_server, path, True)
    assert list(ctx.failures) == []
    return replayed


@pytest.mark.parametrize(
    ("path", "blobs"),
    [("/odd.sse", 0), ("/long.sse", 1), ("/big.sse", 1)],
    ids=["small", "long", "big-event"],
)
def test_a_stream_is_stored_whole_and_served_byte_for_byte(
    path: str, blobs: int, odd_server: str, tmp_path: Path
) -> None:
    """A small stream stays in the cassette; a long one, or one with an event above the inline limit, is
    one blob (not one per event, chained): nothing else ever repeats a stream's events."""
    cassette = tmp_path / "cassettes" / "c.json"
    recorded = _record_stream(odd_server, path, cassette)
    assert len([p for p in (tmp_path / "cassettes").rglob("*") if p.is_file()]) == 1 + blobs
    (event,) = [e for e in json.loads(cassette.read_text(encoding="utf-8"))["events"] if e["type"] == "http"]
    assert ("inline" in event["output_ref"]) == (blobs == 0)
    assert _replay_stream(odd_server, path, cassette) == recorded


def test_a_cassette_whose_stream_is_a_chain_of_blobs_still_replays(
    odd_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cassettes written before streams were placed whole hold them as one blob per event, chained."""
    from pytest_agentreplay.cassette import blobs, write

    cassette = tmp_path / "cassettes" / "c.json"
    monkeypatch.setattr(write, "plan_payload", blobs.plan_externalize)
    recorded = _record_stream(odd_server, "/long.sse", cassette)
    monkeypatch.undo()
    assert len(list((tmp_path / "cassettes" / ".blobs").rglob("*.json"))) > 400
    assert _replay_stream(odd_server, "/long.sse", cassette) == recorded


def test_cassette_stays_structured_and_canonical(odd_server: str, tmp_path: Path) -> None:
    fetch = CLIENTS["httpx"]
    with run_in("record") as ctx:
        for path in PATHS:
            fetch(odd_server, path, False)
    cassette = tmp_path / "c.json"
    save_cassette(cassette, ctx.recorder.run, ctx.recorder.events)
    by_url = {
        e.data["url"].rsplit("/", 1)[1]: load_cassette(cassette).payload(e.output_ref)["body"]
        for e in load_cassette(cassette).events
        if e.type == "http"
    }
    odd = by_url["odd.json"]
    assert odd["json"] == json.loads(ODD_JSON) and odd["raw"] == ODD_JSON.decode()
    assert list(odd["json"]) == sorted(odd["json"]), "the value is stored canonically (sorted keys)"
    assert "raw" not in by_url["canonical.json"], "bytes a serialisation reproduces are not stored twice"
    events = by_url["odd.sse"]["sse"]
    assert [ev["data"] for ev in events] == [
        {"delta": "He", "index": 0},
        {"a": [1, 2], "z": 1},
        "plain\ntwo lines",
        "[DONE]",
    ]
    assert b"".join(sse.encode_event(ev) for ev in events) == ODD_SSE


def test_matching_and_comparison_read_the_value_not_the_bytes() -> None:
    spaced = bodies.encode_body(b'{"b": 1, "a": 2}', "application/json", exact=True)
    compact = bodies.encode_body(b'{"a":2,"b":1}', "application/json", exact=True)
    assert spaced is not None and compact is not None and "raw" in spaced and "raw" not in compact
    assert bodies.normalise_for_match(spaced) == bodies.normalise_for_match(compact)
    assert bodies.body_bytes(spaced) == b'{"b": 1, "a": 2}'


def test_redaction_drops_the_exact_text_that_holds_a_secret() -> None:
    from pytest_agentreplay.redaction import Redactor

    body = bodies.encode_body(b'{"password": "hunter2",  "ok": true}', "application/json", exact=True)
    assert body is not None and "raw" in body
    redacted = Redactor.from_config({}).redact_body(body)
    assert "hunter2" not in json.dumps(redacted) and "raw" not in redacted
    stream = bodies.encode_body(b'data: {"password": "hunter2",  "ok": true}\n\n', "text/event-stream")
    assert stream is not None and "raw" in stream["sse"][0]
    assert "hunter2" not in json.dumps(Redactor.from_config({}).redact_body(stream))


SHARED = Path(__file__).resolve().parents[2] / "shared"
VCR_FILES = sorted((SHARED / "corpus").rglob("*.yaml")) + sorted(
    (SHARED / "suites" / "llm-gemini" / "tests" / "cassettes").rglob("*.yaml")
)


@pytest.mark.skipif(not VCR_FILES, reason="../shared is absent")
@pytest.mark.parametrize("path", VCR_FILES, ids=[p.name for p in VCR_FILES])
def test_every_shared_cassette_body_is_served_byte_for_byte(path: Path) -> None:
    """Each response body of the shared vcrpy cassettes, stored as a cassette stores it (canonical JSON,
    keys sorted) and served again, is the body the client received (after content decoding)."""
    import yaml

    from pytest_agentreplay.core.canonical import dumps_pretty
    from pytest_agentreplay.interop.vcr_format import response_from_vcr

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(path.read_bytes(), Loader=loader)  # a safe loader
    checked = 0
    for item in doc["interactions"]:
        raw_response = item["response"]
        body = raw_response.get("body") or {}
        wire = body.get("string", b"") if isinstance(body, dict) else body
        wire = wire.encode() if isinstance(wire, str) else bytes(wire or b"")
        headers = {k.lower(): v[0] if isinstance(v, list) else v for k, v in raw_response["headers"].items()}
        expected = bodies.decode_content(wire, headers.get("content-encoding"))
        response = response_from_vcr(raw_response)
        stored = json.loads(dumps_pretty(response.to_payload()))
        assert bodies.body_bytes(stored["body"]) == expected, item["request"]["uri"]
        checked += 1
    assert checked


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


def _format_by_trying_all(raw: bytes, value: object, sort_keys: bool) -> str | bool | None:
    """What ``_detect_format`` answers by definition: the first format, in order, that reproduces ``raw``."""
    text = raw.decode("utf-8")
    newline = text.endswith("\n")
    core = text[:-1] if newline else text
    for name, kwargs in bodies.JSON_FORMATS.items():
        if json.dumps(value, sort_keys=sort_keys, **kwargs) == core:
            return f"{name or 'compact'}+nl" if newline else name
    return False


@settings(max_examples=400, deadline=None)
@given(
    value=_JSON_VALUES,
    written_as=st.sampled_from(sorted(bodies.JSON_FORMATS, key=str)),
    written_sorted=st.booleans(),
    asked_sorted=st.booleans(),
    newline=st.booleans(),
)
def test_format_detection_skips_only_formats_that_cannot_match(
    value: object, written_as: str | None, written_sorted: bool, asked_sorted: bool, newline: bool
) -> None:
    """The first characters rule formats out before anything is serialised; the answer never changes."""
    text = json.dumps(value, sort_keys=written_sorted, **bodies.JSON_FORMATS[written_as])
    raw = (text + ("\n" if newline else "")).encode("utf-8")
    assert bodies._detect_format(raw, value, asked_sorted) == _format_by_trying_all(raw, value, asked_sorted)


def test_a_spaced_request_body_is_serialised_once_to_find_its_format(monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hé"}] * 3, "temperature": 0}
    raw = json.dumps(body).encode()  # what httpx's json= sends: ", " and ": ", ASCII escapes
    calls: list[json.JSONEncoder] = []
    real_encode = json.JSONEncoder.encode
    formats = [*bodies._ENCODERS.values(), *bodies._SORTED_ENCODERS.values()]

    def counting_encode(self: json.JSONEncoder, value: object) -> str:
        calls.append(self)
        return real_encode(self, value)

    monkeypatch.setattr(json.JSONEncoder, "encode", counting_encode)
    assert bodies._detect_format(raw, body) == "spaced"
    tried = [c for c in calls if any(c is encoder for encoder in formats)]
    assert len(tried) == 1


@given(value=_JSON_VALUES)
def test_the_matching_key_of_a_json_body_is_its_sorted_compact_text(value: object) -> None:
    # Written with an encoder made once: the same text as json.dumps with these options.
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert bodies.normalise_for_match({"json": value, "content_type": "application/json"}) == expected
