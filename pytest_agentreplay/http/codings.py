"""Serving a content-coded response in replay: a client that undoes the whole chain of codings is served
the stored decoded body, every other the body coded again with its header (not the recorded frame: only
the decoded body is what redaction vouches for), or decoded when the coding's library is missing here.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from . import bodies
from .exchange import HttpResponse

# Whether a client undoes a whole chain of codings (given in the order they were applied).
Decodes = Callable[[list[str]], bool]


def for_client(response: HttpResponse, decodes: Decodes) -> HttpResponse:
    """``response`` as this client must receive it (itself, unless the client left its coding undone)."""
    body = response.body
    coding = body.get("coding") if body else None
    if not isinstance(coding, str) or not coding:
        return response
    names = bodies.codings(coding)
    if not names or decodes(names):
        return response
    try:
        content = bodies.encode_content(response.content(), coding)
    except (ImportError, ValueError):
        return response
    assert body is not None
    headers = {k: v for k, v in response.headers.items() if k != "content-length"}
    headers["content-encoding"] = coding
    stored = {"content_type": body.get("content_type"), "base64": ""}
    wire = (*headers.items(), ("content-length", str(len(content))))
    return HttpResponse(response.status, headers, stored, _content=content, _wire=wire)


def supported(names: Container[str]) -> Decodes:
    """A client that undoes the codings in ``names`` and passes the others through."""
    return lambda chain: all(name in names for name in chain)


def aiohttp_decodes(auto_decompress: bool) -> Decodes:
    """aiohttp undoes one coding, of those it knows, with ``auto_decompress``."""
    return lambda chain: auto_decompress and len(chain) == 1 and chain[0] in ("gzip", "deflate", "br", "zstd")
