"""What every provider reads the same way: a request's model, decoding settings, tool-definition hash and
streaming, and a response's fields (the decision, usage, id and model)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from ...core.canonical import DigestMemo, hash_value, items_hash
from ...core.documents import Document
from ..exchange import HttpRequest


def paths_under(request: HttpRequest, bases: Iterable[str]) -> list[str]:
    """The paths ``request``'s URL names under each of ``bases`` (configured base URLs) it starts with."""
    url = request.url
    found = (base.rstrip("/") for base in bases)
    return [url[len(base) :].split("?", 1)[0].rstrip("/") for base in found if url.startswith(base)]


def present(source: object, keys: Iterable[str] | None = None) -> Document:
    """The values of ``keys`` (else all) a JSON object holds that are not null (nothing: not an object)."""
    if not isinstance(source, dict):
        return {}
    return {k: source[k] for k in (source if keys is None else keys) if source.get(k) is not None}


def request_fields(
    body: object,
    decoding_keys: Iterable[str],
    *,
    nested: Iterable[str] = (),
    streamed: bool | None = None,
    digests: DigestMemo | None = None,
) -> Document:
    """The request fields of a JSON body whose decoding settings are ``decoding_keys`` (top-level) and the
    first of the ``nested`` objects (Ollama's ``options``, Gemini's ``generationConfig``); ``streamed``:
    what the provider says instead of the body's ``stream`` flag; ``digests``: see :func:`summary`."""
    if not isinstance(body, dict):
        return summary({}, None, bool(streamed))
    decoding = next((present(body[key]) for key in nested if body.get(key)), {})
    decoding.update(present(body, decoding_keys))
    stream_flag = bool(body.get("stream")) if streamed is None else streamed
    return summary(decoding, body.get("tools"), stream_flag, body.get("model"), digests)


def summary(
    decoding: Document, tools: object, streamed: bool, model: object = None, digests: DigestMemo | None = None
) -> Document:
    """The request fields: the model (None: named in the URL instead), decoding, tools' hash, streaming.
    ``digests``: the run's memo of the request body's objects by identity (the body's own, hashed with it
    first), from which a list of tools is hashed without writing its objects again."""
    return {
        "model": model,
        "decoding": decoding,
        "tools_hash": _tools_hash(tools, digests) if tools else None,
        "streamed": streamed,
    }


def _tools_hash(tools: object, digests: DigestMemo | None) -> str:
    if digests is not None and type(tools) is list:
        return items_hash(tools, digests)
    return hash_value(tools)


def renamed_counts(raw: object, names: Iterable[tuple[str, str]]) -> Document:
    """A provider's usage object under the event's names: ``(its key, our key)`` pairs, null counts left out
    (Gemini's ``promptTokenCount``, Bedrock's ``inputTokens`` -> ``input_tokens``)."""
    if not isinstance(raw, dict):
        return {}
    return {ours: raw[theirs] for theirs, ours in names if raw.get(theirs) is not None}


def with_total(usage: Document) -> Document:
    """``usage`` with ``total_tokens`` added, the sum, for a provider that counts input and output only."""
    if "input_tokens" in usage and "output_tokens" in usage:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage


def no_decision() -> Document:
    """The response fields of a body that holds no answer to read."""
    return {"decision": None, "usage": {}, "response_id": None, "response_model": None}


def decided(
    texts: Iterable[str], calls: list[Document], stop: object, usage: Document, rid: object, model: object
) -> Document:
    """The response fields of an answer: its text (None when empty), tool calls and stop reason."""
    decision = {"text": "".join(texts) or None, "tool_calls": calls, "stop_reason": stop}
    return {"decision": decision, "usage": usage, "response_id": rid, "response_model": model}


def from_body(
    body: Document | None, plain: Callable[[Document], Document], stream: Callable[[list[Document]], Document]
) -> Document:
    """The response fields of a stored body: a JSON object read by ``plain``, stream events by ``stream``."""
    if not body:
        return no_decision()
    if isinstance(body.get("sse"), list):
        return stream(body["sse"])
    value = body.get("json")
    return plain(value) if isinstance(value, dict) else no_decision()


def event_data(events: Iterable[object]) -> list[object]:
    """The ``data`` of each stored stream event: the chunks of a stream whose events are whole answers."""
    return [ev.get("data") for ev in events if isinstance(ev, dict)]


def parse_args(raw: object) -> object:
    """Tool-call arguments arrive as JSON text (whole, or joined from a stream's pieces): parsed, so diffs
    compare values, not text. A call without arguments (streams send "" or nothing) has ``{}``."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def text_parts(content: object) -> list[str]:
    """A message's text: a string, or the text of a list's ``{"type": "text"}`` parts (Mistral, Cohere)."""
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else []
    return [str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]


def obj(value: object) -> Document:
    """``value`` when it is a JSON object, else an empty one: a provider's optional parts read alike."""
    return value if isinstance(value, dict) else {}


def function_call(raw: object) -> Document:
    """An OpenAI-shaped tool call (``{"id", "function": {"name", "arguments"}}``) as the decision's."""
    call = obj(raw)
    fn = obj(call.get("function"))
    return {"id": call.get("id"), "name": fn.get("name"), "arguments": parse_args(fn.get("arguments"))}


def add_piece(calls: dict[int, Document], index: int, piece: object) -> None:
    """One piece (or the whole) of the OpenAI-shaped tool call at ``index``: its id and name when given,
    its arguments' text appended (arguments that are not text: kept as they are). Some proxies resend the
    whole name in every piece: kept once, else the pieces of a name concatenate."""
    slot = calls.setdefault(index, {"id": None, "name": None, "arguments": ""})
    call = obj(piece)
    fn = obj(call.get("function"))
    slot["id"] = call.get("id") or slot["id"]
    name = fn.get("name")
    if name and slot["name"] is None:
        slot["name"] = name
    elif name and name != slot["name"]:
        slot["name"] += name
    arguments = fn.get("arguments")
    if isinstance(arguments, str) and isinstance(slot["arguments"], str):
        slot["arguments"] += arguments
    elif arguments is not None:
        slot["arguments"] = arguments


def streamed_calls(calls: dict[int, Document]) -> list[Document]:
    """The tool calls a stream assembled (by index), their arguments parsed."""
    return [{**c, "arguments": parse_args(c["arguments"])} for _, c in sorted(calls.items())]
