"""Local test servers on 127.0.0.1: an LLM API double and a small JSON tools service.

``LLMServer`` speaks the wire formats of OpenAI Chat Completions (``/v1/chat/completions``), the OpenAI
Responses API (``/v1/responses``) and Anthropic Messages (``/v1/messages``), plain and SSE-streamed
(chunked transfer encoding), tool calls included, rendering scripted :class:`ModelReply` values
queued per endpoint. It also serves a tools service under ``/tools``: ``GET /tools/weather?city=``,
``POST /tools/tickets`` (honours ``Idempotency-Key``; returns an ``id`` and a ``Location``),
``GET /tools/compressed/<gzip|deflate|br|zstd|gzip+br|...>`` (``+`` chains codings: ``gzip+br`` is sent as
``Content-Encoding: gzip, br``) and ``GET /tools/sse/<identity|gzip|deflate|br|zstd>``.

Every received request is appended to ``server.log``. Use as a context manager or start()/stop().
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class ModelReply:
    """What the model "decides"; rendered in the wire format of whichever endpoint is called."""

    text: str | None = "Hello from the local model."
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    # Streaming only: after the first event, wait for this event before sending the rest.
    gate: threading.Event | None = None
    # Streaming only: pause between events (seconds).
    delay: float = 0.0


@dataclass
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _pieces(text: str, n: int = 3) -> list[str]:
    """Split text into a few deltas so streams have several chunks."""
    if not text:
        return []
    size = max(1, len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


class LLMServer:
    def __init__(self) -> None:
        self.log: list[LoggedRequest] = []
        self.replies: dict[str, deque[ModelReply]] = defaultdict(deque)
        self._ids = itertools.count(1)
        self._tickets: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> LLMServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting ---------------------------------------------------------------------------------

    def queue(self, endpoint: str, *replies: ModelReply) -> None:
        """``endpoint``: "chat", "responses" or "messages"."""
        with self._lock:
            self.replies[endpoint].extend(replies)

    def next_reply(self, endpoint: str) -> ModelReply:
        with self._lock:
            queue = self.replies[endpoint]
            return queue.popleft() if queue else ModelReply()

    def next_id(self) -> int:
        return next(self._ids)


def _compressor(coding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(code a chunk, end the body) for one content coding, by the codec library itself, not the package's
    encoder: what the package decodes is checked against an independent encoder. Each chunk is flushed, so
    a stream's events leave as they come."""
    if coding in ("gzip", "deflate"):
        coder = zlib.compressobj(wbits=zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS)
        return lambda data: coder.compress(data) + coder.flush(zlib.Z_SYNC_FLUSH), coder.flush
    if coding == "br":
        import brotli

        brotli_coder = brotli.Compressor()
        return lambda data: brotli_coder.process(data) + brotli_coder.flush(), brotli_coder.finish
    import zstandard

    frame = zstandard.ZstdCompressor().compressobj()
    return lambda data: frame.compress(data) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK), frame.flush


def _as_is(data: bytes) -> bytes:
    return data


def _make_handler(owner: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _read_body(self) -> bytes:
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            body = self._read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            owner.log.append(LoggedRequest(self.command, self.path, headers, body))
            path = urlsplit(self.path).path
            try:
                payload = json.loads(body) if body and "json" in headers.get("content-type", "") else None
            except ValueError:
                payload = None
            if path == "/v1/chat/completions":
                self._chat(payload or {})
            elif path == "/v1/responses":
                self._responses(payload or {})
            elif path == "/v1/messages":
                self._messages(payload or {})
            elif path.startswith("/tools/"):
                self._tools(path, headers, payload)
            else:
                self._json(404, {"error": "not found", "path": path})

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        # -- plumbing ------------------------------------------------------------------------------

        def _json(
            self, status: int, value: Any, extra: dict[str, str] | None = None, encoding: str | None = None
        ) -> None:
            data = json.dumps(value).encode()
            for coding in encoding.split(", ") if encoding else ():
                compress, finish = _compressor(coding)
                data = compress(data) + finish()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if encoding:
                self.send_header("Content-Encoding", encoding)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _stream(
            self, events: Iterator[bytes], reply: ModelReply | None = None, encoding: str | None = None
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.end_headers()
            compress, finish = _compressor(encoding) if encoding else (_as_is, lambda: b"")

            def send(data: bytes) -> None:
                data = compress(data)
                if data:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

            for i, chunk in enumerate(events):
                send(chunk)
                if reply is not None and i == 0 and reply.gate is not None:
                    reply.gate.wait(10)
                if reply is not None and reply.delay:
                    time.sleep(reply.delay)
            tail = finish()
            if tail:
                self.wfile.write(f"{len(tail):x}\r\n".encode() + tail + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        # -- OpenAI Chat Completions ---------------------------------------------------------------

        def _chat(self, req: dict[str, Any]) -> None:
            reply = owner.next_reply("chat")
            n = owner.next_id()
            model = req.get("model", "gpt-test")
            cid = f"chatcmpl-{n}"
            calls = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
            finish = "tool_calls" if calls else "stop"
            usage = {
                "prompt_tokens": reply.input_tokens,
                "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
            }
            if not req.get("stream"):
                message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
                if calls:
                    message["tool_calls"] = calls
                self._json(
                    200,
                    {
                        "id": cid,
                        "object": "chat.completion",
                        "created": 1700000000,
                        "model": model,
                        "choices": [
                            {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
                        ],
                        "usage": usage,
                    },
                )
                return

            def chunk(
                delta: dict[str, Any], finish_reason: str | None = None, u: Any = None, choices: bool = True
            ) -> bytes:
                obj = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [
                        {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
                    ]
                    if choices
                    else [],
                    "usage": u,
                }
                return b"data: " + json.dumps(obj).encode() + b"\n\n"

            def events() -> Iterator[bytes]:
                yield chunk({"role": "assistant", "content": "" if reply.text else None})
                for piece in _pieces(reply.text or ""):
                    yield chunk({"content": piece})
                for i, call in enumerate(calls):
                    yield chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        }
                    )
                    for piece in _pieces(call["function"]["arguments"]):
                        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                yield chunk({}, finish)
                if (req.get("stream_options") or {}).get("include_usage"):
                    yield chunk({}, None, usage, choices=False)
                yield b"data: [DONE]\n\n"

            self._stream(events(), reply)

        # -- OpenAI Responses ----------------------------------------------------------------------

        def _responses(self, req: dict[str, Any]) -> None:
            reply = owner.next_reply("responses")
            n = owner.next_id()
            model = req.get("model", "gpt-test")
            output: list[dict[str, Any]] = []
            if reply.text is not None:
                output.append(
                    {
                        "type": "message",
                        "id": f"msg_{n}",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                    }
                )
            for i, (name, args) in enumerate(reply.tool_calls):
                output.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{n}_{i}",
                        "call_id": f"call_{n}_{i}",
                        "name": name,
                        "arguments": json.dumps(args),
                        "status": "completed",
                    }
                )
            usage = {
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
            full = {
                "id": f"resp_{n}",
                "object": "response",
                "created_at": 1700000000,
                "status": "completed",
                "model": model,
                "output": output,
                "usage": usage,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": req.get("tools") or [],
                "error": None,
                "incomplete_details": None,
                "instructions": None,
                "metadata": {},
                "temperature": 1.0,
                "top_p": 1.0,
            }
            if not req.get("stream"):
                self._json(200, full)
                return
            seq = itertools.count()

            def ev(kind: str, **fields: Any) -> bytes:
                obj = {"type": kind, "sequence_number": next(seq), **fields}
                return f"event: {kind}\ndata: {json.dumps(obj)}\n\n".encode()

            def events() -> Iterator[bytes]:
                yield ev(
                    "response.created",
                    response={**full, "status": "in_progress", "output": [], "usage": None},
                )
                for idx, item in enumerate(output):
                    if item["type"] == "message":
                        text = item["content"][0]["text"]
                        yield ev(
                            "response.output_item.added",
                            output_index=idx,
                            item={**item, "status": "in_progress", "content": []},
                        )
                        yield ev(
                            "response.content_part.added",
                            item_id=item["id"],
                            output_index=idx,
                            content_index=0,
                            part={"type": "output_text", "text": "", "annotations": []},
                        )
                        for piece in _pieces(text):
                            yield ev(
                                "response.output_text.delta",
                                item_id=item["id"],
                                output_index=idx,
                                content_index=0,
                                delta=piece,
                                logprobs=[],
                            )
                        yield ev(
                            "response.output_text.done",
                            item_id=item["id"],
                            output_index=idx,
                            content_index=0,
                            text=text,
                            logprobs=[],
                        )
                        yield ev(
                            "response.content_part.done",
                            item_id=item["id"],
                            output_index=idx,
                            content_index=0,
                            part=item["content"][0],
                        )
                    else:
                        yield ev(
                            "response.output_item.added",
                            output_index=idx,
                            item={**item, "status": "in_progress", "arguments": ""},
                        )
                        for piece in _pieces(item["arguments"]):
                            yield ev(
                                "response.function_call_arguments.delta",
                                item_id=item["id"],
                                output_index=idx,
                                delta=piece,
                            )
                        yield ev(
                            "response.function_call_arguments.done",
                            item_id=item["id"],
                            output_index=idx,
                            arguments=item["arguments"],
                            name=item["name"],
                        )
                    yield ev("response.output_item.done", output_index=idx, item=item)
                yield ev("response.completed", response=full)

            self._stream(events(), reply)

        # -- Anthropic Messages --------------------------------------------------------------------

        def _messages(self, req: dict[str, Any]) -> None:
            reply = owner.next_reply("messages")
            n = owner.next_id()
            model = req.get("model", "claude-test")
            content: list[dict[str, Any]] = []
            if reply.text is not None:
                content.append({"type": "text", "text": reply.text})
            for i, (name, args) in enumerate(reply.tool_calls):
                content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
            stop = "tool_use" if reply.tool_calls else "end_turn"
            message = {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
            }
            if not req.get("stream"):
                self._json(200, message)
                return

            def ev(kind: str, **fields: Any) -> bytes:
                return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

            def events() -> Iterator[bytes]:
                yield ev(
                    "message_start",
                    message={
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
                    },
                )
                yield ev("ping")
                for idx, block in enumerate(content):
                    if block["type"] == "text":
                        yield ev("content_block_start", index=idx, content_block={"type": "text", "text": ""})
                        for piece in _pieces(block["text"]):
                            yield ev(
                                "content_block_delta", index=idx, delta={"type": "text_delta", "text": piece}
                            )
                    else:
                        yield ev("content_block_start", index=idx, content_block={**block, "input": {}})
                        for piece in _pieces(json.dumps(block["input"])):
                            yield ev(
                                "content_block_delta",
                                index=idx,
                                delta={"type": "input_json_delta", "partial_json": piece},
                            )
                    yield ev("content_block_stop", index=idx)
                yield ev(
                    "message_delta",
                    delta={"stop_reason": stop, "stop_sequence": None},
                    usage={"output_tokens": reply.output_tokens},
                )
                yield ev("message_stop")

            self._stream(events(), reply)

        # -- tools service -------------------------------------------------------------------------

        def _tools(self, path: str, headers: dict[str, str], payload: Any) -> None:
            query = parse_qs(urlsplit(self.path).query)
            if path == "/tools/weather" and self.command in ("GET", "HEAD"):
                city = query.get("city", ["?"])[0]
                self._json(200, {"city": city, "temp_c": 21, "sky": "clear"})
            elif path == "/tools/tickets" and self.command == "POST":
                key = headers.get("idempotency-key")
                with owner._lock:
                    if key and key in owner._tickets:
                        ticket = owner._tickets[key]
                    else:
                        ticket = {"id": f"T-{owner.next_id()}", "title": (payload or {}).get("title")}
                        if key:
                            owner._tickets[key] = ticket
                self._json(201, ticket, {"Location": f"/tools/tickets/{ticket['id']}"})
            elif path.startswith("/tools/tickets/") and self.command in ("PUT", "PATCH", "DELETE"):
                self._json(200, {"ticket": path.rsplit("/", 1)[1], "ok": True})
            elif path.startswith("/tools/compressed/"):
                enc = path.rsplit("/", 1)[1].replace("+", ", ")
                self._json(200, {"encoding": enc, "items": list(range(50)), "text": "x" * 500}, encoding=enc)
            elif path.startswith("/tools/sse/"):
                enc = path.rsplit("/", 1)[1]
                events = (f"event: tick\ndata: {json.dumps({'n': i})}\n\n".encode() for i in range(5))
                self._stream(events, None, None if enc == "identity" else enc)
            else:
                self._json(404, {"error": "no such tool", "path": path})

    return Handler


# -- run helpers: a recording run, then a replaying run over what it recorded --------------------


class MemoryCassette:
    """What ``RunContext.recorded`` needs (``events`` + ``payload(ref)``), without touching disk."""

    def __init__(self, events: list[Any]) -> None:
        self.events = list(events)

    def payload(self, ref: Any) -> Any:
        return None if ref is None else ref.inline


class run_in:
    """Activate a RunContext (``mode`` "record" or a replay mode) with HTTP interception installed."""

    def __init__(
        self,
        mode: str = "record",
        recorded: Any = None,
        settings: dict[str, Any] | None = None,
        cassette: str = "mem://test",
    ) -> None:
        from pytest_agentreplay.core.capture import Recorder, RunContext
        from pytest_agentreplay.core.events import RunMeta

        self.ctx = RunContext(
            Recorder(RunMeta(run_id=f"run-{mode}")),
            mode=mode,
            cassette=cassette,
            recorded=recorded,
            settings=settings or {},
        )
        self._uninstall: Any = None
        self._token: Any = None

    def __enter__(self) -> Any:
        from pytest_agentreplay.core.capture import push_active
        from pytest_agentreplay.intercept import install

        self._uninstall = install()
        self._token = push_active(self.ctx)
        return self.ctx

    def __exit__(self, *exc: object) -> None:
        from pytest_agentreplay.core.capture import pop_active

        pop_active(self.ctx, self._token)
        self._uninstall()


def http_events(ctx: Any) -> list[Any]:
    return [e for e in ctx.recorder.events if e.type in ("model.call", "http", "effect")]
