"""HTTP, library-neutral: requests and responses as the cassette stores them (bodies, SSE streams,
content encodings), classification of exchanges (model, read, write), the provider adapters, recording of
live exchanges. Imports no HTTP client and nothing of replay: the client libraries are patched by
:mod:`pytest_agentreplay.intercept`, which sits above replay. The network guard is
:mod:`pytest_agentreplay.guard`."""

from __future__ import annotations

from .classify import Classification, classify_exchange
from .exchange import HttpRequest, HttpResponse

__all__ = ["Classification", "HttpRequest", "HttpResponse", "classify_exchange"]
