"""The on-disk form of events (format 4): conversations stored once, defaults left out.

An agent conversation resends its whole history on every model call. On disk, an HTTP request whose
JSON body repeats an earlier request to the same method and URL is stored as a delta over it:

    "inline": {
      "body": {"content_type": "application/json", "json": {"messages": [<the new messages only>]}},
      "delta": {"back": 1, "headers": "same", "json": {"extends": {"messages": 12}, "same": ["model"]}},
      "method": "POST", "url": "https://api.openai.com/v1/chat/completions"
    }

``back`` counts earlier requests to the same method and URL (1: the latest one). The body's JSON is the
base's, with each key in ``same`` copied, each list in ``extends`` taking the base's first n items and then
the items stored here, and every other key as stored here; ``"headers": "same"`` copies the base's headers,
``"headers": "base"`` takes them with the ones stored here changed or added (``headers_dropped`` removed).
So an N-call conversation grows by its new messages per call, a reviewer sees each call's new messages, and
a changed system prompt is one line (the first request's), whatever the number of calls.

Also left out, and restored on load: each event's ``run_id`` (the run header's), ``data_class`` when it is
the default ``internal``, a model call's ``data.request_hash`` when it is the hash of the stored body; the two
HTTP payload media types are written ``@http-request``/``@http-response``
(a media type of the user's starting with ``@`` gets one more ``@``).

Digests are over the stored form: an accepted change rewrites the changed event's lines only.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..core.canonical import DigestMemo, request_digest, same_json
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE as REQUEST_MEDIA_TYPE
from ..core.constants import HTTP_RESPONSE_MEDIA_TYPE as RESPONSE_MEDIA_TYPE
from ..core.documents import Document
from ..exceptions import CassetteError, CassetteSchemaError
from ..http.exchange import host_and_path
from .validation import UNPARSED, NestingTooDeep, parse_fast

# The stored BODY of an earlier request, by ref (``resolve(ref)`` loads one kept in the blob store).
Resolver = Callable[[Mapping[str, Any]], Any]

_MEDIA_ALIASES = {REQUEST_MEDIA_TYPE: "@http-request", RESPONSE_MEDIA_TYPE: "@http-response"}
_MEDIA_FULL = {alias: full for full, alias in _MEDIA_ALIASES.items()}
_REF_FIELDS = ("input_ref", "output_ref")
DELTA = "delta"
# How many earlier requests to the same endpoint are tried as a base (interleaved conversations).
_BASES_TRIED = 4
_ABSENT = object()


# -- lean events: what an HTTP event repeats ----------------------------------------------------------

_HTTP_EVENTS = ("http", "effect")
_PREV = "@prev"


def _default_tool_name(url: str) -> str:
    """The tool name the HTTP layer gives an exchange no classifier named: host and path."""
    host, path = host_and_path(url)
    return host + path


def _inline_request(event: Mapping[str, Any]) -> dict[str, Any] | None:
    ref = event.get("input_ref")
    if not isinstance(ref, dict) or ref.get("media_type") != REQUEST_MEDIA_TYPE:
        return None
    payload = ref.get("inline")
    return payload if isinstance(payload, dict) else None


def _lean_http_fields(event: Document, out: Document) -> None:
    """Leave out of an HTTP event what its request says: ``data.method``/``data.url`` and the default tool
    name (host and path)."""
    request = _inline_request(event)
    if event.get("type") not in _HTTP_EVENTS or request is None:
        return
    method, url = request.get("method"), request.get("url")
    data = event.get("data")
    if isinstance(data, dict) and data.get("method") == method and data.get("url") == url:
        out["data"] = {k: v for k, v in out.get("data", data).items() if k not in ("method", "url")}
    tool = event.get("tool")
    if isinstance(tool, dict) and isinstance(url, str) and tool.get("name") == _default_tool_name(url):
        rest = {k: v for k, v in tool.items() if k != "name"}
        if rest:
            out["tool"] = rest
        else:
            out.pop("tool", None)


def _restore_http_fields(event: Document) -> None:
    if event.get("type") not in _HTTP_EVENTS:
        return
    request = _inline_request(event)
    if request is None:
        return
    method, url = request.get("method"), request.get("url")
    data = event.get("data")
    if isinstance(data, dict) and "method" not in data and "url" not in data:
        event["data"] = {**data, "method": method, "url": url}
    tool = event.get("tool")
    if isinstance(url, str) and (tool is None or (isinstance(tool, dict) and "name" not in tool)):
        event["tool"] = {"name": _default_tool_name(url), **(tool or {})}


def _lean_response(ref: dict[str, Any]) -> dict[str, Any]:
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


def _restore_response(ref: dict[str, Any]) -> None:
    payload = ref.get("inline")
    if not isinstance(payload, dict):
        return
    body = payload.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("raw"), str) or "json" in body:
        return
    if any(kind in body for kind in ("text", "base64", "sse")):
        return
    with contextlib.suppress(ValueError, RecursionError):  # not JSON: the shape check names it
        ref["inline"] = {**payload, "body": {**body, "json": parse_sorted(body["raw"])}}


def parse_sorted(raw: str) -> Any:
    """``raw`` parsed with every object's keys in canonical (sorted) order, as the value had when it was
    stored (the last of duplicate keys wins). jiter, then a pass sorting the objects that need it, costs half
    of ``json.loads`` calling a hook per object; anything jiter refuses (a lone surrogate, NaN, nesting past
    200) is left to ``json.loads``, which decides as it always did."""
    try:
        value = parse_fast(raw.encode("utf-8"))
    except (NestingTooDeep, UnicodeEncodeError):
        value = UNPARSED
    if value is UNPARSED:
        return json.loads(raw, object_pairs_hook=_sorted_object)
    return _sort_keys(value)


def _sort_keys(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        keys = list(value)
        if keys != sorted(keys):
            value = {key: value[key] for key in sorted(keys)}
        for key, item in value.items():
            if type(item) is dict or type(item) is list:
                value[key] = _sort_keys(item)
    elif kind is list:
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                value[index] = _sort_keys(item)
    return value


def _sorted_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(sorted(dict(pairs).items()))


# -- encoding ---------------------------------------------------------------------------------------


def request_parts(payload: Any) -> tuple[tuple[str, str], Any, dict[str, Any]] | None:
    """(method, url), headers and JSON object body of a full HTTP request payload, else None: the
    requests a later one may be stored as a delta over (encoder and decoder count the same ones)."""
    if not isinstance(payload, dict) or DELTA in payload:
        return None
    body = payload.get("body")
    method, url = payload.get("method"), payload.get("url")
    if not isinstance(body, dict) or not isinstance(body.get("json"), dict):
        return None
    if not isinstance(method, str) or not isinstance(url, str):
        return None
    return (method, url), payload.get("headers"), body["json"]


def _json_delta(base: dict[str, Any], current: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
    """(delta spec, what stays stored, a cost: items stored) of ``current`` over ``base``."""
    same: list[str] = []
    extends: dict[str, int] = {}
    rest: dict[str, Any] = {}
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
    spec: dict[str, Any] = {}
    if extends:
        spec["extends"] = extends
    if same:
        spec["same"] = sorted(same)
    return spec, rest, cost


def encode_events(events: list[Document], run_id: str, *, resolve: Resolver | None = None) -> list[Document]:
    """The stored form of in-memory event dicts (which are not modified). ``resolve(ref)`` loads a request
    kept in the blob store; one that cannot be read ends delta encoding for the rest of the cassette
    (its endpoint is unknown, so the count of earlier requests behind ``back`` would be too)."""
    stored: list[Document] = []
    earlier: dict[tuple[str, str], list[tuple[Any, dict[str, Any]]]] = {}
    blind = False
    last_headers: Any = _ABSENT  # the headers of the previous request, whatever its endpoint
    digests = DigestMemo()
    for event in events:
        out = {k: v for k, v in event.items() if not (k == "run_id" and v == run_id)}
        if _derivable_request_hash(event, digests):
            out["data"] = {k: v for k, v in event["data"].items() if k != "request_hash"}
        _lean_http_fields(event, out)
        for name in _REF_FIELDS:
            ref = event.get(name)
            if not isinstance(ref, dict):
                continue
            new_ref = dict(ref)
            if name == "input_ref" and ref.get("media_type") == REQUEST_MEDIA_TYPE:
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
            elif name == "output_ref" and ref.get("media_type") == RESPONSE_MEDIA_TYPE:
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


def _read(resolve: Resolver | None, ref: Mapping[str, Any]) -> Any:
    """A blob-stored request, or None when it cannot be read."""
    if resolve is None:
        return None
    try:
        return resolve(ref)
    except Exception:  # an unreadable blob only ends delta encoding
        return None


def _request_json(event: Mapping[str, Any]) -> Any:
    ref = event.get("input_ref")
    if not isinstance(ref, dict) or ref.get("media_type") != REQUEST_MEDIA_TYPE:
        return None
    payload = ref.get("inline")
    body = payload.get("body") if isinstance(payload, dict) else None
    return body.get("json") if isinstance(body, dict) else None


def _derivable_request_hash(event: Mapping[str, Any], memo: DigestMemo) -> bool:
    """Whether a model call's ``data.request_hash`` (taken over the body as sent) is the hash of the body as
    stored: then it is left out, as a changed system prompt would otherwise change it in every call."""
    data = event.get("data")
    if event.get("type") != "model.call" or not isinstance(data, dict):
        return False
    digest = data.get("request_hash")
    body = _request_json(event)
    if not isinstance(digest, str) or body is None:
        return False
    try:
        return request_digest(body, memo) == digest
    except (TypeError, ValueError):
        return False


def _prev_headers(ref: dict[str, Any], full: Any, last: Any) -> tuple[dict[str, Any], Any]:
    """Headers equal to the previous request's (any endpoint: a test's GETs share them) are written
    ``"@prev"``; returns the ref and the headers the next request compares with."""
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
        ref = {**ref, "inline": {**inline, "headers": _PREV}}
    return ref, headers if isinstance(headers, dict) else _ABSENT


def _delta_ref(
    ref: dict[str, Any],
    payload: Any,
    parts: tuple[tuple[str, str], Any, dict[str, Any]],
    earlier: dict[tuple[str, str], list[tuple[Any, dict[str, Any]]]],
) -> dict[str, Any]:
    endpoint, headers, body_json = parts
    history = earlier.setdefault(endpoint, [])
    best: tuple[int, int, dict[str, Any], dict[str, Any]] | None = None
    if isinstance(payload, dict):  # inline: may become a delta (a blob-stored one stays as it is)
        for back, (base_headers, base_json) in enumerate(reversed(history[-_BASES_TRIED:]), 1):
            json_spec, rest, cost = _json_delta(base_json, body_json)
            if not json_spec or (best is not None and cost >= best[0]):
                continue
            spec: dict[str, Any] = {"back": back}
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
    if spec.get("headers") == "base":
        base_headers = history[-1 - back][0]
        inline["headers"] = {
            k: v for k, v in headers.items() if not same_json(base_headers.get(k, _ABSENT), v)
        }
    elif "headers" not in spec and "headers" in payload:
        inline["headers"] = payload["headers"]
    inline["body"] = {**payload["body"], "json": rest}
    inline[DELTA] = spec
    return {**ref, "inline": inline}


# -- decoding ---------------------------------------------------------------------------------------


class _Decoder:
    def __init__(self, run_id: str, source: str, resolve: Resolver | None) -> None:
        self.run_id = run_id
        self.source = source
        self.resolve = resolve
        # Per (method, url): the decoded payloads of earlier requests, in order.
        self.earlier: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.last_headers: Any = None
        self.digests = DigestMemo()

    def fail(self, index: int, problem: str) -> CassetteSchemaError:
        return CassetteSchemaError(
            f"cassette {self.source}: event seq {index} holds a request delta that cannot be applied: "
            + problem,
            cassette=self.source,
            place=f"event seq {index} (events[{index}]), field input_ref.inline.delta",
            fixes=[
                f"undo the edit or restore it: `git checkout -- {self.source}`",
                f"list every problem: `agentreplay verify {self.source}`",
            ],
        )

    def event(self, index: int, stored: Any) -> Any:
        if not isinstance(stored, dict):
            return stored  # the schema check names it
        event = dict(stored)
        event.setdefault("run_id", self.run_id)
        for name in _REF_FIELDS:
            ref = stored.get(name)
            if not isinstance(ref, dict):
                continue
            new_ref = dict(ref)
            new_ref.setdefault("data_class", "internal")
            media = new_ref.get("media_type")
            if isinstance(media, str) and media[:1] == "@":
                new_ref["media_type"] = _MEDIA_FULL.get(media) or media[1:]
            if name == "input_ref" and new_ref.get("media_type") == REQUEST_MEDIA_TYPE:
                self.request(index, new_ref)
            elif name == "output_ref" and new_ref.get("media_type") == RESPONSE_MEDIA_TYPE:
                _restore_response(new_ref)
            event[name] = new_ref
        _restore_http_fields(event)
        data = event.get("data")
        if event.get("type") == "model.call" and isinstance(data, dict) and "request_hash" not in data:
            body = _request_json(event)
            if body is not None:
                with contextlib.suppress(TypeError, ValueError):  # not JSON: the schema check names it
                    event["data"] = {**data, "request_hash": request_digest(body, self.digests)}
        return event

    def request(self, index: int, ref: dict[str, Any]) -> None:
        payload = ref.get("inline")
        if ref.get("sha256") is not None and self.resolve is not None:
            # A large request kept in the blob store: a later delta may build on it (and it may itself
            # be a delta), so it is read now; replay compares every request anyway.
            # In memory it is then held inline, so a rewrite (update, migrate) stores it as a delta too.
            try:
                payload = self.resolve(ref)
            except CassetteError as exc:
                raise type(exc)(
                    exc.headline,
                    evidence=[*exc.evidence, *([exc.place] if exc.place else [])],
                    cassette=exc.cassette or self.source,
                    place=f"event seq {index} (events[{index}]), field input_ref, blob {ref.get('sha256')}",
                    fixes=exc.fixes,
                ) from None
            if isinstance(payload, dict) and DELTA in payload:
                payload = self.apply(index, payload)
            ref.pop("sha256", None)
            ref.pop("size", None)
            ref["inline"] = payload
        elif isinstance(payload, dict) and DELTA in payload:
            ref["inline"] = payload = self.apply(index, payload)
        if isinstance(payload, dict) and payload.get("headers") == _PREV:
            if not isinstance(self.last_headers, dict):
                raise self.fail(index, 'headers "@prev", but no earlier request has headers')
            payload = {**payload, "headers": self.last_headers}
            if "inline" in ref:
                ref["inline"] = payload
        self.last_headers = payload.get("headers") if isinstance(payload, dict) else None
        parts = request_parts(payload)
        if parts is not None and isinstance(payload, dict):
            self.earlier.setdefault(parts[0], []).append(payload)

    def base_of(self, index: int, endpoint: tuple[str, str], back: Any) -> dict[str, Any]:
        history = self.earlier.get(endpoint, [])
        if not isinstance(back, int) or isinstance(back, bool) or not 1 <= back <= len(history):
            raise self.fail(
                index, f"back={back!r}, but {len(history)} earlier request(s) go to {endpoint[1]}"
            )
        return history[-back]

    def apply(self, index: int, stored: dict[str, Any]) -> dict[str, Any]:
        spec = stored[DELTA]
        method, url = stored.get("method"), stored.get("url")
        if not isinstance(spec, dict) or not isinstance(method, str) or not isinstance(url, str):
            raise self.fail(index, "a delta needs an object, and the request its method and url")
        unknown = set(spec) - {"back", "headers", "headers_dropped", "json"}
        if unknown:
            raise self.fail(index, f"unknown delta field(s) {sorted(unknown)}")
        base = self.base_of(index, (method, url), spec.get("back"))
        body, base_body = stored.get("body"), base.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("json"), dict):
            raise self.fail(index, "a delta request needs a JSON object body")
        if not isinstance(base_body, dict) or not isinstance(base_body.get("json"), dict):
            raise self.fail(index, "its base request has no JSON object body")
        out = {k: v for k, v in stored.items() if k != DELTA}
        if spec.get("headers") == "same":
            if "headers" in stored or "headers_dropped" in spec:
                raise self.fail(index, '"same" headers are not stored as well')
            out["headers"] = base.get("headers")
        elif spec.get("headers") == "base":
            own, base_headers, dropped = (
                stored.get("headers", {}),
                base.get("headers"),
                spec.get("headers_dropped", []),
            )
            if (
                not isinstance(own, dict)
                or not isinstance(base_headers, dict)
                or not isinstance(dropped, list)
            ):
                raise self.fail(index, '"base" headers need header objects here and in the base')
            merged = {k: v for k, v in base_headers.items() if k not in dropped}
            merged.update(own)
            out["headers"] = {k: merged[k] for k in sorted(merged)}
        elif "headers" in spec or "headers_dropped" in spec:
            raise self.fail(index, 'headers must be "same" or "base"')
        out["body"] = {**body, "json": self.json(index, base_body["json"], body["json"], spec.get("json"))}
        return out

    def json(self, index: int, base: dict[str, Any], rest: dict[str, Any], spec: Any) -> dict[str, Any]:
        if not isinstance(spec, dict) or set(spec) - {"same", "extends"}:
            raise self.fail(index, "json must be an object with `same` and/or `extends`")
        same, extends = spec.get("same", []), spec.get("extends", {})
        if not isinstance(same, list) or not isinstance(extends, dict):
            raise self.fail(index, "`same` must be a list of keys and `extends` an object")
        value = dict(rest)
        for key in same:
            if not isinstance(key, str) or key not in base or key in rest:
                raise self.fail(
                    index, f"`same` names {key!r}, which the base lacks or which is stored here too"
                )
            value[key] = base[key]
        for key, keep in extends.items():
            old, new = base.get(key), rest.get(key)
            if not isinstance(old, list) or not isinstance(new, list):
                raise self.fail(index, f"`extends` names {key!r}, which is not a list here and in the base")
            if not isinstance(keep, int) or isinstance(keep, bool) or not 0 < keep <= len(old):
                raise self.fail(
                    index, f"`extends` keeps {keep!r} items of {key!r}, whose base has {len(old)}"
                )
            value[key] = old[:keep] + new
        return {k: value[k] for k in sorted(value)}


def decode_events(
    events: list[Any], run_id: str, *, source: str = "<memory>", resolve: Resolver | None = None
) -> list[Any]:
    """The in-memory event dicts of stored ones. ``resolve(ref)`` loads a base request kept in the blob
    store (only needed when a later request is stored as a delta over it)."""
    decoder = _Decoder(run_id, source, resolve)
    return [decoder.event(index, event) for index, event in enumerate(events)]


__all__ = ["DELTA", "decode_events", "encode_events"]
