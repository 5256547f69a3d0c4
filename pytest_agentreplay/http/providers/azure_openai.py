"""Azure OpenAI adapter: OpenAI's wire format at Azure's addresses, named ``azure-openai``, its data adding
``deployment`` and ``api_version``. ``/openai/deployments/<deployment>/...`` counts on any host (API
Management keeps the path), the v1 API (``/openai/v1/...``) only on Azure's hosts (elsewhere it is OpenAI's).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from ...core.documents import Document
from ...core.run_settings import RunSettings
from ..exchange import HttpRequest
from . import openai

NAME = "azure-openai"
CHAT = openai.CHAT
RESPONSES = openai.RESPONSES

AZURE_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
_DEPLOYMENT = re.compile(r"/openai/deployments/(?P<deployment>[^/]+)/chat/completions\Z")


def match(request: HttpRequest, settings: RunSettings) -> str | None:
    if request.method != "POST":
        return None
    path = request.path.rstrip("/")
    if _DEPLOYMENT.search(path):
        return CHAT
    if path.endswith("/openai/responses"):
        return RESPONSES
    if request.host.endswith(AZURE_HOST_SUFFIXES):
        if path.endswith("/openai/v1/chat/completions"):
            return CHAT
        if path.endswith("/openai/v1/responses"):
            return RESPONSES
    return None


def model_from_request(request: HttpRequest) -> str | None:
    found = _DEPLOYMENT.search(request.path.rstrip("/"))
    return found.group("deployment") if found is not None else None


def url_fields(request: HttpRequest) -> Document:
    """The deployment (the URL's, else the one the body names as its model) and the ``api-version``."""
    deployment = model_from_request(request)
    if deployment is None:
        body = request.json()
        named = body.get("model") if isinstance(body, dict) else None
        deployment = named if isinstance(named, str) else None
    query = request.url.partition("?")[2].partition("#")[0]
    versions = parse_qs(query).get("api-version")
    return {"deployment": deployment, "api_version": versions[0] if versions else None}


request_fields = openai.request_fields
response_fields = openai.response_fields
