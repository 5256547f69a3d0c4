"""The on-disk form of events (format 4): conversations stored once, defaults left out.

An agent conversation resends its whole history on every model call. On disk, an HTTP request whose
JSON body repeats an earlier request to the same method and URL is stored as a delta over it:

    "inline": {
      "body": {"content_type": "application/json", "json": {"messages": [<the new messages only>]}},
      "delta": {"back": 1, "headers": "same", "json": {"extends": {"messages": 12}, "same": ["model"]}},
      "method": "POST", "url": "https://api.openai.com/v1/chat/completions"
    }

``back`` counts earlier requests to the same method and URL (1: the latest). The body's JSON is the base's
keys in ``same``, each list in ``extends`` as the base's first n items then those stored here, and the other
keys as stored here; ``"headers": "same"`` copies the base's headers, ``"base"`` changes or adds the ones
stored here (``headers_dropped`` removed). So a conversation grows by its new messages per call, and a
changed system prompt is one line.

Also left out, and restored on load: ``run_id``, ``data_class`` ``internal``, a model call's
``data.request_hash`` when it hashes the stored body; the HTTP media types are written ``@http-request``/
``@http-response`` (a user's media type starting with ``@`` gets one more). Left out for good: the transport
headers (``TRANSPORT_HEADERS``, docs/cassettes.md), which would make an SDK upgrade a diff of every request.
Digests are over the stored form: an accepted change rewrites the changed event's lines only.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from ..core.canonical import DigestMemo, request_digest, same_json
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE, TRANSPORT_HEADERS
from ..core.documents import Document
from ..http.exchange import host_and_path

# The stored BODY of an earlier request, by ref (``resolve(ref)`` loads one kept in the blob store).
Resolver = Callable[[Mapping[str, object]], object]

_MEDIA_ALIASES = {HTTP_REQUEST_MEDIA_TYPE: "@http-request", HTTP_RESPONSE_MEDIA_TYPE: "@http-response"}
MEDIA_FULL = {alias: full for full, alias in _MEDIA_ALIASES.items()}
REF_FIELDS = ("input_ref", "output_ref")
DELTA = "delta"
# How many earlier requests to the same endpoint are tried as a base (interleaved conversations).
_BASES_TRIED = 4
_ABSENT = object()


# -- lean events: what an HTTP event repeats ----------------------------------------------------------

HTTP_EVENTS = ("http", "effect")
PREV_HEADERS = "@prev"


def default_tool_name(url: str) -> str:
    """The tool name the HTTP layer gives an exchange no classifier named: host and path."""
    host, path = host_and_path(url)
    return host + path


def stored_refs(events: object) -> Iterator[tuple[int, str, Document]]:
    """(index, field, ref) of every blob reference of a cassette's events as stored, not validated."""
    for index, event in enumerate(events if isinstance(events, list) else []):
        for name in REF_FIELDS:
            ref = event.get(name) if isinstance(event, dict) else None
            if isinstance(ref, dict) and ref.get("sha256") is not None:
                yield index, name, ref


def inline_request(event: Mapping[str, object]) -> Document | None:
    ref = event.get("input_ref")
    if not isinstance(ref, dict) or ref.get("media_type") != HTTP_REQUEST_MEDIA_TYPE:
        return None
    payload = ref.get("inline")
    return payload if isinstance(payload, dict) else None


def _lean_http_fields(event: Document, out: Document) -> None:
    """Leave out of an HTTP event what its request says: ``data.method``/``url``, the default tool name."""
    request = inline_request(event) if event.get("type") in HTTP_EVENTS else None
    if request is None:
        return
    method, url = request.get("method"), request.get("url")
    data = event.get("data")
    if isinstance(data, dict) and data.get("method") == method and data.get("url") == url:
        out["data"] = {k: v for k, v in out.get("data", data).items() if k not in ("method", "url")}
    tool = event.get("tool")
    if isinstance(tool, dict) and isinstance(url, str) and tool.get("name") == default_tool_name(url):
        rest = {k: v for k, v in tool.items() if k != "name"}
        if rest:
            out["tool"] = rest
        else:
            out.pop("tool", None)


def _lean_response(ref: Document) -> Document:
    """A JSON response kept byte for byte (``raw``) needs no parsed copy on disk: it is parsed on load."""
    payload = ref.get("inline")
    if not isinstance(payload, dict):
        return ref
    body = payload.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("raw"), str) or "json" not in body:
        return ref
    try:
        parsed = json.loads(body["raw"])
    except ValueError:
        return ref
    if not same_json(parsed, body["json"]):
        return ref
    lean_body = {k: v for k, v in body.items() if k != "json"}
    return {**ref, "inline": {**payload, "body": lean_body}}


# -- encoding ---------------------------------------------------------------------------------------


def request_parts(payload: object) -> tuple[tuple[str, str], object, Document] | None:
    """(method, url), headers and JSON object body of a full HTTP request payload, else None: the requests
    a later one may be a delta over."""
    if not isinstance(payload, dict) or DELTA in payload:
        return None
    body = payload.get("body")
    method, url = payload.get("method"), payload.get("url")
    if not isinstance(body, dict) or not isinstance(body.get("json"), dict):
        return None
    if not isinstance(method, str) or not isinstance(url, str):
        return None
    return (method, url), payload.get("headers"), body["json"]


def _json_delta(base: Document, current: Document) -> tuple[Document, Document, int]:
    """(delta spec, what stays stored, a cost: items stored) of ``current`` over ``base``."""
    same: list[str] = []
    extends: dict[str, int] = {}
    rest: Document = {}
    cost = 0
    for key, value in current.items():
        if key in base:
            old = base[key]
            if same_json(old, value):
                same.append(key)
                continue
            if isinstance(old, list) and isinstance(value, list) and old and len(value) >= len(old):
                keep = 0
                for a, b in zip(old, value, strict=False):
                    if not same_json(a, b):
                        break
                    keep += 1
                if keep:
                    extends[key] = keep
                    rest[key] = value[keep:]
                    cost += len(value) - keep
                    continue
        rest[key] = value
        cost += len(value) if isinstance(value, list) else 1
    spec: Document = {}
    if extends:
        spec["extends"] = extends
    if same:
        spec["same"] = sorted(same)
    return spec, rest, cost


def encode_events(events: list[Document], run_id: str, *, resolve: Resolver | None = None) -> list[Document]:
    """The stored form of in-memory event dicts (not modified). ``resolve(ref)`` loads a request kept in the
    blob store; one that cannot be read ends delta encoding (``back`` could no longer be counted)."""
    stored: list[Document] = []
    earlier: dict[tuple[str, str], list[tuple[object, Document]]] = {}
    blind = False
    last_headers: object = _ABSENT  # the headers of the previous request, whatever its endpoint
    digests = DigestMemo()
    for event in events:
        out = {k: v for k, v in event.items() if not (k == "run_id" and v == run_id)}
        data = event.get("data")
        if (
            isinstance(data, dict)
            and isinstance(data.get("request_hash"), str)
            and data["request_hash"] == stored_request_hash(event, digests)
        ):
            out["data"] = {k: v for k, v in data.items() if k != "request_hash"}
        _lean_http_fields(event, out)
        for name in REF_FIELDS:
            ref = event.get(name)
            if not isinstance(ref, dict):
                continue
            new_ref = dict(ref)
            if name == "input_ref" and ref.get("media_type") == HTTP_REQUEST_MEDIA_TYPE:
                payload = ref.get("inline")
                # A request kept in the blob store stays there; read, it still counts as a base.
                full = _read(resolve, ref) if payload is None and ref.get("sha256") is not None else payload
                blind = blind or (full is None and ref.get("sha256") is not None)
                if blind:
                    last_headers = _ABSENT
                else:
                    parts = request_parts(full)
                    if parts is not None:
                        new_ref = _delta_ref(new_ref, payload, parts, earlier)
                    new_ref, last_headers = _prev_headers(new_ref, full, last_headers)
            elif name == "output_ref" and ref.get("media_type") == HTTP_RESPONSE_MEDIA_TYPE:
                new_ref = _lean_response(new_ref)
            if new_ref.get("data_class") == "internal":
                del new_ref["data_class"]
            media = new_ref.get("media_type")
            if isinstance(media, str):
                new_ref["media_type"] = _MEDIA_ALIASES.get(media) or (
                    "@" + media if media[:1] == "@" else media
                )
            out[name] = new_ref
        stored.append(out)
    return stored


def _read(resolve: Resolver | None, ref: Mapping[str, object]) -> object:
    """A blob-stored request, or None when it cannot be read."""
    if resolve is None:
        return None
    try:
        return resolve(ref)
    except Exception:  # an unreadable blob only ends delta encoding
        return None


def stored_request_hash(event: Mapping[str, object], memo: DigestMemo) -> str | None:
    """A model call's ``data.request_hash`` as its stored JSON body gives it (None for other events): left
    out when it is this one, as a changed system prompt would otherwise change it in every call."""
    payload = inline_request(event) if event.get("type") == "model.call" else None
    body = payload.get("body") if payload is not None else None
    if not isinstance(body, dict) or body.get("json") is None:
        return None
    try:
        return request_digest(body["json"], memo)
    except (TypeError, ValueError):  # not JSON: the schema check names it
        return None


def _prev_headers(ref: Document, full: object, last: object) -> tuple[Document, object]:
    """Headers equal to the previous request's (any endpoint) written ``"@prev"``; the ref and the headers
    the next request compares with."""
    if not isinstance(full, dict) or DELTA in full:
        return ref, _ABSENT
    headers = full.get("headers")
    inline = ref.get("inline")
    if (
        isinstance(headers, dict)
        and isinstance(inline, dict)
        and isinstance(inline.get("headers"), dict)
        and DELTA not in inline
        and last is not _ABSENT
        and same_json(last, headers)
    ):
        ref = {**ref, "inline": {**inline, "headers": PREV_HEADERS}}
    return ref, headers if isinstance(headers, dict) else _ABSENT


def _delta_ref(
    ref: Document,
    payload: object,
    parts: tuple[tuple[str, str], object, Document],
    earlier: dict[tuple[str, str], list[tuple[object, Document]]],
) -> Document:
    endpoint, headers, body_json = parts
    history = earlier.setdefault(endpoint, [])
    best: tuple[int, int, Document, Document] | None = None
    if isinstance(payload, dict):  # inline: may become a delta (a blob-stored one stays as it is)
        for back, (base_headers, base_json) in enumerate(reversed(history[-_BASES_TRIED:]), 1):
            json_spec, rest, cost = _json_delta(base_json, body_json)
            if not json_spec or (best is not None and cost >= best[0]):
                continue
            spec: Document = {"back": back}
            if same_json(base_headers, headers):
                spec["headers"] = "same"
            elif isinstance(base_headers, dict) and isinstance(headers, dict):
                # Most headers repeat; content-length and a retry count change from call to call.
                spec["headers"] = "base"
                dropped = sorted(k for k in base_headers if k not in headers)
                if dropped:
                    spec["headers_dropped"] = dropped
            spec["json"] = json_spec
            best = (cost, back, spec, rest)
    history.append((headers, body_json))
    if best is None or not isinstance(payload, dict):
        return ref
    _, back, spec, rest = best
    inline = {k: v for k, v in payload.items() if k not in ("body", "headers")}
    base_headers = history[-1 - back][0]
    # "base" headers are chosen only when this request's and the base's headers are both objects.
    if spec.get("headers") == "base" and isinstance(headers, dict) and isinstance(base_headers, dict):
        inline["headers"] = {
            k: v for k, v in headers.items() if not same_json(base_headers.get(k, _ABSENT), v)
        }
    elif "headers" not in spec and "headers" in payload:
        inline["headers"] = payload["headers"]
    inline["body"] = {**payload["body"], "json": rest}
    inline[DELTA] = spec
    return {**ref, "inline": inline}


# In memory and in formats 1-3 the full media type; in format 4's stored form its alias.
_REQUEST_MEDIA: Final = frozenset({HTTP_REQUEST_MEDIA_TYPE, _MEDIA_ALIASES[HTTP_REQUEST_MEDIA_TYPE]})
_TRANSPORT: Final = re.compile(
    "|".join(re.escape(name).replace(r"\*", ".*") for name in TRANSPORT_HEADERS), re.IGNORECASE
)


def is_transport_header(name: str) -> bool:
    return _TRANSPORT.fullmatch(name) is not None


@functools.lru_cache(maxsize=1024)
def _dropped(names: tuple[object, ...], keep: frozenset[str]) -> frozenset[object]:
    """The transport headers among a request's header ``names`` that ``keep`` (lower-case) does not name."""
    return frozenset(k for k in names if is_transport_header(str(k)) and str(k).lower() not in keep)


def _request(event: object, resolve: Resolver | None = None) -> tuple[Document, Document, Document] | None:
    """(ref, payload, headers) of an event's HTTP request with headers (one in the blob store read through
    ``resolve``)."""
    ref = event.get("input_ref") if isinstance(event, dict) else None
    if not isinstance(ref, dict) or ref.get("media_type") not in _REQUEST_MEDIA:
        return None
    payload = ref.get("inline")
    if payload is None and resolve is not None and isinstance(ref.get("sha256"), str):
        payload = _read(resolve, ref)  # unreadable: the save that follows reports it if it matters
    headers = payload.get("headers") if isinstance(payload, dict) else None
    return (ref, payload, headers) if isinstance(payload, dict) and isinstance(headers, dict) else None


def without_transport_headers(
    event: Document, keep: frozenset[str] = frozenset(), like: Document | None = None
) -> Document:
    """``event`` with its inline request's transport headers left out, except those ``keep`` names (a new
    dict where it changes: containers are shared). ``like``: a recorded twin whose request, when the result
    is the same JSON, is shared rather than copied."""
    found = _request(event)
    if found is None:
        return event
    dropped = _dropped(tuple(found[2]), keep)
    twin = _request(like) if like is not None else None
    if twin is not None and _same_request(found, dropped, twin):
        return event if event["input_ref"] is twin[0] else {**event, "input_ref": twin[0]}
    if not dropped:
        return event
    ref, payload, headers = found
    # Every header left out (``dropped`` holds only names of ``headers``): none to walk for (a plain GET).
    kept = {k: v for k, v in headers.items() if k not in dropped} if len(dropped) < len(headers) else {}
    return {**event, "input_ref": {**ref, "inline": {**payload, "headers": kept}}}


def _same_request(
    found: tuple[Document, Document, Document],
    dropped: frozenset[object],
    twin: tuple[Document, Document, Document],
) -> bool:
    """Whether the request ``found`` with the headers ``dropped`` left out is the same JSON as ``twin``."""
    (ref, payload, headers), (twin_ref, twin_payload, twin_headers) = found, twin
    if (
        ref.keys() != twin_ref.keys()
        or payload.keys() != twin_payload.keys()
        or len(headers) - len(dropped) != len(twin_headers)
    ):
        return False
    # (``same_json`` asks identity first; asked here too, it saves a call for what is shared.)
    for key, value in ref.items():
        twin_value = twin_ref[key]
        if value is not twin_value and key != "inline" and not same_json(value, twin_value):
            return False
    for key, value in payload.items():
        twin_value = twin_payload[key]
        if value is not twin_value and key != "headers" and not same_json(value, twin_value):
            return False
    # As many kept as the twin holds: the same names when each of the twin's is kept.
    for name, value in twin_headers.items():
        if name in dropped or not same_json(headers.get(name, _ABSENT), value):
            return False
    return True


def holds_transport_headers(
    events: object, resolve: Resolver | None = None, keep: frozenset[str] = frozenset()
) -> bool:
    """Whether any request of ``events`` (loaded or as stored) holds a transport header ``keep`` does not
    name (a delta's headers are an earlier request's or its own, so covered by the others)."""
    if not isinstance(events, list | tuple):  # JSON's arrays: an ABC check per event cost more than the rest
        return False
    return any(
        (got := _request(event, resolve)) and got[2] and _dropped(tuple(got[2]), keep) for event in events
    )
