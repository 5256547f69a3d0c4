"""The public provider interface (docs/providers.md): any object with the members of :class:`Provider`,
optionally ``INPUT_FIELDS`` (:class:`InputFields`: drift reports name a change of the conversation, system
prompt or tools), ``model_from_request(request)`` and ``url_fields(request)`` (what the URL names).
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol, runtime_checkable

from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest

ENTRY_POINT_GROUP: Final = "pytest_agentreplay.providers"


class InputFields(NamedTuple):
    """Where a provider's request body holds what the model is given: top-level keys of the JSON body.

    ``conversation``: lists whose items are the turns (each a JSON object with a ``role``);
    ``system``: the system prompt; ``tools``: the tool definitions."""

    conversation: tuple[str, ...] = ()
    system: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()

    def __or__(self, other: InputFields) -> InputFields:
        return InputFields(*(tuple(dict.fromkeys((*a, *b))) for a, b in zip(self, other, strict=True)))


def as_input_fields(value: object) -> InputFields | None:
    """``value`` as :class:`InputFields` (any object with the three fields, each a sequence of strings: a
    class re-imported under another module object is still one), or None when it is not one."""
    if isinstance(value, InputFields):
        return value
    parts: list[tuple[str, ...]] = []
    for name in ("conversation", "system", "tools"):
        part = getattr(value, name, None)
        if not isinstance(part, tuple | list) or not all(isinstance(item, str) for item in part):
            return None
        parts.append(tuple(part))
    return InputFields(*parts)


@runtime_checkable
class Provider(Protocol):
    """One model API, read from its HTTP exchanges (see the module's documentation for the shapes)."""

    # The ``provider`` of its events ("openai", "bedrock", "my-llm"): unique among a session's providers.
    NAME: str

    def match(self, request: HttpRequest, settings: RunSettings) -> str | None:
        """The endpoint ``request`` calls (named on the event, and the key replay serves model calls by, in
        recorded order) or None when this provider does not read it. From the request alone: replay asks
        before it knows the response. Called for every request of a run: keep it cheap."""
        ...

    def request_fields(self, endpoint: str, body: object) -> Document:
        """``model``, ``decoding`` (a dict), ``tools_hash`` (``core.canonical.hash_value`` of the tool
        definitions, or None) and ``streamed`` of a request (its parsed JSON body, or None: not JSON)."""
        ...

    def response_fields(self, endpoint: str, body: Document | None) -> Document:
        """``decision`` (``text``, ``tool_calls``: ``{"id", "name", "arguments"}`` each, ``stop_reason``),
        ``usage`` (``input_tokens``, ``output_tokens``...), ``response_id`` and ``response_model`` of a
        response's stored body: ``{"json": value}``, ``{"sse": [{"event", "data", ...}, ...]}`` (each
        ``data`` parsed when it is JSON), ``{"text": ...}``; None when there was no body."""
        ...
