"""HTTP, library-neutral: requests and responses as the cassette stores them, classification of exchanges,
the provider adapters, recording of live exchanges. Imports no HTTP client (:mod:`..intercept` patches them).
"""

from __future__ import annotations

from .exchange import HttpRequest, HttpResponse

__all__ = ["HttpRequest", "HttpResponse"]
