"""The public provider interface: what reads one model API's exchanges as ``model.call`` events.

A provider is any object with the members of :class:`Provider`: a module of functions (the built-in
``openai``, ``anthropic`` and ``gemini`` modules are providers) or an instance of a class (a project's own,
in its ``conftest.py``). It is asked, in order, whether it recognises a request (:meth:`Provider.match`
returns the endpoint it calls, such as ``"chat.completions"``, or None); the first that does reads the
exchange:

- :meth:`Provider.request_fields`: from the request body, the ``model``, the ``decoding`` settings (a
  dict), ``tools_hash`` (a hash of the tool definitions; :func:`pytest_agentreplay.core.canonical.hash_value`
  or None) and ``streamed``;
- :meth:`Provider.response_fields`: from the stored response body, the ``decision`` (``text``,
  ``tool_calls``: a list of ``{"id", "name", "arguments"}``, ``stop_reason``), the ``usage``
  (``input_tokens``, ``output_tokens``, ``total_tokens``...), ``response_id`` and ``response_model``. The
  body is the stored shape: ``{"json": value}`` for a JSON body, ``{"sse": [{"event", "data", ...}, ...]}``
  for a server-sent event stream (each event's ``data`` parsed as JSON when it is JSON), ``{"text": ...}``
  otherwise; None when the response had no body.

Two members are optional (a module of today's shape, with the four members above, stays a provider):

- ``INPUT_FIELDS``: an :class:`InputFields` naming where the request body holds the conversation, the
  system prompt and the tool definitions. Drift reports name a change there for what it is (``user message
  (turns[1])``, ``system prompt``) and count a message every later call resends once; the sandbox and
  model-comparison modes report conversation changes as expected (their served or live answers change
  them). Without it only the built-in names count (``messages``, ``input``, ``contents``...).
- ``model_from_request(request) -> str | None``: the model when the API names it in the URL (Gemini,
  Bedrock), used when the body names none.

Registration, per pytest session, first match wins in this order: the providers a
``pytest_agentreplay_providers`` hook returns (a project's ``conftest.py``), those of the entry point group
``pytest_agentreplay.providers`` (installed distributions), then the built-in ones. A provider named like a
built-in one replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest

ENTRY_POINT_GROUP: Final = "pytest_agentreplay.providers"


@dataclass(frozen=True, slots=True)
class InputFields:
    """Where a provider's request body holds what the model is given: top-level keys of the JSON body.

    ``conversation``: lists whose items are the turns (each a JSON object with a ``role``);
    ``system``: the system prompt; ``tools``: the tool definitions."""

    conversation: tuple[str, ...] = ()
    system: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()

    def __or__(self, other: InputFields) -> InputFields:
        def merged(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        return InputFields(
            merged(self.conversation, other.conversation),
            merged(self.system, other.system),
            merged(self.tools, other.tools),
        )


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
        """``model``, ``decoding``, ``tools_hash`` and ``streamed`` of a request (its parsed JSON body, or
        None when it is not JSON)."""
        ...

    def response_fields(self, endpoint: str, body: Document | None) -> Document:
        """``decision``, ``usage``, ``response_id`` and ``response_model`` of a response's stored body."""
        ...
