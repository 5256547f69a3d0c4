"""What every provider's request says the same way: the model, the decoding settings, a hash of the tool
definitions and whether the answer streams."""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import hash_value
from ...core.documents import Document


def request_fields(body: object, decoding_keys: Iterable[str]) -> Document:
    """The request fields of a JSON body whose decoding settings are top-level keys (OpenAI, Anthropic)."""
    if not isinstance(body, dict):
        return {"model": None, "decoding": {}, "tools_hash": None, "streamed": False}
    tools = body.get("tools")
    return {
        "model": body.get("model"),
        "decoding": {k: body[k] for k in decoding_keys if body.get(k) is not None},
        "tools_hash": hash_value(tools) if tools else None,
        "streamed": bool(body.get("stream")),
    }


def renamed_counts(raw: object, names: Iterable[tuple[str, str]]) -> Document:
    """A provider's usage object under the event's names: ``(its key, our key)`` pairs, absent or null
    counts left out (Gemini's ``promptTokenCount``, Bedrock's ``inputTokens`` -> ``input_tokens``)."""
    if not isinstance(raw, dict):
        return {}
    return {ours: raw[theirs] for theirs, ours in names if raw.get(theirs) is not None}
