"""OpenAI adapter: Chat Completions (``/v1/chat/completions``) and the Responses API (``/v1/responses``).
A message's content may be a list of chunks (Mistral's): its text chunks' text is the text."""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields
from .interface import InputFields

NAME = "openai"
INPUT_FIELDS = InputFields(conversation=("messages", "input"), system=("instructions",), tools=("tools",))
CHAT = "chat.completions"
RESPONSES = "responses"

CHAT_DECODING = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "seed",
    "n",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "response_format",
    "reasoning_effort",
    "service_tier",
)
_RESPONSES_DECODING = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "truncation",
    "seed",
    "service_tier",
)


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    path = request.path.rstrip("/")
    # Every host counts (local servers, proxies); the path names the endpoint.
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/v1/responses"):
        return RESPONSES
    under = fields.paths_under(request, settings.openai_compatible_base_urls)
    return CHAT if "/chat/completions" in under else RESPONSES if "/responses" in under else None


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    keys = CHAT_DECODING if endpoint == CHAT else _RESPONSES_DECODING
    return fields.request_fields(body, keys, digests=digests)


def _usage(raw: object) -> Document:
    """Chat Completions' and the Responses API's usage (their keys differ) under the event's names."""
    if not isinstance(raw, dict):
        return {}
    details_in = raw.get("input_tokens_details") or raw.get("prompt_tokens_details")
    details_out = raw.get("output_tokens_details") or raw.get("completion_tokens_details")
    usage = {
        "input_tokens": raw.get("input_tokens", raw.get("prompt_tokens")),
        "output_tokens": raw.get("output_tokens", raw.get("completion_tokens")),
        "total_tokens": raw.get("total_tokens"),
        "cached_input_tokens": fields.present(details_in).get("cached_tokens"),
        "reasoning_tokens": fields.present(details_out).get("reasoning_tokens"),
    }
    return fields.present(usage)


def _chat(chunks: Iterable[object], key: str) -> Document:
    """Chat Completions' decision: of a response (``key`` ``message``) or its stream's chunks (``delta``)."""
    text: list[str] = []
    calls: dict[int, Document] = {}
    stop_reason = None
    usage: object = None
    response_id = None
    model = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue  # "[DONE]"
        response_id = response_id or chunk.get("id")
        model = model or chunk.get("model")
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            message = fields.obj(choice.get(key))
            # "" and absent content both mean "no text" (tool-only turns stream empty content deltas).
            text.extend(fields.text_parts(message.get("content")))
            for position, tc in enumerate(message.get("tool_calls") or []):
                fields.add_piece(calls, int(fields.obj(tc).get("index", position)), tc)
            stop_reason = choice.get("finish_reason") or stop_reason
    return fields.decided(text, fields.streamed_calls(calls), stop_reason, _usage(usage), response_id, model)


def _responses(output: Iterable[object], response: Document) -> Document:
    """The decision of a response object's output items (``output``: the completed items of a stream)."""
    texts: list[str] = []
    calls: list[Document] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id") or item.get("id"),
                    "name": item.get("name"),
                    "arguments": fields.parse_args(item.get("arguments")),
                }
            )
    reason = fields.obj(response.get("incomplete_details")).get("reason")
    usage, rid = _usage(response.get("usage")), response.get("id")
    return fields.decided(texts, calls, reason or response.get("status"), usage, rid, response.get("model"))


# The stream events carrying the response object as it stands.
_SNAPSHOTS = frozenset(
    f"response.{state}" for state in ("created", "in_progress", "completed", "incomplete", "failed")
)


def _responses_stream(events: list[Document]) -> Document:
    items: dict[int, Document] = {}
    final: Document = {}
    for ev in events:
        data = ev.get("data")
        if not isinstance(data, dict):
            continue
        kind = data.get("type") or ev.get("event")
        if kind in _SNAPSHOTS and isinstance(data.get("response"), dict):
            final = data["response"]
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            items[int(data.get("output_index", len(items)))] = data["item"]
    # Completed items are the accumulated deltas; the final response object is the fallback.
    output = [items[i] for i in sorted(items)] if items else list(final.get("output") or [])
    return _responses(output, final)


def response_fields(endpoint: str, body: Document | None) -> Document:
    if endpoint == CHAT:
        return fields.from_body(
            body,
            lambda one: _chat([one], "message"),
            lambda events: _chat(fields.event_data(events), "delta"),
        )
    return fields.from_body(body, lambda one: _responses(one.get("output") or [], one), _responses_stream)
