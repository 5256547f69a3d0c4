"""What every provider's request says the same way: the model, the decoding settings, a hash of the tool
definitions and whether the answer streams."""

from __future__ import annotations

from collections.abc import Iterable

from ...core.canonical import hash_value
from ...core.documents import Document


def request_fields(
    body: object, decoding_keys: Iterable[str], *, nested: Iterable[str] = (), streamed: bool | None = None
) -> Document:
    """The request fields of a JSON body whose decoding settings are top-level keys (OpenAI, Anthropic),
    and, with ``nested``, also the settings of the first of those keys holding an object (Ollama's
    ``options``, Gemini's ``generationConfig``; top-level keys win). ``streamed``: what the provider says
    instead of the body's ``stream`` flag (Gemini's endpoint, Ollama streaming unless told not to)."""
    if not isinstance(body, dict):
        return {"model": None, "decoding": {}, "tools_hash": None, "streamed": bool(streamed)}
    decoding: Document = {}
    for key in nested:
        settings = body.get(key)
        if settings:
            if isinstance(settings, dict):
                decoding.update((k, v) for k, v in settings.items() if v is not None)
            break
    decoding.update((k, body[k]) for k in decoding_keys if body.get(k) is not None)
    tools = body.get("tools")
    return {
        "model": body.get("model"),
        "decoding": decoding,
        "tools_hash": hash_value(tools) if tools else None,
        "streamed": bool(body.get("stream")) if streamed is None else streamed,
    }


def renamed_counts(raw: object, names: Iterable[tuple[str, str]]) -> Document:
    """A provider's usage object under the event's names: ``(its key, our key)`` pairs, absent or null
    counts left out (Gemini's ``promptTokenCount``, Bedrock's ``inputTokens`` -> ``input_tokens``)."""
    if not isinstance(raw, dict):
        return {}
    return {ours: raw[theirs] for theirs, ours in names if raw.get(theirs) is not None}
