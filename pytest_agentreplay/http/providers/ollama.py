"""Ollama adapter: the native API's ``/api/chat`` and ``/api/generate``, streamed as newline-delimited JSON by
default; :func:`reads_only` tells its reads (``/api/show``...) apart. Its ``/v1`` endpoints are OpenAI's.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields

NAME = "ollama"
CHAT = "chat"
GENERATE = "generate"

_ENDPOINTS = {"/api/chat": CHAT, "/api/generate": GENERATE}
# The native API's endpoints that only read: model metadata and listings, embeddings. ``/api/show`` and the
# embeddings are POSTs, which the method alone would make write effects.
READ_PATHS = ("/api/show", "/api/tags", "/api/ps", "/api/embed", "/api/embeddings")
# Request keys beside ``options`` that change what the model answers.
_DECODING = ("format", "think", "raw", "template", "suffix")


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    path = request.path.rstrip("/")
    endpoint = next((name for suffix, name in _ENDPOINTS.items() if path.endswith(suffix)), None)
    if endpoint is None:
        return None
    # "/api/chat" is a common path: only a body naming a model (as Ollama's requests do) makes it Ollama's.
    body = request.json()
    return endpoint if isinstance(body, dict) and isinstance(body.get("model"), str) else None


def reads_only(request: HttpRequest) -> bool:
    """Whether ``request`` is a call of Ollama's native API that only reads (:data:`READ_PATHS`): a GET, or
    a POST whose JSON body names the model (``model``, or ``name`` in older clients' ``/api/show``), as
    Ollama's requests do ("/api/show" alone is a common path)."""
    if not request.path.rstrip("/").endswith(READ_PATHS):
        return False
    if request.method in ("GET", "HEAD"):
        return True
    body = request.json() if request.method == "POST" else None
    return isinstance(body, dict) and any(isinstance(body.get(key), str) for key in ("model", "name"))


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    # Ollama streams unless told not to.
    streams = isinstance(body, dict) and body.get("stream") is not False
    return fields.request_fields(body, _DECODING, nested=("options",), streamed=streams, digests=digests)


_USAGE_NAMES = (("prompt_eval_count", "input_tokens"), ("eval_count", "output_tokens"))


def _fold(endpoint: str, chunks: Iterable[object]) -> Document:
    texts: list[str] = []
    calls: list[Document] = []
    stop_reason: object = None
    usage: Document = {}
    model: object = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        model = model or chunk.get("model")
        if chunk.get("error") is not None:
            stop_reason = "error"
            continue
        message = chunk.get("message")
        if endpoint == CHAT and isinstance(message, dict):
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
            for call in message.get("tool_calls") or []:
                if isinstance(fields.obj(call).get("function"), dict):
                    calls.append(fields.function_call(call))
        elif endpoint == GENERATE and isinstance(chunk.get("response"), str):
            texts.append(chunk["response"])
        if chunk.get("done"):
            stop_reason = chunk.get("done_reason") or stop_reason
            usage = fields.with_total(fields.renamed_counts(chunk, _USAGE_NAMES))
    return fields.decided(texts, calls, stop_reason, usage, None, model)  # Ollama's answers carry no id


def response_fields(endpoint: str, body: Document | None) -> Document:
    return fields.from_body(
        body, lambda one: _fold(endpoint, [one]), lambda events: _fold(endpoint, fields.event_data(events))
    )
