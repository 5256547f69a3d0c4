"""A local AWS Bedrock Runtime on 127.0.0.1 for tests/test_bedrock.py, in Bedrock's wire format.

``POST /model/{modelId}/converse``: a Converse JSON answer (a ``toolUse`` first, text once the conversation
holds a ``toolResult``); ``.../converse-stream``: an AWS event stream (text deltas, then a ``toolUse`` block
whose input arrives as JSON pieces, ``messageStop``, ``metadata``); ``.../invoke``: an Anthropic Messages
body; ``.../invoke-with-response-stream``: ``chunk`` events whose base64 ``bytes`` are Anthropic stream
events. Streams go out one message per HTTP chunk (chunked transfer encoding), each payload with the
``p`` padding Bedrock adds, messages framed by :func:`frame` here (written apart from the package's codec,
so the codec is tested against an independent encoder). Every request is logged; :class:`ConnectionCounter`
listens on a stopped server's port and counts what still connects.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from connection_counter import ConnectionCounter as ConnectionCounter  # re-exported for the tests

EVENTSTREAM = "application/vnd.amazon.eventstream"
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def frame(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One event stream message with string headers: prelude, prelude CRC, headers, payload, message CRC."""
    head = b""
    for name, value in headers:
        raw_name, raw_value = name.encode(), value.encode()
        head += bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", binascii.crc32(message))


def event(name: str, data: dict[str, Any], n: int) -> bytes:
    # Bedrock's key order (not sorted) and a padding field of varying length, as the service sends.
    payload = json.dumps({**data, "p": PADDING[: 5 + n % 40]}, separators=(",", ":")).encode()
    headers = [(":event-type", name), (":content-type", "application/json"), (":message-type", "event")]
    return frame(headers, payload)


def chunk(data: dict[str, Any], n: int) -> bytes:
    inner = base64.b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()
    return event("chunk", {"bytes": inner}, n)


def converse_answer(body: dict[str, Any]) -> dict[str, Any]:
    answered = any("toolResult" in block for m in body["messages"] for block in m["content"])
    if answered:
        content: list[dict[str, Any]] = [{"text": "Sunny in Paris, 21 degrees."}]
        stop = "end_turn"
    else:
        use = {"toolUseId": "tooluse_Qx1", "name": "get_weather", "input": {"city": "Paris"}}
        content = [{"text": "Let me check."}, {"toolUse": use}]
        stop = "tool_use"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 31, "outputTokens": 9, "totalTokens": 40},
        "metrics": {"latencyMs": 321},
    }


def converse_stream() -> list[bytes]:
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    for piece in ("Sunny ", "and warm ", "in Lyon."):
        events.append(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}))
    events.append(("contentBlockStop", {"contentBlockIndex": 0}))
    start = {"toolUse": {"toolUseId": "tooluse_Lyon2", "name": "get_weather"}}
    events.append(("contentBlockStart", {"contentBlockIndex": 1, "start": start}))
    for piece in ('{"city":', '"Lyon"}'):
        events.append(("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": piece}}}))
    events.append(("contentBlockStop", {"contentBlockIndex": 1}))
    events.append(("messageStop", {"stopReason": "tool_use"}))
    usage = {"inputTokens": 25, "outputTokens": 14, "totalTokens": 39}
    events.append(("metadata", {"usage": usage, "metrics": {"latencyMs": 410}}))
    return [event(name, data, n) for n, (name, data) in enumerate(events)]


ANTHROPIC_MODEL = "claude-3-5-haiku-20241022"


def anthropic_answer() -> dict[str, Any]:
    return {
        "id": "msg_bdrk_01AB",
        "type": "message",
        "role": "assistant",
        "model": ANTHROPIC_MODEL,
        "content": [{"type": "text", "text": "Bonjour from Claude on Bedrock."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 8},
    }


def anthropic_stream() -> list[bytes]:
    message = {
        **anthropic_answer(),
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    pieces: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    for text in ("Streamed ", "hello ", "from Claude."):
        pieces.append(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        )
    pieces.append({"type": "content_block_stop", "index": 0})
    pieces.append(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}
    )
    metrics = {"inputTokenCount": 12, "outputTokenCount": 9, "invocationLatency": 500, "firstByteLatency": 90}
    pieces.append({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics})
    return [chunk(p, n) for n, p in enumerate(pieces)]


@dataclass
class Logged:
    path: str
    headers: dict[str, str]
    body: bytes


class BedrockServer:
    def __init__(self) -> None:
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> BedrockServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, name="bedrock-server", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(owner: BedrockServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            with owner._lock:
                owner.log.append(Logged(self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
            op = self.path.rsplit("/", 1)[-1]
            body = json.loads(raw) if raw else {}
            if op == "converse":
                self._json(converse_answer(body))
            elif op == "invoke":
                self._json(anthropic_answer())
            elif op == "converse-stream":
                self._stream(converse_stream())
            elif op == "invoke-with-response-stream":
                self._stream(anthropic_stream(), {"x-amzn-bedrock-content-type": "application/json"})
            else:
                self.send_error(404)

        def _json(self, value: dict[str, Any]) -> None:
            payload = json.dumps(value, separators=(",", ":")).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("x-amzn-requestid", "4b0f3a52-7d0e-4c1e-9d7a-000000000001")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, messages: list[bytes], extra: dict[str, str] | None = None) -> None:
            self.send_response(200)
            self.send_header("content-type", EVENTSTREAM)
            self.send_header("x-amzn-requestid", "4b0f3a52-7d0e-4c1e-9d7a-000000000002")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for message in messages:
                self.wfile.write(f"{len(message):x}\r\n".encode() + message + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    return Handler
