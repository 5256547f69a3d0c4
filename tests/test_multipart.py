"""Multipart uploads compare, match and store by their parts: the boundary a client draws for every upload is
transport, not content.

Unit tests take the parser apart (quoted boundary, CRLF framing, binary and empty parts, malformed bodies
stored as their bytes), redaction per part and the comparison; inner pytest sessions (pytester) record the
``openai`` SDK's ``files.create`` and ``audio.transcriptions.create`` and an httpx ``files=`` upload against a
local server, replay them green, update nothing, and name the part whose content changed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from json_server import JsonHandler, JsonServer

from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.diff import compare_histories
from pytest_agentreplay.http import bodies, multipart
from pytest_agentreplay.http.exchange import HttpRequest
from pytest_agentreplay.redaction import Redactor
from pytest_agentreplay.redaction.encoded import mask

# -- the parser ---------------------------------------------------------------------------------------


def _body(boundary: str, *parts: bytes, close: bytes = b"--\r\n") -> bytes:
    dash = b"--" + boundary.encode()
    return b"".join(dash + b"\r\n" + part + b"\r\n" for part in parts) + dash + close


FIELD = b'Content-Disposition: form-data; name="purpose"\r\n\r\nfine-tune'
FILE = (
    b'Content-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
    b"Content-Type: text/plain\r\n\r\nline one\r\nline two\r\n"
)
BINARY = b"\x00\xff\xfe\r\n--not-a-boundary\r\n\x80"


def test_parts_are_names_files_content_types_and_content() -> None:
    raw = _body("b17a", FIELD, FILE)
    assert multipart.parse(raw, "multipart/form-data; boundary=b17a") == [
        {"name": "purpose", "content_type": None, "text": "fine-tune"},
        # CRLF inside the content is content: only the one before the next delimiter frames it.
        {
            "name": "file",
            "filename": "notes.txt",
            "content_type": "text/plain",
            "text": "line one\r\nline two\r\n",
        },
    ]


def test_a_quoted_boundary_with_spaces_and_other_parameters() -> None:
    content_type = 'multipart/form-data; charset=utf-8; boundary="a b=c"'
    assert multipart.boundary_of(content_type) == "a b=c"
    assert multipart.without_boundary(content_type) == "multipart/form-data; charset=utf-8"
    parts = multipart.parse(_body("a b=c", FIELD), content_type)
    assert parts == [{"name": "purpose", "content_type": None, "text": "fine-tune"}]


def test_binary_and_empty_parts() -> None:
    binary = b'Content-Disposition: form-data; name="blob"; filename="a.bin"\r\n\r\n' + BINARY
    empty = b'Content-Disposition: form-data; name="note"\r\n\r\n'
    bare = b"\r\nno headers at all"
    parts = multipart.parse(_body("x", binary, empty, bare), "multipart/form-data; boundary=x")
    assert parts == [
        {
            "name": "blob",
            "filename": "a.bin",
            "content_type": None,
            "base64": base64.b64encode(BINARY).decode(),
        },
        {"name": "note", "content_type": None, "text": ""},
        {"name": None, "content_type": None, "text": "no headers at all"},
    ]
    assert [multipart.part_bytes(p) for p in parts] == [BINARY, b"", b"no headers at all"]


def test_other_part_headers_are_kept() -> None:
    part = (
        b'Content-Disposition: attachment; name="doc"; filename="r.pdf"; size=3\r\n'
        b"Content-Transfer-Encoding: binary\r\n\r\nPDF"
    )
    (parsed,) = multipart.parse(_body("x", part), "multipart/mixed; boundary=x") or [None]
    assert parsed == {
        "name": "doc",
        "filename": "r.pdf",
        "content_type": None,
        "headers": {
            "content-transfer-encoding": "binary",
            "content-disposition": 'attachment; name="doc"; filename="r.pdf"; size=3',
        },
        "text": "PDF",
    }


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (_body("x", FIELD), "multipart/form-data"),  # no boundary named
        (_body("x", FIELD), "multipart/form-data; boundary=y"),  # another boundary
        (b"preamble\r\n" + _body("x", FIELD), "multipart/form-data; boundary=x"),
        (_body("x", FIELD, close=b"\r\n"), "multipart/form-data; boundary=x"),  # never closed
        (_body("x", FIELD, close=b"--\r\nepilogue"), "multipart/form-data; boundary=x"),
        (_body("x", b"no header block"), "multipart/form-data; boundary=x"),
        (_body("x", b"not a header\r\n\r\nvalue"), "multipart/form-data; boundary=x"),
        (b"--x\r\n" + FIELD, "multipart/form-data; boundary=x"),  # cut off
    ],
)
def test_a_malformed_body_is_stored_as_its_bytes(raw: bytes, content_type: str) -> None:
    assert multipart.parse(raw, content_type) is None
    stored = bodies.encode_body(raw, content_type)
    assert stored is not None and "multipart" not in stored
    assert bodies.body_bytes(stored) == raw


def test_a_request_is_stored_by_parts_and_its_boundary_is_left_out() -> None:
    request = HttpRequest(
        "POST",
        "https://api.example.com/v1/files",
        {"content-type": "multipart/form-data; boundary=b17a", "authorization": "Bearer sk-x"},
        _body("b17a", FIELD, FILE),
    )
    payload = request.to_payload()
    assert payload["headers"]["content-type"] == "multipart/form-data"
    assert payload["body"]["content_type"] == "multipart/form-data"
    assert [p["name"] for p in payload["body"]["multipart"]] == ["purpose", "file"]
    other = HttpRequest(
        "POST",
        request.url,
        {"content-type": "multipart/form-data; boundary=b686"},
        _body("b686", FIELD, FILE),
    )
    assert bodies.normalise_for_match(other.stored_body()) == bodies.normalise_for_match(
        request.stored_body()
    )
    # Rendered again (excerpts), the parts are delimited by a boundary of the renderer's own.
    again = multipart.parse(
        bodies.body_bytes(payload["body"]), f"multipart/form-data; boundary={multipart.RENDER_BOUNDARY}"
    )
    assert again == payload["body"]["multipart"]


def test_a_multipart_response_keeps_its_bytes() -> None:
    # Served to a client that parses it with the boundary its header names: never taken apart.
    raw = _body("x", FIELD)
    stored = bodies.encode_body(raw, "multipart/mixed; boundary=x", exact=True)
    assert stored is not None and "multipart" not in stored and bodies.body_bytes(stored) == raw


# -- redaction ----------------------------------------------------------------------------------------

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


def _stored(*parts: bytes) -> dict[str, Any]:
    body = bodies.encode_body(_body("q", *parts), "multipart/form-data; boundary=q")
    assert body is not None and "multipart" in body
    return body


def test_a_part_named_like_a_secret_is_redacted_as_a_json_field_of_that_name() -> None:
    redactor = Redactor()
    password = b'Content-Disposition: form-data; name="password"\r\n\r\nhunter2'
    binary = (
        b'Content-Disposition: form-data; name="f"; filename="a.bin"\r\n\r\n\x00\xff' + KEY.encode() + b"\x01"
    )
    body = _stored(FIELD, password, binary)
    redacted = redactor.redact_body(body)
    field, secret, blob = redacted["multipart"]
    assert field == body["multipart"][0]
    assert secret == {"name": "password", "content_type": None, "text": REDACTED}
    # A binary part is masked in place: the key's bytes overwritten at their own length.
    assert base64.b64decode(blob["base64"]) == b"\x00\xff" + mask(len(KEY)).encode() + b"\x01"
    assert redactor.redact_body(redacted) == redacted  # idempotent
    assert redactor.redact({"password": "hunter2"}) == {"password": REDACTED}  # as a JSON field would be
    assert redactor.find_secrets({"body": body}) == ["body.multipart"]
    assert redactor.find_secrets({"body": redacted}) == []
    # An empty secret-named part holds nothing to hide (an empty JSON field is kept too).
    empty = _stored(b'Content-Disposition: form-data; name="password"\r\n\r\n')
    assert redactor.redact_body(empty) == empty


# -- the comparison -----------------------------------------------------------------------------------


def _upload(body: dict[str, Any], headers: dict[str, str] | None = None, seq: int = 1) -> dict[str, Any]:
    return {
        "type": "effect",
        "seq": seq,
        "effect": {"kind": "http.post", "target": "https://api.example.com/v1/files"},
        "input_ref": {
            "inline": {
                "method": "POST",
                "url": "https://api.example.com/v1/files",
                "headers": headers or {"content-type": body["content_type"]},
                "body": body,
            }
        },
    }


def test_a_new_boundary_is_no_drift_and_changed_content_names_its_part() -> None:
    recorded = _upload(_stored(FIELD, FILE))
    assert not compare_histories([recorded], [_upload(_stored(FIELD, FILE))]).has_drift
    changed = FILE.replace(b"line two", b"line 2")
    result = compare_histories([recorded], [_upload(_stored(FIELD, changed))])
    (diff,) = result.regressions
    assert diff.path == "input_ref.body.multipart[1].text"
    assert diff.summary == 'part "file" (notes.txt) changed'


def test_a_cassette_holding_the_bytes_compares_by_parts_too() -> None:
    # Recorded before parts were stored: the bytes and their boundary, in the body and in the header.
    content_type = "multipart/form-data; boundary=old"
    old = _upload(
        {"text": _body("old", FIELD, FILE).decode(), "content_type": content_type},
        {"content-type": content_type},
    )
    assert not compare_histories([old], [_upload(_stored(FIELD, FILE))]).has_drift
    binary = {"base64": base64.b64encode(_body("old", FIELD, FILE)).decode(), "content_type": content_type}
    assert not compare_histories(
        [_upload(binary, {"content-type": content_type})], [_upload(_stored(FIELD, FILE))]
    ).has_drift
    dropped = compare_histories([old], [_upload(_stored(FIELD))])
    (diff,) = dropped.regressions
    assert (diff.path, diff.summary) == ("input_ref.body.multipart[1]", 'part "file" (notes.txt) changed')


# -- through the SDKs, recorded and replayed ----------------------------------------------------------


class Uploads(JsonHandler):
    """``POST /v1/files`` (a file object), ``POST /v1/audio/transcriptions`` (``{"text"}``) and
    ``POST /upload`` (the parts it received); ``received`` counts the requests."""

    received = 0  # per class: each test makes its own subclass (see ``project``)

    def do_POST(self) -> None:
        type(self).received += 1
        parts = multipart.parse(self.body(), self.headers.get("content-type")) or []
        by_name = {p["name"]: p for p in parts}
        if self.path == "/v1/files":
            upload = by_name["file"]
            self.send_json(
                {
                    "id": "file-1",
                    "object": "file",
                    "bytes": len(multipart.part_bytes(upload)),
                    "created_at": 1700000000,
                    "filename": upload.get("filename"),
                    "purpose": by_name["purpose"]["text"],
                    "status": "processed",
                }
            )
        elif self.path == "/v1/audio/transcriptions":
            self.send_json({"text": f"heard {len(multipart.part_bytes(by_name['file']))} bytes"})
        else:
            self.send_json(
                {"parts": [[p["name"], p.get("filename"), len(multipart.part_bytes(p))] for p in parts]}
            )


INNER = """
import io, json, os

import httpx
import openai

NOTES = os.environ.get("NOTES", "first line\\nsecond line\\n").encode()
AUDIO = bytes(range(256)) * 4


def client():
    return openai.OpenAI(base_url=os.environ["UPLOAD_URL"] + "/v1", api_key="sk-test", max_retries=0)


def test_openai_uploads(agent_replay):
    made = client().files.create(file=("notes.jsonl", io.BytesIO(NOTES)), purpose="fine-tune")
    heard = client().audio.transcriptions.create(model="whisper-1", file=("clip.wav", io.BytesIO(AUDIO)))
    with open(os.environ["OUT"], "a") as fh:
        fh.write(json.dumps([made.id, made.bytes, made.filename, heard.text]) + "\\n")


def test_httpx_files(agent_replay):
    files = {"doc": ("notes.txt", NOTES, "text/plain"), "blob": ("a.bin", AUDIO)}
    got = httpx.post(os.environ["UPLOAD_URL"] + "/upload", data={"kind": "report"}, files=files).json()
    with open(os.environ["OUT"], "a") as fh:
        fh.write(json.dumps(got) + "\\n")
"""


@pytest.fixture
def project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[pytest.Pytester, type[Uploads]]]:
    pytest.importorskip("openai")
    pytester.makepyfile(test_uploads=INNER)
    monkeypatch.setenv("OUT", str(pytester.path / "out.jsonl"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    uploads: type[Uploads] = type("Uploads", (Uploads,), {})
    with JsonServer(uploads) as server:
        monkeypatch.setenv("UPLOAD_URL", server.url)
        yield pytester, uploads


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_uploads_replay_green_and_an_update_changes_nothing(
    project: tuple[pytest.Pytester, type[Uploads]],
) -> None:
    pytester, server = project
    pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    sent = server.received
    cassettes = pytester.path / "cassettes"
    before = _files(cassettes)
    doc = json.loads((cassettes / "test_uploads" / "test_openai_uploads.json").read_text())
    uploads = [e for e in doc["events"] if e["type"] == "effect"]
    request = uploads[0]["input_ref"]["inline"]
    assert request["headers"]["content-type"] == request["body"]["content_type"] == "multipart/form-data"
    assert {"name": "purpose", "content_type": None, "text": "fine-tune"} in request["body"]["multipart"]
    for _ in range(2):  # every replay draws new boundaries
        replayed = pytester.runpytest("-p", "no:randomly")
        replayed.assert_outcomes(passed=2)
        replayed.stdout.fnmatch_lines(["*2 replayed, 0 recorded, 0 drifted*"])
        assert "expected difference" not in replayed.stdout.str().replace("0 expected differences", "")
    updated = pytester.runpytest("-p", "no:randomly", "--agentreplay-update")
    updated.stdout.fnmatch_lines(["*0 drifted, 0 failed, 0 updated*"])
    assert _files(cassettes) == before
    assert server.received == sent, "replay sent an upload"
    lines = [json.loads(line) for line in (pytester.path / "out.jsonl").read_text().splitlines()]
    assert lines[0::2][1:] == lines[0::2][:1] * 3 and lines[1::2][1:] == lines[1::2][:1] * 3


def test_a_changed_file_drifts_naming_its_part(
    project: tuple[pytest.Pytester, type[Uploads]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester, _ = project
    pytester.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    monkeypatch.setenv("NOTES", "first line\nsecond line, edited\n")
    replayed = pytester.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(failed=2)
    out = replayed.stdout.str()
    assert 'part "file" (notes.jsonl) changed' in out
    assert 'part "doc" (notes.txt) changed' in out
    assert "boundary" not in out
