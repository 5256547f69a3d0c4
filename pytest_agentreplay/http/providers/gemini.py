"""Gemini adapter: ``models/{model}:generateContent`` and ``:streamGenerateContent``, AI Studio's URLs and
Vertex AI's alike (docs/providers.md; a Vertex AI call's data says ``vertex: true`` and the ``location``).
The model is named in the URL; a stream (SSE with ``?alt=sse``, else a JSON array) folds like a plain answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import fields
from .interface import InputFields

NAME = "gemini"
INPUT_FIELDS = InputFields(
    conversation=("contents",), system=("systemInstruction", "system_instruction"), tools=("tools",)
)
GENERATE = "generateContent"
STREAM = "streamGenerateContent"

# ".../models/gemini-2.5-flash:streamGenerateContent", ".../tunedModels/my-model:generateContent",
# Vertex AI's ".../endpoints/1234:generateContent".
_PATH = (
    r"/(?:models|tunedModels|endpoints)/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)\Z"
)
_VERTEX_LOCATION = r"/projects/[^/]+/locations/(?P<location>[^/]+)/"


def _path_match(request: HttpRequest) -> re.Match[str] | None:
    return re.search(_PATH, request.path.rstrip("/"))


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    found = _path_match(request)
    return found.group("method") if found is not None else None


def model_from_request(request: HttpRequest) -> str | None:
    """The model named in the URL (``gemini-2.5-flash``); Gemini request bodies carry none."""
    found = _path_match(request)
    return found.group("model") if found is not None else None


def url_fields(request: HttpRequest) -> Document:
    """Vertex AI's calls say so, with their location; AI Studio's add nothing."""
    path = request.path
    located = re.search(_VERTEX_LOCATION, path)
    if (
        located is None
        and "/publishers/" not in path
        and not request.host.endswith("aiplatform.googleapis.com")
    ):
        return {}
    return {"vertex": True, "location": located.group("location") if located is not None else None}


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    # Some proxies accept the model in the body too; the URL one is filled in by model_from_request.
    return fields.request_fields(
        body,
        ("toolConfig", "safetySettings", "cachedContent"),
        nested=("generationConfig", "generation_config"),
        streamed=endpoint == STREAM,
        digests=digests,
    )


_USAGE_NAMES: Final = (
    ("promptTokenCount", "input_tokens"),
    ("candidatesTokenCount", "output_tokens"),
    ("totalTokenCount", "total_tokens"),
    ("cachedContentTokenCount", "cached_input_tokens"),
    ("thoughtsTokenCount", "reasoning_tokens"),
    ("toolUsePromptTokenCount", "tool_use_input_tokens"),
)


def _fold(chunks: Iterable[object]) -> Document:
    """One decision from ``GenerateContentResponse`` chunks (a plain response is a single chunk)."""
    texts: list[str] = []
    calls: list[Document] = []
    stop_reason: object = None
    usage: object = None
    response_id: object = None
    model: object = None
    block: object = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        response_id = response_id or chunk.get("responseId")
        model = model or chunk.get("modelVersion")
        usage = chunk.get("usageMetadata") or usage  # cumulative: the last one counts
        block = fields.obj(chunk.get("promptFeedback")).get("blockReason") or block
        for candidate in chunk.get("candidates") or []:
            if not isinstance(candidate, dict) or candidate.get("index", 0) != 0:
                continue
            stop_reason = candidate.get("finishReason") or stop_reason
            for part in fields.obj(candidate.get("content")).get("parts") or []:
                if not isinstance(part, dict):
                    continue
                call = part.get("functionCall") or part.get("function_call")
                if isinstance(call, dict):
                    args = {} if call.get("args") is None else call["args"]
                    calls.append({"id": call.get("id"), "name": call.get("name"), "arguments": args})
                elif isinstance(part.get("text"), str) and not part.get("thought"):
                    texts.append(part["text"])
    stop_reason = block if stop_reason is None else stop_reason
    usage_fields = fields.renamed_counts(usage, _USAGE_NAMES)
    return fields.decided(texts, calls, stop_reason, usage_fields, response_id, model)


def response_fields(endpoint: str, body: Document | None) -> Document:
    value = body.get("json") if body else None
    if isinstance(value, list):  # the JSON-array stream (streamGenerateContent without alt=sse)
        return _fold(value)
    return fields.from_body(body, lambda one: _fold([one]), lambda events: _fold(fields.event_data(events)))
