"""Serving a content-coded response in replay: each client reads what it read while recording.

A cassette stores a coded body decoded, with its coding noted (``"coding": "gzip, br"``, see
:mod:`.bodies`). Which bytes a client read live depends on the client and on what is installed beside it:

- httpx and httpx2 undo the codings of ``SUPPORTED_DECODERS`` (``br`` with brotli; ``zstd`` with
  zstandard for httpx, ``backports.zstd`` or Python 3.14 for httpx2) and pass the others through;
- urllib3 (requests) undoes those of ``HTTPResponse.CONTENT_DECODERS`` (zstd: ``backports.zstd``);
- aiohttp undoes one coding of gzip, deflate, br, zstd with ``auto_decompress`` on, and no chain.

A client that undoes the whole chain is served the decoded body without ``Content-Encoding`` (nothing to
compress, no library needed in CI, the same bytes it read). Every other is served the body coded again, with
the header, so it reads a coded frame as it did live (not byte for byte the recorded frame: the stored
body is the decoded one, which is the only form redaction can vouch for). When the coding cannot be
applied here (its library is missing), the decoded body is served.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from . import bodies
from .exchange import HttpResponse

# Whether a client undoes a whole chain of codings (given in the order they were applied).
Decodes = Callable[[list[str]], bool]

AIOHTTP_CODINGS = frozenset({"gzip", "deflate", "br", "zstd"})


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

    def decodes(chain: list[str]) -> bool:
        return all(name in names for name in chain)

    return decodes


def aiohttp_decodes(auto_decompress: bool) -> Decodes:
    def decodes(chain: list[str]) -> bool:
        return auto_decompress and len(chain) == 1 and chain[0] in AIOHTTP_CODINGS

    return decodes
