"""Client-independent request/response value objects, and their stored payload shapes.

Every interceptor (httpx, httpx2, urllib3, aiohttp) converts to these, so classification, recording
and replay are written once.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping

from ..core.constants import REDACTED
from ..core.documents import Document
from . import bodies, multipart, resend

# Headers whose values are credentials: never stored (the cassette is committed to a repository).
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "anthropic-organization-id",
    }
)
# Framing headers describe the bytes on the wire, which replay regenerates: stored bodies are
# decoded, so a stored Content-Encoding would make clients decode twice.
_FRAMING_HEADERS = frozenset({"content-encoding", "transfer-encoding"})
_REGENERATED = _FRAMING_HEADERS | {"content-length"}
_UNSTORED_REQUEST_HEADERS = frozenset({"content-encoding", "content-length"})
_DEFAULT_PORT_SUFFIXES = {"http": ":80", "https": ":443"}
# From after "://": the authority (up to "/", "?" or "#"), then the path (up to "?" or "#").
_AUTHORITY_PATH = re.compile(r"([^/?#]*)([^?#]*)")


def lower_headers(items: Mapping[str, object] | Iterable[tuple[str | bytes, object]]) -> dict[str, str]:
    """Lower-case header names; repeated headers are joined with ", " like HTTP allows."""
    out: dict[str, str] = {}
    pairs = items.items() if isinstance(items, Mapping) else items
    for name, value in pairs:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else str(value)
    return out


def redact_headers(
    headers: Mapping[str, str], *, without: frozenset[str] = frozenset(), ordered: bool = False
) -> dict[str, str]:
    """``headers`` with the secret ones' values redacted, those named in ``without`` left out; ``ordered``:
    sorted by name (as a loaded cassette holds them)."""
    out = dict(sorted(headers.items()) if ordered else headers.items())
    # Set operations over the few names that change, not a pass over every header: a request carries a
    # client's dozen or more, of which one or two are secret or left out.
    for name in out.keys() & without:
        del out[name]
    for name in out.keys() & SECRET_HEADERS:
        out[name] = REDACTED
    return out


def normalise_url(url: str) -> str:
    """Lower-case scheme/host, drop default ports and fragments, sort query parameters.

    String operations only (no ``urlsplit``/``parse_qsl``): this runs for every live call in replay,
    and for every recorded exchange when a run's index is built.
    Query pairs are sorted as raw ``k=v`` strings, so the order of parameters never matters.
    """
    base, _, query = url.partition("#")[0].partition("?")
    scheme_end = base.find("://")
    if scheme_end > 0:
        scheme = base[:scheme_end].lower()
        netloc, _, path = base[scheme_end + 3 :].partition("/")
        netloc = netloc.lower()
        suffix = _DEFAULT_PORT_SUFFIXES.get(scheme)
        if suffix is not None and netloc.endswith(suffix):
            netloc = netloc[: -len(suffix)]
        base = f"{scheme}://{netloc}/{path}"
    if not query:
        return base
    if "&" in query:
        pairs = query.split("&")
        if "" in pairs:
            pairs = [p for p in pairs if p]
        pairs.sort()
        query = "&".join(pairs)
    return f"{base}?{query}"


# Kept per URL (a pure function of it): a loaded cassette names each exchange's tool by its URL's host and
# path, and the call replaying it asks again for the same URL's.
@functools.lru_cache(maxsize=4096)
def host_and_path(url: str) -> tuple[str, str]:
    """The lower-cased host (no port, user or IPv6 brackets) and the path (``/`` when empty) of ``url``, with
    one regular-expression match: urlsplit costs more than the rest of the replay lookup."""
    start = url.find("://")
    # The pattern matches any string (both groups may be empty).
    found = _AUTHORITY_PATH.match(url, start + 3 if start >= 0 else 0)
    authority, path = found.groups() if found is not None else ("", "")
    if "@" in authority:
        authority = authority.rpartition("@")[2]
    bracket = authority.startswith("[")
    host = authority[1 : authority.find("]")] if bracket else authority.partition(":")[0]
    return host.lower(), path or "/"


def _compact_json(raw: bytes) -> Document | None:
    """The JSON object ``raw`` is the compact UTF-8 text of (written once, compared whole: the format check
    then needs no other writing), else None."""
    try:
        value = json.loads(raw)
        same = type(value) is dict and bodies.json_text(value, None).encode("utf-8") == raw
    except ValueError:  # not JSON, not UTF-8, or a lone surrogate written back
        return None
    return value if same else None


# Whether a client undoes a whole chain of content codings (given in the order they were applied).
Decodes = Callable[[list[str]], bool]


def decodes_all(names: Container[str]) -> Decodes:
    """A client that undoes the codings in ``names`` and passes the others through."""
    return lambda chain: all(name in names for name in chain)


def aiohttp_decodes(auto_decompress: bool) -> Decodes:
    """aiohttp undoes one coding, of those it knows, with ``auto_decompress``."""
    return lambda chain: auto_decompress and len(chain) == 1 and chain[0] in ("gzip", "deflate", "br", "zstd")


# Bounds a run's stored headers: one entry per method and host a run calls.
_STORED_HEADERS_SIZE = 64


class StoredHeaders(dict[tuple[str, str], tuple[dict[str, str], dict[str, str]]]):
    """A run's request headers as stored, per method and host: the last headers sent so (without those
    never stored) and their stored form (redacted, sorted). A client sends the same headers on every call:
    their stored form is made once, and each request's payload gets a copy of it (a dict of its own, which
    its holder may change). By method too: an agent's model client POSTs to the host its tools' client GETs
    from."""

    def stored(self, method: str, host: str, headers: Mapping[str, str]) -> dict[str, str]:
        """``headers`` as a request's payload stores them (:meth:`HttpRequest.to_payload`), in a new dict."""
        sent = dict(headers)
        for name in _UNSTORED_REQUEST_HEADERS:
            sent.pop(name, None)
        key = (method, host)
        last = self.get(key)
        # Equal dicts hold the same pairs (in any order): their sorted, redacted forms are equal.
        if last is not None and last[0] == sent:
            return dict(last[1])
        stored = redact_headers(sent, ordered=True)
        if last is not None or len(self) < _STORED_HEADERS_SIZE:
            self[key] = (sent, stored)
        return dict(stored)


# A plain class, not a dataclass: far cheaper to create at start-up.
class HttpRequest:
    __slots__ = ("_body_ready", "_host", "_path", "_stored_body", "body", "headers", "method", "url")

    def __init__(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes = b"",
        _stored_body: Document | None = None,
        _body_ready: bool = False,
    ) -> None:
        self.method, self.url, self.headers, self.body = method, url, headers, body
        self._stored_body, self._body_ready = _stored_body, _body_ready
        self._host: str | None = None
        self._path = "/"

    # Classification asks for host and path several times per call: the URL is split once.
    @property
    def host(self) -> str:
        if self._host is None:
            self._host, self._path = host_and_path(self.url)
        return self._host

    @property
    def path(self) -> str:
        if self._host is None:
            self._host, self._path = host_and_path(self.url)
        return self._path

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    def stored_body(self) -> Document | None:
        """The BODY shape (computed once: matching and recording both need it)."""
        if not self._body_ready:
            raw, coding = self._decoded()
            self._use_body(bodies.encode_body(raw, self.content_type, coding=coding))
        return self._stored_body

    def _decoded(self) -> tuple[bytes, str | None]:
        """The body with its content coding undone, and that coding (None: the body is as sent)."""
        header = self.headers.get("content-encoding")
        if not self.body or not header:
            return self.body, None
        decoder = bodies.Decoder(header)
        if not decoder.active:
            return self.body, None
        return decoder.feed(self.body) + decoder.flush(), decoder.coding

    def _use_body(self, body: Document | None) -> None:
        self._stored_body, self._body_ready = body, True

    def resend_body(self, previous: resend.Sent | None) -> resend.Sent | None:
        """Compute the stored body reusing ``previous`` (what the last request to this endpoint sent)
        where this request resends it; returns what the next request to the endpoint may reuse."""
        raw, coding = self._decoded()
        content_type = self.content_type
        if (
            not self._body_ready
            and previous is not None
            and (bodies.is_json_type(content_type) or (not content_type and raw[:1] == b"{"))
        ):
            extended = resend.extend(previous, raw)
            if extended is not None:
                value, sent, fmt = extended
                body: Document = {"json": value, "content_type": content_type}
                if fmt is not None:
                    body["format"] = fmt
                if coding is not None:
                    body["coding"] = coding
                self._use_body(body)
                return sent
        json_type = not content_type or (
            bodies.is_json_type(content_type) and not multipart.is_multipart(content_type)
        )
        if not self._body_ready and json_type and raw[:1] == b"{":
            parsed = _compact_json(raw)
            if parsed is not None:
                # What encode_body stores for the text it finds in the first format it tries, compact UTF-8.
                body = {"json": parsed, "content_type": content_type}
                if coding:
                    body["coding"] = coding
                self._use_body(body)
                return resend.remember(raw, parsed, None, whole=True)
        if not self._body_ready:
            self._use_body(bodies.encode_body(raw, content_type, coding=coding))
        stored = self._stored_body
        if stored and "json" in stored and "raw" not in stored:
            return resend.remember(raw, stored["json"], stored.get("format"))
        return None

    def json(self) -> object:
        body = self.stored_body()
        if body and "json" in body:
            return body["json"]
        if body and "text" in body:
            try:
                return json.loads(body["text"])
            except ValueError:
                return None
        return None

    def to_payload(self, known: StoredHeaders | None = None) -> Document:
        """``known``: the run's stored headers of its earlier requests (:class:`StoredHeaders`)."""
        # Redacted, without the framing headers (the body's length is the body's: kept, it would change on
        # every request of a conversation whose prompt changed, and so the cassette line of each one), in
        # one pass in the order a loaded cassette has them (sorted), so comparing a replayed request with
        # its recording is one C-level pass over equal layouts rather than a canonical re-serialisation.
        if known is None:
            headers = redact_headers(self.headers, without=_UNSTORED_REQUEST_HEADERS, ordered=True)
        else:
            headers = known.stored(self.method, self.host, self.headers)
        body = self.stored_body()
        if body is not None and "multipart" in body and "content-type" in headers:
            # The boundary is transport, new on every upload: stored like the body's, without it.
            headers["content-type"] = multipart.without_boundary(headers["content-type"])
        return {"body": body, "headers": headers, "method": self.method, "url": self.url}

    @classmethod
    def from_payload(cls, payload: Document) -> HttpRequest:
        method, url = str(payload.get("method", "GET")).upper(), str(payload.get("url", ""))
        headers = dict(payload.get("headers") or {})
        return cls(method, url, headers, _stored_body=payload.get("body"), _body_ready=True)

    def excerpt(self, limit: int = 160) -> str:
        raw = bodies.body_bytes(self.stored_body())
        text = raw[:limit].decode("utf-8", "replace")
        return text + ("..." if len(raw) > limit else "")


# A plain class, not a dataclass: far cheaper to create at start-up.
class HttpResponse:
    """A response to serve or that was received. ``body`` is the decoded BODY shape."""

    __slots__ = ("_content", "_wire", "body", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        body: Document | None,
        _content: bytes | None = None,
        # Wire headers for any method but HEAD, kept (with ``_content``) so that replay renders a
        # recorded response once however often it is served.
        _wire: tuple[tuple[str, str], ...] | None = None,
    ) -> None:
        self.status, self.headers, self.body = status, headers, body
        self._content, self._wire = _content, _wire

    def __eq__(self, other: object) -> bool:
        # As the dataclass compared: every field (tests compare a served response with an imported one).
        if not isinstance(other, HttpResponse):
            return NotImplemented
        mine = (self.status, self.headers, self.body, self._content, self._wire)
        return mine == (other.status, other.headers, other.body, other._content, other._wire)

    @property
    def is_sse(self) -> bool:
        body = self.body
        return body is not None and "sse" in body

    def to_payload(self) -> Document:
        return {"status": self.status, "headers": self.headers, "body": self.body}

    @classmethod
    def from_payload(cls, payload: Document) -> HttpResponse:
        # No copies: a served response only reads the recorded payload (it may be large).
        return cls(int(payload.get("status", 200)), payload.get("headers") or {}, payload.get("body"))

    def json(self) -> object:
        return self.body["json"] if self.body and "json" in self.body else None

    def wire_headers(self, method: str = "GET") -> list[tuple[str, str]]:
        """Headers to hand to a client in replay: framing regenerated for the served bytes."""
        if method != "HEAD":
            return list(self.wire_tuple())
        # A HEAD response announces the length of a body it does not carry: keep it.
        return self._framed(None if self.is_sse else self.headers.get("content-length"))

    def wire_tuple(self) -> tuple[tuple[str, str], ...]:
        """:meth:`wire_headers` for any method but HEAD, computed once and shared (hence a tuple)."""
        wire = self._wire
        if wire is None:
            recorded = self.headers.get("content-length")
            length = recorded if self.body is None else None if self.is_sse else str(len(self.content()))
            wire = self._wire = tuple(self._framed(length))
        return wire

    def _framed(self, length: str | None) -> list[tuple[str, str]]:
        out = [(k, v) for k, v in self.headers.items() if k not in _REGENERATED]
        if length is not None:
            out.append(("content-length", length))
        return out

    def iter_chunks(self) -> Iterator[bytes]:
        """The body as the client sees it; a stream (SSE, NDJSON, AWS event stream) one event per chunk,
        encoded when pulled."""
        body = self.body
        if not body:
            return
        if "sse" in body:
            encode = bodies.event_encoder(body)
            for ev in body["sse"]:
                yield encode(ev)
            return
        yield self.content()

    def for_client(self, decodes: Decodes) -> HttpResponse:
        """This response as a client that undoes the chains of codings ``decodes`` says must receive it:
        itself, or its decoded body coded again with its header (not the recorded frame: only the decoded
        body is what redaction vouches for), or decoded when the coding's library is missing here."""
        body = self.body
        coding = body.get("coding") if body else None
        if not body or not isinstance(coding, str) or not coding:
            return self
        names = bodies.codings(coding)
        if not names or decodes(names):
            return self
        try:
            content = bodies.encode_content(self.content(), coding)
        except (ImportError, ValueError):
            return self
        headers = {k: v for k, v in self.headers.items() if k != "content-length"}
        headers["content-encoding"] = coding
        stored = {"content_type": body.get("content_type"), "base64": ""}
        wire = (*headers.items(), ("content-length", str(len(content))))
        return HttpResponse(self.status, headers, stored, _content=content, _wire=wire)

    def content(self) -> bytes:
        if self._content is None:
            self._content = bodies.body_bytes(self.body)
        return self._content


def stored_response_headers(headers: Mapping[str, str], decoded: bool) -> dict[str, str]:
    """Headers as stored: secrets redacted, content-encoding dropped (the body is stored decoded)."""
    # Decoded, the length of the encoded body says nothing about the decoded one.
    return redact_headers(headers, without=_REGENERATED if decoded else _FRAMING_HEADERS)
