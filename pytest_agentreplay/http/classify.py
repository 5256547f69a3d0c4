"""Classify an HTTP exchange: a model call (per provider adapter), a read, or a write effect.

Extensible: a run's ``settings.classify_hook`` (the plugin sets it from the
``pytest_agentreplay_classify_exchange`` hook when a project implements it) is asked first; its ``None``
lets the built-in rules decide. Classification must work from the request alone (replay classifies before
it knows which response to serve); ``response`` is passed when known.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, cast

from ..core.constants import GRPC_SCHEME
from ..core.run_settings import RunSettings
from ..exceptions import ConfigError, NoProviderError
from .exchange import HttpRequest, HttpResponse
from .providers import ollama, providers_of

Kind = Literal["model", "read", "write"]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class Classification(NamedTuple):
    kind: Kind
    # Model calls: which adapter and endpoint ("openai"/"chat.completions", ...).
    provider: str | None = None
    endpoint: str | None = None
    # Reads/writes: the tool name recorded on the event (defaults to host + path).
    tool_name: str | None = None
    # What the event's ``data.classification`` says when it says more than ``kind`` ("retrieval": a read of
    # a vector store's search, by the gRPC table).
    flavour: str | None = None

    @property
    def endpoint_key(self) -> str:
        return f"{self.provider}:{self.endpoint}"


def tool_name_for(request: HttpRequest, settings: RunSettings) -> str:
    """``settings.tool_names`` maps a host or host+path prefix to a name; else host + path."""
    target = request.host + request.path
    names = settings.tool_names
    if not names:  # the usual case: nothing to search
        return target
    # The longest prefix wins (the first of equal length).
    best = max((prefix for prefix in names if target.startswith(prefix)), key=len, default="")
    return names[best] if best else target


def classify_exchange(
    request: HttpRequest, response: HttpResponse | None, settings: RunSettings
) -> Classification:
    hook = settings.classify_hook
    if hook is not None:
        decided = hook(request.to_payload(), response.to_payload() if response is not None else None)
        if decided is not None:
            return _from_hook(str(decided), request, settings)
    model = providers_of(settings).match(request, settings)
    if model is not None:
        return Classification("model", provider=model[0], endpoint=model[1])
    if request.url.startswith(GRPC_SCHEME):
        from .grpc_calls import flavour  # heavy: only a gRPC call

        found = flavour(request.path)
        kind: Kind = "write" if found == "write" else "read"
        return Classification(
            kind, tool_name=tool_name_for(request, settings), flavour=found if found != kind else None
        )
    # A model API's call may read whatever its method (Ollama's ``POST /api/show``, its embeddings): served in
    # replay like any read, never stored as a write effect.
    kind = "read" if request.method in READ_METHODS or ollama.reads_only(request) else "write"
    return Classification(kind, tool_name=tool_name_for(request, settings))


def _from_hook(kind: str, request: HttpRequest, settings: RunSettings) -> Classification:
    if kind in ("read", "write"):
        return Classification(cast(Kind, kind), tool_name=tool_name_for(request, settings))
    if kind == "model":
        return _model(request, settings)
    raise ConfigError(
        f"pytest_agentreplay_classify_exchange returned {kind!r} for {request.method} {request.url}",
        evidence=["valid results: 'model', 'read', 'write' or None"],
        mode=None,
        fixes=[
            "return 'read' or 'write' for a tool service, 'model' for a model API a provider reads, or None "
            "to let the built-in rules decide",
        ],
    )


def _model(request: HttpRequest, settings: RunSettings) -> Classification:
    providers = providers_of(settings)
    found = providers.match(request, settings)
    if found is None:
        # An OpenAI-compatible gateway on a path of its own: try the request's origin as its base URL.
        origin = request.url.split("?", 1)[0].rsplit("/", 2)[0]
        widened = settings._replace(openai_compatible_base_urls=(origin, request.url.rsplit("/", 1)[0]))
        found = providers.match(request, widened)
    if found is not None:
        return Classification("model", provider=found[0], endpoint=found[1])
    # Raised to the caller (the replay policy refuses the call with it and keeps it in the run's failures):
    # an exception inside the user's HTTP client would be wrapped, retried or swallowed by it.
    raise NoProviderError(
        f"{request.method} {request.url} is classified as a model call, and no provider reads it",
        evidence=[
            "classified 'model' by the pytest_agentreplay_classify_exchange hook",
            f"providers asked, in order: {', '.join(p.NAME for p in providers.order)}",
        ],
        fixes=[
            "register a provider that reads this API: a class with NAME, match, request_fields and "
            "response_fields (pytest_agentreplay.Provider) returned by a pytest_agentreplay_providers hook "
            "in your conftest.py, or installed under the entry point group 'pytest_agentreplay.providers'",
            "or classify it 'read' or 'write' in pytest_agentreplay_classify_exchange (recorded as an HTTP "
            "read or an effect)",
            "for an OpenAI-compatible gateway, list its base URL in openai_compatible_base_urls",
        ],
    )


def _json_path(value: object, path: str) -> object:
    """``"data.id"`` / ``"$.data.items.0.id"`` -> the value, or None."""
    for part in path.removeprefix("$").strip(".").split("."):
        if not part:
            continue
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def extract_receipt(request: HttpRequest, response: HttpResponse, settings: RunSettings) -> object:
    """The receipt of a write: configured per host (JSON path or header name), else ``id``, else Location."""
    body = response.json()
    rule = settings.receipts.get(request.host)
    if rule:
        if rule.lower() in response.headers:
            return response.headers[rule.lower()]
        found = _json_path(body, rule)
        if found is not None:
            return found
    if isinstance(body, dict) and body.get("id") is not None:
        return body["id"]
    return response.headers.get("location")
