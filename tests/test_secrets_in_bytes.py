"""No secret survives in a stored byte form: gRPC message bytes, binary WebSocket frames, base64 fields.

Each case is a small project run in an inner pytest session against a real server on 127.0.0.1 that this
test starts: recorded with a planted secret (an ``sk-proj-`` key and an ``access_token`` value, handed to
the agent through neutrally named variables, so no credential variable teaches them to the redactor), the
server stopped, replayed with plain pytest (twice, green; ``--agentreplay-update`` leaves the cassettes as
they are), and every file under the project's folder (cassettes, blobs, a JUnit file, the Markdown, JSON and
HTML reports) and the terminal are searched for the secrets, their base64 at any alignment and their
percent-encoded form. The drift cases change what the agent sends and check the failure names the drift and
shows no secret.

The mechanism is :func:`pytest_agentreplay.redaction.encoded.mask_bytes`: a secret in bytes that are not a
JSON document is overwritten in place by ``[REDACTED]`` cut or padded with ``*`` to its length, so binary
formats keep their lengths (a protobuf message still parses in replay).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from frameworks_lab import preload
from json_server import JsonHandler, JsonServer

from pytest_agentreplay.cassette.chain import seal_document
from pytest_agentreplay.cli import main as cli_main
from pytest_agentreplay.redaction import Redactor, find_secrets
from pytest_agentreplay.redaction.encoded import mask, mask_bytes

# Imported once in this process: pytester drops what an inner session imports, and each session would
# import the clients again.
preload(
    *(
        name
        for name in ("grpc", "google.protobuf.struct_pb2", "websockets.sync.client", "httpx", "httpx_ws")
        if importlib.util.find_spec(name.partition(".")[0]) is not None
    )
)

KEY = "sk-proj-" + "Qx7Lm2Vb9Rt4Yn8Wc3Kd6Hs1Jf5Gp0Za2Ue4Io6P"  # 8 + 40 characters
TOKEN = "atk.Mz81Qp0Lw7Vb3Xc5Nd9Rf2Tg6Hj4"  # an access_token value: not key-shaped, secret by its name
GOOG_SIGNATURE = "6f1d0c3a9b8e7d2c5a4b3c2d1e0f9a8b" * 4  # hex, as Cloud Storage signs: secret by its name
AZURE_SIG = "Zk3+Qm9/Lw2Xb7Vn5Tc1Rd8Yh4Jp6Gs0Fa3Ue5Io7Kl9="  # base64, as a SAS signs
SECRETS = (KEY, TOKEN, GOOG_SIGNATURE, AZURE_SIG)


def _forms(secret: str) -> list[bytes]:
    """The secret as it could sit in a file: raw, percent-encoded, and base64 at every alignment."""
    raw = secret.encode()
    forms = {raw, quote(secret, safe="").encode()}
    for offset in range(3):
        start = -(-offset * 4 // 3) + 1  # past the characters that mix in the unknown neighbours
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(encode(b"\0" * offset + raw)[start:-4])
    return [form for form in forms if len(form) >= 8]


FORMS = [(secret, form) for secret in SECRETS for form in _forms(secret)]


def leaks(data: bytes) -> list[str]:
    return [f"{secret[:12]}... as {form[:16]!r}" for secret, form in FORMS if form in data]


def assert_clean(folder: Path, *results: pytest.RunResult) -> None:
    """No planted secret in any form in any file under ``folder``, nor in the sessions' terminal output."""
    files = [path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    assert files
    for path in files:
        assert not leaks(path.read_bytes()), (path, leaks(path.read_bytes()))
    for result in results:
        shown = "\n".join([*result.outlines, *result.errlines]).encode()
        assert not leaks(shown), leaks(shown)


def cassette_bytes(folder: Path) -> dict[str, bytes]:
    root = folder / "cassettes"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the inner project ---------------------------------------------------------------------------------

KIT = r'''
import json
import os

import grpc
import httpx
from google.protobuf.struct_pb2 import Struct
from httpx_ws import connect_ws
from websockets.sync.client import connect

KEY = os.environ["PLANT_A"]
TOKEN = os.environ["PLANT_B"]


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def save(out):
    with open(os.path.join(os.environ["OUT_DIR"], "out.json"), "w") as fh:
        json.dump(out, fh)


def grpc_agent(target):
    with grpc.insecure_channel(target) as channel:
        get = channel.unary_unary(
            "/auth.Tokens/GetToken",
            request_serializer=Struct.SerializeToString,
            response_deserializer=Struct.FromString,
        )
        request = Struct()
        changed = {"user": "bob", "note": "my key is " + KEY}
        request.update(changed if "changed" in variant() else {"user": "ann"})
        reply = get(request, timeout=30)
    return {name: reply[name] for name in ("access_token", "hint", "user")}


def frames(url):
    """The agent's binary protocol: a JSON hello, a frame carrying the key, a status frame."""
    key_frame = b"\x00\x01" + KEY.encode() + (b"!" if "changed" in variant() else b"")
    return [json.dumps({"op": "hello"}), key_frame, b"\x00\x04status"]


def ws_agent(base):
    url = base + "/feed?access_token=" + TOKEN
    out = []
    with connect(url, compression=None) as ws:
        for message in frames(url):
            ws.send(message)
            out.append(ws.recv())
    return [m.hex() if isinstance(m, bytes) else m for m in out]


def httpx_ws_agent(base):
    url = base.replace("ws://", "http://") + "/feed?access_token=" + TOKEN
    out = []
    with httpx.Client() as client, connect_ws(url, client) as ws:
        for message in frames(url):
            if isinstance(message, bytes):
                ws.send_bytes(message)
                out.append(ws.receive_bytes().hex())
            else:
                ws.send_text(message)
                out.append(ws.receive_text())
    return out


def signed_url_agent(base):
    name = "other.txt" if "changed" in variant() else "report.txt"
    google = (
        f"{base}/bucket/{name}?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20250101T000000Z"
        f"&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={os.environ['PLANT_C']}"
    )
    azure = f"{base}/container/{name}?sv=2022-11-02&sp=r&se=2030-01-01&sig=" + os.environ["PLANT_D"]
    with httpx.Client() as client:
        return [client.get(google).json()["object"], client.get(azure).json()["object"]]


def run():
    kind, address = os.environ["AGENT_KIND"], os.environ["SERVER"]
    agents = {"grpc": grpc_agent, "ws": ws_agent, "httpx_ws": httpx_ws_agent, "signed_urls": signed_url_agent}
    save(agents[kind](address))
'''

INNER_TEST = """
import kit


def test_agent(agent_replay):
    kit.run()
"""


@dataclass
class Project:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    out: Path

    @property
    def folder(self) -> Path:
        return self.pytester.path

    @property
    def cassette(self) -> Path:
        return self.folder / "cassettes" / "test_agent" / "test_agent.json"

    def run(self, *args: str, variant: str = "") -> pytest.RunResult:
        self.monkeypatch.setenv("AGENT_VARIANT", variant)
        return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def output(self) -> Any:
        return json.loads((self.out / "out.json").read_text())

    def record_then_replay(self, stop: Callable[[], None]) -> tuple[Any, Any, list[pytest.RunResult]]:
        """Record, stop the server, replay twice (reports and JUnit written) and update: all green, the
        cassettes unchanged by the replays and the update. Returns the recorded and replayed outputs and
        the sessions."""
        recorded_run = self.run("--agentreplay-record=all")
        recorded_run.assert_outcomes(passed=1)
        recorded = self.output()
        stop()
        before = cassette_bytes(self.folder)
        runs = [recorded_run]
        for report in ("report.md", "report.json"):
            runs.append(self.run(f"--agentreplay-report={report}", f"--junitxml=junit-{report}.xml"))
            runs[-1].assert_outcomes(passed=1)
        runs.append(self.run("--agentreplay-update", "--agentreplay-report=report.html"))
        runs[-1].assert_outcomes(passed=1)
        assert cassette_bytes(self.folder) == before, (
            "replay and --agentreplay-update left the files as they were"
        )
        return recorded, self.output(), runs


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Project]:
    pytester.makepyfile(kit=KIT, test_agent=INNER_TEST)
    pytester.syspathinsert()
    out = tmp_path / "out"  # outside the project's folder: the recorded output holds the secrets
    out.mkdir()
    for name, value in (
        ("PLANT_A", KEY),
        ("PLANT_B", TOKEN),
        ("PLANT_C", GOOG_SIGNATURE),
        ("PLANT_D", AZURE_SIG),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OUT_DIR", str(out))
    try:
        yield Project(pytester, monkeypatch, out)
    finally:
        sys.modules.pop("kit", None)


# -- gRPC: the message bytes stored beside the view -----------------------------------------------------


class TokenService:
    """``auth.Tokens/GetToken`` answering a Struct with an access token and a key in a hint."""

    def __init__(self) -> None:
        grpc = pytest.importorskip("grpc")
        struct_pb2 = pytest.importorskip("google.protobuf.struct_pb2")
        self.calls = 0

        def get_token(request: Any, context: Any) -> Any:
            self.calls += 1
            reply = struct_pb2.Struct()
            reply.update({"access_token": TOKEN, "hint": f"use {KEY} for the API", "user": request["user"]})
            return reply

        handler = grpc.method_handlers_generic_handler(
            "auth.Tokens",
            {
                "GetToken": grpc.unary_unary_rpc_method_handler(
                    get_token, struct_pb2.Struct.FromString, struct_pb2.Struct.SerializeToString
                )
            },
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None).wait()


@pytest.fixture
def token_service() -> Iterator[TokenService]:
    service = TokenService()
    try:
        yield service
    finally:
        service.stop()


def _grpc_response(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The stored response body of the run's one gRPC call (small: inline)."""
    for event in events:
        request = (event.get("input_ref") or {}).get("inline") or {}
        if event["type"] == "http" and str(request.get("url", "")).startswith("grpc://"):
            body: dict[str, Any] = event["output_ref"]["inline"]["body"]["json"]
            return body
    raise AssertionError("no gRPC exchange recorded")


def test_grpc_message_bytes_are_masked_like_their_view_and_replay_parses_them(
    project: Project, token_service: TokenService
) -> None:
    from google.protobuf.struct_pb2 import Struct

    project.monkeypatch.setenv("AGENT_KIND", "grpc")
    project.monkeypatch.setenv("SERVER", f"127.0.0.1:{token_service.port}")
    recorded, replayed, runs = project.record_then_replay(token_service.stop)
    assert recorded == {"access_token": TOKEN, "hint": f"use {KEY} for the API", "user": "ann"}
    assert token_service.calls == 1
    # Replay served bytes that parse: each secret masked at its length, the rest as recorded.
    assert replayed == {
        "access_token": mask(len(TOKEN)),
        "hint": f"use {mask(len(KEY))} for the API",
        "user": "ann",
    }
    # The view and the bytes agree: every field the view redacts is masked in the bytes, nothing else.
    [entry] = _grpc_response(json.loads(project.cassette.read_text())["events"])["messages"]
    assert entry["json"] == {
        "access_token": "[REDACTED]",
        "hint": "use [REDACTED] for the API",
        "user": "ann",
    }
    parsed = dict(Struct.FromString(base64.b64decode(entry["base64"])))
    assert parsed == replayed
    # A changed request (carrying the key) is refused naming the method, its body shown redacted.
    unmatched = project.run("--junitxml=junit-unmatched.xml", variant="changed")
    unmatched.assert_outcomes(failed=1)
    text = "\n".join(unmatched.outlines)
    assert "no recorded HTTP exchange matches POST grpc://" in text and "auth.Tokens/GetToken" in text
    assert_clean(project.folder, *runs, unmatched)
    # agentreplay verify: the stored cassette is clean...
    assert cli_main(["verify", str(project.cassette)]) == 0


def test_verify_finds_a_key_planted_in_grpc_message_bytes(
    project: Project, token_service: TokenService, capsys: pytest.CaptureFixture[str]
) -> None:
    from google.protobuf.struct_pb2 import Struct

    project.monkeypatch.setenv("AGENT_KIND", "grpc")
    project.monkeypatch.setenv("SERVER", f"127.0.0.1:{token_service.port}")
    project.run("--agentreplay-record=all").assert_outcomes(passed=1)
    capsys.readouterr()
    assert cli_main(["verify", str(project.cassette)]) == 0
    assert "ok" in capsys.readouterr().out
    # Plant a key in the bytes only (the view stays clean), sealed again so only the secret scan can object.
    doc = json.loads(project.cassette.read_text())
    planted = Struct()
    planted.update({"access_token": "[REDACTED]", "hint": f"use {KEY} for the API", "user": "ann"})
    _grpc_response(doc["events"])["messages"][0]["base64"] = base64.b64encode(
        planted.SerializeToString()
    ).decode()
    project.cassette.write_text(json.dumps(seal_document(doc["run"], doc["events"])))
    assert cli_main(["verify", str(project.cassette)]) == 1
    out = capsys.readouterr().out
    assert "secret-shaped value" in out and KEY not in out


# -- WebSocket: binary frames ---------------------------------------------------------------------------


class FeedServer:
    """``/feed``: a JSON text message is answered ``{"ok": true}``; a binary frame ``\\x00\\x01<payload>`` is
    echoed as ``\\x00\\x02<payload>``; any other binary frame is answered ``\\x00\\x03<access_token>``."""

    def __init__(self) -> None:
        pytest.importorskip("websockets")
        from websockets.sync.server import serve

        self.connections = 0

        def handle(ws: Any) -> None:
            self.connections += 1
            for message in ws:
                if isinstance(message, str):
                    ws.send(json.dumps({"ok": True}))
                elif message[:2] == b"\x00\x01":
                    ws.send(b"\x00\x02" + message[2:])
                else:
                    ws.send(b"\x00\x03" + TOKEN.encode())

        self.server = serve(handle, "127.0.0.1", 0, compression=None)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.socket.getsockname()[:2]
        return f"ws://{host}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(10)


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    pytest.importorskip("httpx_ws")
    server = FeedServer()
    try:
        yield server
    finally:
        server.stop()


def _frames(project: Project) -> list[tuple[str, Any]]:
    doc = json.loads(project.cassette.read_text())
    out = []
    for event in doc["events"]:
        data = event["data"]
        if data.get("transport") == "websocket" and data["method"] in ("SEND", "RECEIVE"):
            ref = event.get("input_ref") or event.get("output_ref")
            out.append((data["method"], ref["inline"]))
    return out


@pytest.fixture(params=["ws", "httpx_ws"])
def ws_project(project: Project, feed_server: FeedServer, request: pytest.FixtureRequest) -> Project:
    """The project whose agent talks to the feed through the ``websockets`` client or httpx-ws."""
    project.monkeypatch.setenv("AGENT_KIND", request.param)
    project.monkeypatch.setenv("SERVER", feed_server.url)
    return project


def test_binary_websocket_frames_hold_no_secret_and_replay_without_drift(
    ws_project: Project, feed_server: FeedServer
) -> None:
    project = ws_project
    recorded, replayed, runs = project.record_then_replay(feed_server.stop)
    assert recorded == [
        json.dumps({"ok": True}),
        (b"\x00\x02" + KEY.encode()).hex(),
        (b"\x00\x03" + TOKEN.encode()).hex(),
    ]
    assert feed_server.connections == 1
    # The sent frame with the key compared equal to its recording (no false drift); the received frames
    # are served masked at the secrets' lengths: the key by its shape, the token as the URL's access_token.
    assert replayed == [
        json.dumps({"ok": True}),
        (b"\x00\x02" + mask(len(KEY)).encode()).hex(),
        (b"\x00\x03" + mask(len(TOKEN)).encode()).hex(),
    ]
    frames = _frames(project)
    sent_key = base64.b64decode(frames[2][1]["base64"])
    assert frames[2][0] == "SEND" and sent_key == b"\x00\x01" + mask(len(KEY)).encode()
    assert_clean(project.folder, *runs)


def test_a_websocket_drift_names_the_message_and_shows_no_secret(
    ws_project: Project, feed_server: FeedServer
) -> None:
    project = ws_project
    recording = project.run("--agentreplay-record=all")
    recording.assert_outcomes(passed=1)
    feed_server.stop()
    drifted = project.run("--junitxml=junit.xml", "--agentreplay-report=report.md", variant="changed")
    drifted.assert_outcomes(failed=1)
    text = "\n".join(drifted.outlines)
    assert "WebSocket message 1 sent to" in text and "differs from the recording" in text
    assert "/feed?access_token=[REDACTED]" in text
    assert "sent now:" in text and "recorded:" in text
    junit = (project.folder / "junit.xml").read_text()
    assert "differs from the recording" in junit
    for report in ("report.json", "report.html"):
        project.run(f"--agentreplay-report={report}", variant="changed").assert_outcomes(failed=1)
    assert_clean(project.folder, recording, drifted)


# -- signed URLs over HTTP ------------------------------------------------------------------------------


class _ObjectHandler(JsonHandler):
    def do_GET(self) -> None:
        self.send_json({"object": self.path.split("?")[0]})


@pytest.fixture
def object_store() -> Iterator[JsonServer]:
    with JsonServer(_ObjectHandler) as server:
        yield server


def test_google_and_azure_signed_urls_keep_no_signature(project: Project, object_store: JsonServer) -> None:
    pytest.importorskip("httpx")
    project.monkeypatch.setenv("AGENT_KIND", "signed_urls")
    project.monkeypatch.setenv("SERVER", object_store.url)
    recorded, replayed, runs = project.record_then_replay(lambda: object_store.__exit__(None, None, None))
    assert recorded == replayed == ["/bucket/report.txt", "/container/report.txt"]
    stored = project.cassette.read_text()
    assert "X-Goog-Signature=[REDACTED]" in stored and "sig=[REDACTED]" in stored
    # An unmatched request's message shows the URL redacted too.
    unmatched = project.run("--junitxml=junit-unmatched.xml", variant="changed")
    unmatched.assert_outcomes(failed=1)
    assert "no recorded HTTP exchange matches GET" in "\n".join(unmatched.outlines)
    assert_clean(project.folder, *runs, unmatched)


# -- the mechanism, unit by unit ------------------------------------------------------------------------


def test_mask_keeps_the_length_and_every_other_byte() -> None:
    assert mask(4) == "[RED" and mask(10) == "[REDACTED]" and mask(13) == "[REDACTED]***"
    redactor = Redactor()
    raw = b"\xff\x00caf\xc3\xa9 " + KEY.encode() + b" \xfe\x01"
    masked = mask_bytes(redactor, raw)
    assert masked == b"\xff\x00caf\xc3\xa9 " + mask(len(KEY)).encode() + b" \xfe\x01"
    assert mask_bytes(redactor, masked) is None, "masking is idempotent: nothing left to redact"
    assert mask_bytes(redactor, b"\x00\x01 nothing secret here \xff") is None
    # A value the redactor already knows (an access_token met under its name) is masked wherever it sits.
    redactor.redact({"access_token": TOKEN})
    assert mask_bytes(redactor, b"\x12\x20" + TOKEN.encode()) == b"\x12\x20" + mask(len(TOKEN)).encode()
    # A secret-named parameter and a "name": value pair inside binary are masked by their names.
    framed = b"\x00\x05GET /x?access_token=" + TOKEN.encode() + b' {"password": "hunter2-pw"}\x01'
    shown = mask_bytes(Redactor(), framed)
    assert shown == framed.replace(TOKEN.encode(), mask(len(TOKEN)).encode()).replace(
        b"hunter2-pw", b"[REDACTED]"
    )
    assert shown is not None and mask_bytes(Redactor(), shown) is None, (
        "a masked parameter is redacted already"
    )
    assert find_secrets({"v": base64.b64encode(shown).decode()}) == []
    # A secret inside an encoding no span places (base64 within the bytes): its whole run is masked.
    nested = b"\x00\x01" + base64.b64encode(f"the key: {KEY}".encode()) + b"\x02"
    out = mask_bytes(Redactor(), nested)
    assert out is not None and len(out) == len(nested) and out[:2] == b"\x00\x01" and out[-1:] == b"\x02"
    assert not leaks(out) and find_secrets({"v": base64.b64encode(out).decode()}) == []
    # A secret hidden in a percent-encoded run is masked with its run, still at the run's length.
    hidden = b"\x00q=" + quote(f"key {KEY}", safe="").encode() + b"\x01"
    out = mask_bytes(Redactor(), hidden)
    assert out is not None and len(out) == len(hidden) and not leaks(out)


def test_a_protobuf_message_that_reads_as_text_still_parses() -> None:
    wrappers_pb2 = pytest.importorskip("google.protobuf.wrappers_pb2")
    # Field 1, a string of 48 characters: its tag is "\n" and its length "0", the bytes read as a line of
    # text. Replacing the key with a shorter marker would leave a length prefix pointing past the end.
    raw = wrappers_pb2.StringValue(value=KEY).SerializeToString()
    assert raw == b"\n0" + KEY.encode()
    stored = Redactor().redact({"base64": base64.b64encode(raw).decode()})["base64"]
    assert wrappers_pb2.StringValue.FromString(base64.b64decode(stored)).value == mask(len(KEY))


def test_json_documents_in_base64_are_redacted_as_json() -> None:
    doc = json.dumps({"user": "ann", "api_key": KEY, "note": "fine"}).encode()
    stored = Redactor().redact({"data": base64.b64encode(doc).decode()})["data"]
    decoded = base64.b64decode(stored + "=" * (-len(stored) % 4))  # written unpadded, as the original was
    assert json.loads(decoded) == {"user": "ann", "api_key": "[REDACTED]", "note": "fine"}


def test_the_scan_sees_secrets_in_base64_bytes() -> None:
    frame = base64.b64encode(b"\x00\x01" + KEY.encode() + b"\x02\xff\xfe").decode()
    assert find_secrets({"message": {"base64": frame}}) == ["message.base64"]
    redacted = Redactor().redact({"message": {"base64": frame}})
    assert find_secrets(redacted) == []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        unpadded = encode(b"\x80\x81" + KEY.encode()).decode().rstrip("=")
        assert find_secrets({"v": unpadded}) == ["v"]


@pytest.mark.parametrize(
    "url",
    [
        "https://storage.googleapis.com/b/o.txt?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature="
        + GOOG_SIGNATURE,
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r&sig=" + quote(AZURE_SIG, safe=""),
        "https://bucket.s3.amazonaws.com/o.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
        + GOOG_SIGNATURE,
    ],
)
def test_signed_url_signatures_are_redacted(url: str) -> None:
    shown = Redactor().redact_url(url)
    assert shown.endswith("=[REDACTED]") and not leaks(shown.encode())
    assert find_secrets({"url": url}) == ["url"]
