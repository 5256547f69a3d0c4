"""Cohere adapter: the v2 Chat API (``POST /v2/chat``), plain and streamed (``content-delta``,
``tool-call-start``/``-delta`` and ``message-end`` events), both folded into the same decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields

NAME = "cohere"
CHAT = "chat"

_DECODING = (
    "temperature",
    "max_tokens",
    "p",
    "k",
    "seed",
    "stop_sequences",
    "frequency_penalty",
    "presence_penalty",
    "response_format",
    "safety_mode",
    "tool_choice",
    "strict_tools",
    "thinking",
    "logprobs",
    "citation_options",
)


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    return CHAT if request.path.rstrip("/").endswith("/v2/chat") else None


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    return fields.request_fields(body, _DECODING, digests=digests)


def _usage(raw: object) -> Document:
    if not isinstance(raw, dict):
        return {}
    tokens = fields.obj(raw.get("tokens")) or fields.obj(raw.get("billed_units"))
    usage = {
        **fields.present(tokens, ("input_tokens", "output_tokens")),
        "cached_input_tokens": raw.get("cached_tokens"),
    }
    return fields.present(usage)


def _plain(body: Document) -> Document:
    message = fields.obj(body.get("message"))
    texts = fields.text_parts(message.get("content"))
    calls = [fields.function_call(c) for c in message.get("tool_calls") or []]
    usage = _usage(body.get("usage"))
    return fields.decided(texts, calls, body.get("finish_reason"), usage, body.get("id"), body.get("model"))


def _stream(events: Iterable[object]) -> Document:
    texts: list[str] = []
    calls: dict[int, Document] = {}
    stop_reason: object = None
    usage: object = None
    response_id: object = None
    for ev in events:
        data = ev.get("data") if isinstance(ev, dict) else None
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        message = fields.obj(fields.obj(data.get("delta")).get("message"))
        if kind == "message-start":
            response_id = data.get("id")
        elif kind == "content-delta":
            content = message.get("content")
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                texts.append(content["text"])
        elif kind in ("tool-call-start", "tool-call-delta"):
            fields.add_piece(calls, int(data.get("index") or 0), message.get("tool_calls"))
        elif kind == "message-end":
            delta = fields.obj(data.get("delta"))
            stop_reason = delta.get("finish_reason")
            usage = delta.get("usage")
    return fields.decided(texts, fields.streamed_calls(calls), stop_reason, _usage(usage), response_id, None)


def response_fields(endpoint: str, body: Document | None) -> Document:
    return fields.from_body(body, _plain, _stream)
