"""AWS Bedrock Runtime adapter: ``Converse``, ``ConverseStream``, ``InvokeModel`` and
``InvokeModelWithResponseStream`` (docs/providers.md). An InvokeModel body is its model family's, named in
the endpoint (``invoke:anthropic``) by the model id, else told by its shape. Only an AWS SDK's request
counts: a service of one's own serving ``/model/x/invoke`` stays a tool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final
from urllib.parse import unquote

from ...core.canonical import DigestMemo
from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import anthropic, fields

NAME = "bedrock"
CONVERSE = "converse"
CONVERSE_STREAM = "converse-stream"
INVOKE = "invoke"
INVOKE_STREAM = "invoke-with-response-stream"

_PATH = r"/model/(?P<model>[^/]+)/(?P<op>converse|converse-stream|invoke|invoke-with-response-stream)\Z"
# The model families an InvokeModel body can be, by the model id's vendor (and product for Amazon).
ANTHROPIC, LLAMA, TITAN, NOVA = "anthropic", "llama", "titan", "nova"
_VENDORS = frozenset(
    {"anthropic", "meta", "amazon", "cohere", "ai21", "mistral", "deepseek", "openai", "qwen"}
)
_LLAMA_DECODING = ("temperature", "top_p", "max_gen_len")
_CONVERSE_DECODING = (
    "additionalModelRequestFields",
    "guardrailConfig",
    "performanceConfig",
    "promptVariables",
)
# An InvokeModel request body's family, told by its first key found here.
_REQUEST_SHAPES = {"anthropic_version": ANTHROPIC, "inputText": TITAN, "prompt": LLAMA, "messages": NOVA}


def _path_match(request: HttpRequest) -> re.Match[str] | None:
    return re.search(_PATH, request.path.rstrip("/"))


def _from_aws_sdk(request: HttpRequest) -> bool:
    if request.host.startswith("bedrock-runtime"):
        return True
    if "/bedrock/aws4_request" in request.headers.get("authorization", ""):
        return True
    return "amz-sdk-invocation-id" in request.headers


def family(model_id: str) -> str | None:
    """The InvokeModel body family a model id names (``us.anthropic.claude-...`` -> ``anthropic``)."""
    parts = model_id.rsplit("/", 1)[-1].lower().split(".")
    if len(parts) > 2 and parts[0] not in _VENDORS:
        parts = parts[1:]  # a cross-region inference profile: "us.", "eu.", "apac.", "global."
    vendor, product = parts[0], parts[1] if len(parts) > 1 else ""
    if vendor == "amazon":
        return TITAN if product.startswith("titan-text") else NOVA if product.startswith("nova") else None
    return {"anthropic": ANTHROPIC, "meta": LLAMA}.get(vendor)


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    found = _path_match(request)
    if found is None or not _from_aws_sdk(request):
        return None
    op = found.group("op")
    if op in (INVOKE, INVOKE_STREAM):
        named = family(unquote(found.group("model")))
        return f"{op}:{named}" if named else op
    return op


def model_from_request(request: HttpRequest) -> str | None:
    """The model id named in the URL, percent-decoding undone."""
    found = _path_match(request)
    return unquote(found.group("model")) if found is not None else None


def _split(endpoint: str) -> tuple[str, str | None]:
    op, _, named = endpoint.partition(":")
    return op, named or None


def _converse_request(body: Document) -> tuple[Document, object]:
    tool_config = fields.present(body.get("toolConfig"))
    decoding = {**fields.present(body.get("inferenceConfig")), **fields.present(tool_config, ("toolChoice",))}
    return {**decoding, **fields.present(body, _CONVERSE_DECODING)}, tool_config.get("tools")


def request_fields(endpoint: str, body: object, digests: DigestMemo | None = None) -> Document:
    op, named = _split(endpoint)
    streamed = op in (CONVERSE_STREAM, INVOKE_STREAM)
    if not isinstance(body, dict):
        return fields.summary({}, None, streamed)
    if not named and op not in (CONVERSE, CONVERSE_STREAM):
        named = next((kind for key, kind in _REQUEST_SHAPES.items() if key in body), None)
    tools: object = None
    if op in (CONVERSE, CONVERSE_STREAM) or named == NOVA:
        decoding, tools = _converse_request(body)
    elif named == ANTHROPIC:
        decoding, tools = fields.present(body, anthropic.DECODING), body.get("tools")
    elif named == TITAN:
        decoding = fields.present(body.get("textGenerationConfig"))
    else:
        decoding = fields.present(body, _LLAMA_DECODING)
    # The model is in the URL (model_from_request's).
    return fields.summary(decoding, tools, streamed, digests=digests)


_USAGE_NAMES: Final = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("totalTokens", "total_tokens"),
    ("cacheReadInputTokens", "cached_input_tokens"),
    ("cacheWriteInputTokens", "cache_write_input_tokens"),
)


def _from_blocks(content: Iterable[object], stop: object, usage: object) -> Document:
    """A Converse (or Nova) assistant message's content blocks -> the decision."""
    texts: list[str] = []
    calls: list[Document] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            calls.append({"id": use.get("toolUseId"), "name": use.get("name"), "arguments": use.get("input")})
    return fields.decided(texts, calls, stop, fields.renamed_counts(usage, _USAGE_NAMES), None, None)


def _converse_plain(body: Document) -> Document:
    content = fields.obj(fields.obj(body.get("output")).get("message")).get("content")
    return _from_blocks(content or [], body.get("stopReason"), body.get("usage"))


def _fold_converse(events: Iterable[tuple[object, object]]) -> Document:
    """ConverseStream events (and Nova's stream chunks, named the same way) -> one decision."""
    blocks: dict[int, Document] = {}
    partial: dict[int, list[str]] = {}
    stop: object = None
    usage: object = None
    for name, data in events:
        if isinstance(name, str) and name.endswith("Exception"):
            stop = stop or name
            continue
        if not isinstance(data, dict):
            continue
        index = data.get("contentBlockIndex")
        idx = index if isinstance(index, int) else 0
        if name == "contentBlockStart":
            use = fields.obj(data.get("start")).get("toolUse")
            if isinstance(use, dict):
                blocks[idx] = {"toolUse": {"toolUseId": use.get("toolUseId"), "name": use.get("name")}}
        elif name == "contentBlockDelta":
            delta = data.get("delta")
            if not isinstance(delta, dict):
                continue
            block = blocks.setdefault(idx, {})
            if isinstance(delta.get("text"), str):
                block["text"] = str(block.get("text") or "") + delta["text"]
            use = delta.get("toolUse")
            if isinstance(use, dict) and isinstance(use.get("input"), str):
                partial.setdefault(idx, []).append(use["input"])
        elif name == "messageStop":
            stop = data.get("stopReason")
        elif name == "metadata":
            usage = data.get("usage")
    for idx, parts in partial.items():
        blocks.setdefault(idx, {}).setdefault("toolUse", {})["input"] = fields.parse_args("".join(parts))
    return _from_blocks([blocks[i] for i in sorted(blocks)], stop, usage)


def _stream_events(body: Document) -> Iterator[tuple[object, object]]:
    for ev in body.get("sse") or []:
        if isinstance(ev, dict):
            yield ev.get("event"), ev.get("data")


def _chunks(body: Document) -> list[object]:
    """The model family's JSON of each ``chunk`` event of an InvokeModelWithResponseStream stream."""
    return [
        data.get("bytes") for name, data in _stream_events(body) if name == "chunk" and isinstance(data, dict)
    ]


def _metrics_usage(chunks: Iterable[object]) -> Document:
    """Bedrock's own count, added to a stream's last chunk (``amazon-bedrock-invocationMetrics``)."""
    for chunk in chunks:
        metrics = chunk.get("amazon-bedrock-invocationMetrics") if isinstance(chunk, dict) else None
        if isinstance(metrics, dict):
            return fields.renamed_counts(
                metrics, (("inputTokenCount", "input_tokens"), ("outputTokenCount", "output_tokens"))
            )
    return {}


_LLAMA_USAGE: Final = (("prompt_token_count", "input_tokens"), ("generation_token_count", "output_tokens"))


def _llama(chunks: Iterable[object]) -> Document:
    texts: list[str] = []
    stop: object = None
    usage: Document = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("generation"), str):
            texts.append(chunk["generation"])
        stop = chunk.get("stop_reason") or stop
        usage.update(fields.renamed_counts(chunk, _LLAMA_USAGE))
    return fields.decided(texts, [], stop, usage, None, None)


def _titan(chunks: Iterable[object]) -> Document:
    texts: list[str] = []
    stop: object = None
    usage: Document = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        usage.update(fields.renamed_counts(chunk, (("inputTextTokenCount", "input_tokens"),)))
        results = chunk.get("results")
        # A plain response holds results; a stream chunk is one result's piece, at the top level.
        for part in results if isinstance(results, list) else [chunk]:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("outputText"), str):
                texts.append(part["outputText"])
            stop = part.get("completionReason") or stop
            count = part.get("tokenCount", part.get("totalOutputTextTokenCount"))
            if count is not None:
                usage["output_tokens"] = count
    return fields.decided(texts, [], stop, usage, None, None)


def _nova_stream(chunks: Iterable[object]) -> Document:
    # Nova's stream chunks are ConverseStream's events, each an object of one key (its name).
    return _fold_converse(item for chunk in chunks if isinstance(chunk, dict) for item in chunk.items())


def _response_family(value: object) -> str | None:
    if not isinstance(value, dict):
        return None
    if "type" in value or "content" in value:
        return ANTHROPIC
    if "generation" in value:
        return LLAMA
    if "results" in value or "outputText" in value:
        return TITAN
    if value.keys() & {"output", "messageStart", "contentBlockDelta", "messageStop", "metadata"}:
        return NOVA
    return None


# Per InvokeModel family: the response fields of its stream's chunks, and of its plain body.
_READERS: Final[dict[str, tuple[Callable[[list[object]], Document], Callable[[Document], Document]]]] = {
    ANTHROPIC: (
        lambda chunks: anthropic.response_fields(anthropic.MESSAGES, {"sse": [{"data": c} for c in chunks]}),
        lambda value: anthropic.response_fields(anthropic.MESSAGES, {"json": value}),
    ),
    LLAMA: (_llama, lambda value: _llama([value])),
    TITAN: (_titan, lambda value: _titan([value])),
    NOVA: (_nova_stream, _converse_plain),
}


def _invoke(named: str | None, body: Document) -> Document:
    if "sse" in body:
        chunks = _chunks(body)
        reader = _READERS.get(named or next((f for f in map(_response_family, chunks) if f), ""))
        if reader is None:
            return fields.no_decision()
        found = reader[0](chunks)
        if not found["usage"]:
            found["usage"] = _metrics_usage(chunks)
        return found
    value = body.get("json")
    reader = _READERS.get(named or _response_family(value) or "")
    return reader[1](value) if reader is not None and isinstance(value, dict) else fields.no_decision()


def response_fields(endpoint: str, body: Document | None) -> Document:
    op, named = _split(endpoint)
    if body and op in (INVOKE, INVOKE_STREAM):
        return _invoke(named, body)
    if op == CONVERSE_STREAM:
        return _fold_converse(_stream_events(body)) if body and "sse" in body else fields.no_decision()
    return fields.from_body(body, _converse_plain, lambda events: fields.no_decision())
