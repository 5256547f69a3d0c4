"""One local server on 127.0.0.1 speaking five providers' wire formats, for their official SDKs.

- Ollama's native API: ``POST /api/chat`` and ``/api/generate``, a JSON object, or (the default, unless the
  request says ``"stream": false``) newline-delimited JSON (``application/x-ndjson``) written as Ollama's Go
  server writes it: compact, keys in struct order, one object per line, chunked.
- Azure OpenAI: ``POST /openai/deployments/<deployment>/chat/completions?api-version=...`` and the v1 form
  ``/openai/v1/chat/completions``, Chat Completions JSON or SSE (with Azure's content-filter results).
- Vertex AI Gemini: ``POST /<version>/projects/P/locations/L/publishers/google/models/M:generateContent``
  and ``:streamGenerateContent?alt=sse`` (events separated by CRLF CRLF, as Google sends them).
- Mistral: ``POST /v1/chat/completions`` (a Mistral-shaped Chat Completions JSON or SSE stream).
- Cohere v2: ``POST /v2/chat``, JSON or SSE (``event:`` lines, ``content-delta`` and ``tool-call-*`` events).

Every dialect decides the same way: a conversation that already holds a tool result gets the text
``ANSWER``; any other gets a ``get_weather(city="Paris")`` tool call. The server also answers as an HTTP
proxy (an absolute URL in the request line), so a client pointed at ``http://api.mistral.ai`` through it
sends the host a real deployment would see. Every request is appended to ``log`` as ``(method, url)``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

ANSWER = "Sunny in Paris, 21 degrees."
CALL_ARGS = {"city": "Paris"}
_COMPACT = (",", ":")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=_COMPACT)


def _pieces(text: str) -> list[str]:
    size = max(1, len(text) // 3)
    return [text[i : i + size] for i in range(0, len(text), size)]


class ProviderServer:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> ProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "tool":
            return True
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "functionResponse" in part or "function_response" in part:
                return True
    return False


def _make_handler(owner: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            owner.log.append(("POST", self.path))
            parts = urlsplit(self.path)
            path, query = parts.path, parts.query
            body = json.loads(raw) if raw else {}
            answer = _has_tool_result(body)
            if path in ("/api/chat", "/api/generate"):
                self._ollama(path, body, answer)
            elif path.endswith("/chat/completions") and "/openai/" in path:
                self._openai_chat(body, answer, azure=True)
            elif path == "/v1/chat/completions":
                self._openai_chat(body, answer, azure=False)
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                self._gemini(path, query, answer)
            elif path == "/v2/chat":
                self._cohere(body, answer)
            else:
                self._send(404, "application/json", b'{"error":"not found"}')

        # -- plumbing ------------------------------------------------------------------------------

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _chunked(self, content_type: str, pieces: Iterator[str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in pieces:
                data = piece.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        # -- Ollama --------------------------------------------------------------------------------

        def _ollama(self, path: str, body: dict[str, Any], answer: bool) -> None:
            model = body.get("model", "llama3.2")
            created = "2025-05-01T10:00:00.123456Z"
            done: dict[str, Any] = {
                "done_reason": "stop",
                "done": True,
                "total_duration": 912345678,
                "load_duration": 1234567,
                "prompt_eval_count": 26,
                "prompt_eval_duration": 2345678,
                "eval_count": 9,
                "eval_duration": 3456789,
            }
            chat = path == "/api/chat"
            text = ANSWER if answer or not chat else ""
            calls = (
                [] if answer or not chat else [{"function": {"name": "get_weather", "arguments": CALL_ARGS}}]
            )

            def piece(content: str, final: bool, tool_calls: list[Any]) -> dict[str, Any]:
                out: dict[str, Any] = {"model": model, "created_at": created}
                if chat:
                    message: dict[str, Any] = {"role": "assistant", "content": content}
                    if tool_calls:
                        message["tool_calls"] = tool_calls
                    out["message"] = message
                else:
                    out["response"] = content
                if final:
                    out.update(done)
                    if not chat:
                        out["context"] = [1, 2, 3]
                else:
                    out["done"] = False
                return out

            if body.get("stream") is False:
                whole = piece(text, True, calls)
                self._send(200, "application/json; charset=utf-8", _dumps(whole).encode())
                return
            lines = [piece(p, False, []) for p in _pieces(text)] if text else []
            if calls:
                lines.append(piece("", False, calls))
            lines.append(piece("", True, []))
            self._chunked("application/x-ndjson", (_dumps(line) + "\n" for line in lines))

        # -- OpenAI-shaped: Azure OpenAI and Mistral -----------------------------------------------

        def _openai_chat(self, body: dict[str, Any], answer: bool, *, azure: bool) -> None:
            model = "gpt-4o-2024-08-06" if azure else body.get("model", "mistral-small-latest")
            call = {
                "id": "call_1" if azure else "D681PevKs",
                "type": "function",
                "function": {"name": "get_weather", "arguments": _dumps(CALL_ARGS)},
            }
            if not azure:
                call["index"] = 0
            usage = {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38}
            head: dict[str, Any] = {"id": "chatcmpl-42", "object": "chat.completion", "created": 1746000000}
            head["model"] = model
            finish = "stop" if answer else "tool_calls"
            filters = [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}]
            if not body.get("stream"):
                message: dict[str, Any] = {"role": "assistant", "content": ANSWER if answer else None}
                if not answer:
                    message["tool_calls"] = [call]
                whole = {**head, "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
                whole["usage"] = usage
                if azure:
                    whole["prompt_filter_results"] = filters
                self._send(200, "application/json", _dumps(whole).encode())
                return
            head["object"] = "chat.completion.chunk"

            def events() -> Iterator[str]:
                if azure:
                    yield (
                        "data: " + _dumps({"choices": [], "prompt_filter_results": filters, **head}) + "\n\n"
                    )
                deltas: list[dict[str, Any]] = (
                    [{"content": p} for p in _pieces(ANSWER)]
                    if answer
                    else [{"tool_calls": [{**call, "index": 0}]}]
                )
                for delta in [{"role": "assistant", "content": ""}, *deltas]:
                    chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    yield "data: " + _dumps(chunk) + "\n\n"
                last = {
                    **head,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    "usage": usage,
                }
                yield "data: " + _dumps(last) + "\n\n"
                yield "data: [DONE]\n\n"

            self._chunked("text/event-stream; charset=utf-8", events())

        # -- Vertex AI Gemini ----------------------------------------------------------------------

        def _gemini(self, path: str, query: str, answer: bool) -> None:
            usage = {"promptTokenCount": 20, "candidatesTokenCount": 6, "totalTokenCount": 26}
            tail = {"modelVersion": "gemini-2.0-flash-001", "createTime": "2025-05-01T10:00:00.1Z"}
            tail["responseId"] = "vx-1"

            def chunk(parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
                candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
                if finish:
                    candidate["finishReason"] = "STOP"
                return {
                    "candidates": [candidate],
                    "usageMetadata": {**usage, "trafficType": "ON_DEMAND"},
                    **tail,
                }

            call = [{"functionCall": {"name": "get_weather", "args": CALL_ARGS}}]
            if ":streamGenerateContent" not in path:
                whole = chunk([{"text": ANSWER}] if answer else call, True)
                self._send(200, "application/json; charset=UTF-8", _dumps(whole).encode())
                return
            assert "alt=sse" in query
            texts = _pieces(ANSWER) if answer else []
            chunks = [chunk([{"text": t}], i == len(texts) - 1) for i, t in enumerate(texts)] or [
                chunk(call, True)
            ]
            self._chunked("text/event-stream", ("data: " + _dumps(c) + "\r\n\r\n" for c in chunks))

        # -- Cohere v2 -----------------------------------------------------------------------------

        def _cohere(self, body: dict[str, Any], answer: bool) -> None:
            usage = {
                "billed_units": {"input_tokens": 17, "output_tokens": 8},
                "tokens": {"input_tokens": 700, "output_tokens": 8},
            }
            call = {
                "id": "get_weather_k2m1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": _dumps(CALL_ARGS)},
            }
            finish = "COMPLETE" if answer else "TOOL_CALL"
            if not body.get("stream"):
                message: dict[str, Any] = {"role": "assistant"}
                if answer:
                    message["content"] = [{"type": "text", "text": ANSWER}]
                else:
                    message["tool_plan"] = "I will look up the weather in Paris."
                    message["tool_calls"] = [call]
                whole = {"id": "c0-1", "message": message, "finish_reason": finish, "usage": usage}
                self._send(200, "application/json", _dumps(whole).encode())
                return

            def events() -> Iterator[dict[str, Any]]:
                yield {"id": "c0-2", "type": "message-start", "delta": {"message": {"role": "assistant"}}}
                if answer:
                    start = {"content": {"type": "text", "text": ""}}
                    yield {"type": "content-start", "index": 0, "delta": {"message": start}}
                    for piece in _pieces(ANSWER):
                        delta = {"message": {"content": {"text": piece}}}
                        yield {"type": "content-delta", "index": 0, "delta": delta}
                    yield {"type": "content-end", "index": 0}
                else:
                    plan = {"message": {"tool_plan": "I will look up the weather."}}
                    yield {"type": "tool-plan-delta", "delta": plan}
                    opened = {**call, "function": {"name": "get_weather", "arguments": ""}}
                    yield {
                        "type": "tool-call-start",
                        "index": 0,
                        "delta": {"message": {"tool_calls": opened}},
                    }
                    for piece in ('{"city":', '"Paris"}'):
                        args = {"tool_calls": {"function": {"arguments": piece}}}
                        yield {"type": "tool-call-delta", "index": 0, "delta": {"message": args}}
                    yield {"type": "tool-call-end", "index": 0}
                yield {"type": "message-end", "delta": {"finish_reason": finish, "usage": usage}}

            self._chunked(
                "text/event-stream",
                (f"event: {ev['type']}\ndata: {_dumps(ev)}\n\n" for ev in events()),
            )

    return Handler
