"""Anthropic adapter: the Messages API (``/v1/messages``), plain and streamed."""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields
from .interface import InputFields

NAME = "anthropic"
INPUT_FIELDS = InputFields(conversation=("messages",), system=("system",), tools=("tools",))
MESSAGES = "messages"

DECODING = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "tool_choice",
    "stop_sequences",
    "thinking",
    "output_format",
    "output_config",
    "service_tier",
)


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    if request.path.rstrip("/").endswith("/v1/messages"):
        return MESSAGES
    return MESSAGES if "/messages" in fields.paths_under(request, settings.anthropic_base_urls) else None


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    return fields.request_fields(body, DECODING, digests=digests)


def _usage(raw: object) -> Document:
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return fields.with_total(fields.present(raw, keys))


def _from_content(
    content: Iterable[object], stop_reason: object, usage: object, message: Document
) -> Document:
    """The decision of a message's content blocks (``message``: the id and model of the answer)."""
    texts: list[str] = []
    calls: list[Document] = []
    server_calls: list[Document] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind in ("tool_use", "server_tool_use"):
            call = {"id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
            (calls if kind == "tool_use" else server_calls).append(call)
    found = fields.decided(texts, calls, stop_reason, _usage(usage), message.get("id"), message.get("model"))
    if server_calls:
        found["decision"]["server_tool_calls"] = server_calls
    return found


def _stream(events: list[Document]) -> Document:
    blocks: dict[int, Document] = {}
    partial_json: dict[int, list[str]] = {}
    message: Document = {}
    usage: Document = {}
    stop_reason = None
    for ev in events:
        data = ev.get("data")
        if not isinstance(data, dict):
            continue
        kind = data.get("type") or ev.get("event")
        if kind == "message_start":
            message = data.get("message") or {}
            usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            blocks[int(data.get("index", len(blocks)))] = block
        elif kind == "content_block_delta":
            idx = int(data.get("index", 0))
            block = blocks.setdefault(idx, {})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "input_json_delta":
                partial_json.setdefault(idx, []).append(delta.get("partial_json") or "")
            elif dtype in ("text_delta", "thinking_delta"):
                key = dtype.removesuffix("_delta")
                block[key] = (block.get(key) or "") + (delta.get(key) or "")
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason") is not None:
                stop_reason = delta["stop_reason"]
            # message_delta usage is cumulative: later values replace earlier ones.
            usage.update(fields.present(data.get("usage")))
    for idx, parts in partial_json.items():
        blocks[idx]["input"] = fields.parse_args("".join(parts))
    content = [blocks[i] for i in sorted(blocks)]
    return _from_content(content, stop_reason, usage, message)


def _plain(body: Document) -> Document:
    return _from_content(body.get("content") or [], body.get("stop_reason"), body.get("usage"), body)


def response_fields(endpoint: str, body: Document | None) -> Document:
    return fields.from_body(body, _plain, _stream)
