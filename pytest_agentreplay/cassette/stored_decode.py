"""Decoding the stored form of events (:mod:`.stored_form` writes it): deltas, ``@prev`` headers, parsed JSON
responses and the fields left out restored."""

from __future__ import annotations

import json

import jiter
import orjson

from ..core.canonical import DigestMemo, Extension
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
from ..core.documents import Document
from ..exceptions import CassetteError, CassetteSchemaError
from .stored_form import (
    DELTA,
    HTTP_EVENTS,
    MEDIA_FULL,
    PREV_HEADERS,
    REF_FIELDS,
    Resolver,
    default_tool_name,
    request_parts,
    stored_request_hash,
)
from .validation import relocate

# -- what the stored form leaves out ------------------------------------------------------------------


def _restore_http_fields(event: Document, request: Document) -> None:
    """An HTTP event's ``data.method``/``data.url`` and default tool name, from its inline ``request``."""
    method, url = request.get("method"), request.get("url")
    data = event.get("data")
    if isinstance(data, dict) and "method" not in data and "url" not in data:
        event["data"] = {**data, "method": method, "url": url}
    tool = event.get("tool")
    if isinstance(url, str) and (tool is None or (isinstance(tool, dict) and "name" not in tool)):
        event["tool"] = {"name": default_tool_name(url), **(tool or {})}


def restore_response_payload(payload: object) -> object:
    """An HTTP response payload stored lean (its JSON body as ``raw`` alone, inline or in a blob) with its
    ``json`` back; anything else as it is."""
    if not isinstance(payload, dict):
        return payload
    body = payload.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("raw"), str) or "json" in body:
        return payload
    if "text" in body or "base64" in body or "sse" in body:
        return payload
    try:
        parsed = parse_sorted(body["raw"])
    except (ValueError, RecursionError):  # not JSON: the shape check names it
        return payload
    return {**payload, "body": {**body, "json": parsed}}


def parse_sorted(raw: str) -> object:
    """``raw`` parsed with every object's keys sorted, as the value was stored (the last duplicate wins).
    jiter parses and orjson sorts, at half the cost of ``json.loads`` with a hook per object. jiter keeps the
    last duplicate as ``json.loads`` does, so its duplicate check (a third of its work) stays off; its string
    cache stays on (a key met before is reused: a fifth of its work on a small body). What they refuse or
    change (1e400 becomes a null more than ``raw`` holds) is left to ``json.loads``."""
    try:  # a statement, not contextlib.suppress: no context manager made per response
        value = jiter.from_json(raw.encode(), allow_inf_nan=False)
        dumped = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if dumped.count(b"null") == raw.count("null"):
            return orjson.loads(dumped)
    except (ValueError, TypeError):  # orjson's errors are both
        pass
    return json.loads(raw, object_pairs_hook=_sorted_object)


def _sorted_object(pairs: list[tuple[str, object]]) -> Document:
    return dict(sorted(dict(pairs).items()))


# -- decoding ---------------------------------------------------------------------------------------


class _Decoder:
    def __init__(
        self, run_id: str, source: str, resolve: Resolver | None, restored: dict[int, Document] | None
    ) -> None:
        self.run_id = run_id
        self.source = source
        self.resolve = resolve
        self.restored = restored
        # Per (method, url): the decoded payloads of earlier requests, in order.
        self.earlier: dict[tuple[str, str], list[Document]] = {}
        self.last_headers: object = None
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

    def event(self, index: int, stored: object) -> object:
        if not isinstance(stored, dict):
            return stored  # the schema check names it
        event = dict(stored)
        if "run_id" not in event:
            event["run_id"] = self.run_id
        request: object = None  # the inline request payload, decoded
        for name in REF_FIELDS:
            ref = stored.get(name)
            if not isinstance(ref, dict):
                continue
            new_ref = dict(ref)
            if "data_class" not in new_ref:
                new_ref["data_class"] = "internal"
            media = new_ref.get("media_type")
            if isinstance(media, str) and media[:1] == "@":
                new_ref["media_type"] = media = MEDIA_FULL.get(media) or media[1:]
            if name == "input_ref" and media == HTTP_REQUEST_MEDIA_TYPE:
                request = self.request(index, new_ref)
            elif name == "output_ref" and media == HTTP_RESPONSE_MEDIA_TYPE and "inline" in new_ref:
                lean = new_ref["inline"]
                new_ref["inline"] = payload = restore_response_payload(lean)
                if payload is not lean and isinstance(payload, dict) and self.restored is not None:
                    self.restored[id(payload)] = payload
            event[name] = new_ref
        kind = event.get("type")
        if isinstance(request, dict) and kind in HTTP_EVENTS:
            _restore_http_fields(event, request)
        data = event.get("data")
        if kind == "model.call" and isinstance(data, dict) and "request_hash" not in data:
            digest = stored_request_hash(event, self.digests)
            if digest is not None:
                event["data"] = {**data, "request_hash": digest}
        return event

    def request(self, index: int, ref: Document) -> object:
        payload = ref.get("inline")
        if ref.get("sha256") is not None and self.resolve is not None:
            # A large request kept in the blob store: a later delta may build on it (and it may itself
            # be a delta), so it is read now; replay compares every request anyway.
            # In memory it is then held inline, so a rewrite (update, migrate) stores it as a delta too.
            try:
                payload = self.resolve(ref)
            except CassetteError as exc:
                place = f"event seq {index} (events[{index}]), field input_ref, blob {ref.get('sha256')}"
                raise relocate(exc, exc.cassette or self.source, None, place) from None
            ref.pop("sha256", None)
            ref.pop("size", None)
            ref["inline"] = payload
        if not isinstance(payload, dict):
            self.last_headers = None
            return payload
        if DELTA in payload:
            ref["inline"] = payload = self.apply(index, payload)
        if payload.get("headers") == PREV_HEADERS:
            if not isinstance(self.last_headers, dict):
                raise self.fail(index, 'headers "@prev", but no earlier request has headers')
            ref["inline"] = payload = {**payload, "headers": self.last_headers}
        self.last_headers = payload.get("headers")
        parts = request_parts(payload)
        if parts is not None:
            self.earlier.setdefault(parts[0], []).append(payload)
        return payload

    def base_of(self, index: int, endpoint: tuple[str, str], back: object) -> Document:
        history = self.earlier.get(endpoint, [])
        if not isinstance(back, int) or isinstance(back, bool) or not 1 <= back <= len(history):
            raise self.fail(
                index, f"back={back!r}, but {len(history)} earlier request(s) go to {endpoint[1]}"
            )
        return history[-back]

    def apply(self, index: int, stored: Document) -> Document:
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
            own, base_headers = stored.get("headers", {}), base.get("headers")
            dropped = spec.get("headers_dropped", [])
            if not (isinstance(own, dict) and isinstance(base_headers, dict) and isinstance(dropped, list)):
                raise self.fail(index, '"base" headers need header objects here and in the base')
            merged = {k: v for k, v in base_headers.items() if k not in dropped}
            merged.update(own)
            out["headers"] = {k: merged[k] for k in sorted(merged)}
        elif "headers" in spec or "headers_dropped" in spec:
            raise self.fail(index, 'headers must be "same" or "base"')
        out["body"] = {**body, "json": self.json(index, base_body["json"], body["json"], spec.get("json"))}
        return out

    def json(self, index: int, base: Document, rest: Document, spec: object) -> Document:
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
            # Built with its proof that it extends ``old``: its digest need not compare the items again.
            built = self.digests.built[key] = Extension(old, keep, new, self.digests.built.get(key))
            value[key] = built.value
        return {k: value[k] for k in sorted(value)}


def decode_events(
    events: list[object],
    run_id: str,
    *,
    source: str = "<memory>",
    resolve: Resolver | None = None,
    restored: dict[int, Document] | None = None,
) -> list[object]:
    """The in-memory event dicts of stored ones. ``resolve(ref)`` loads a base request kept in the blob
    store. ``restored`` receives, by id, each inline response payload given back its parsed ``json`` (the
    object kept beside its id, which no other object can then take)."""
    decoder = _Decoder(run_id, source, resolve, restored)
    return [decoder.event(index, event) for index, event in enumerate(events)]
