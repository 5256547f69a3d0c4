"""HTTP bodies redacted through their decoded views: what is on the wire, not how it is stored.

JSON is recognised by content, whatever the content type (``text/plain`` too; matching only
``application/json`` is how vcrpy leaks secrets), and changed JSON text becomes ``json``. Base64 bodies are
decoded; multipart bodies are redacted part by part; SSE streams are scanned joined (a key split across two
chunks is one key) and then event by event.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from typing import Any

from ..core.constants import REDACTED
from ..core.documents import Document
from .encoded import FRAME_MAGICS, mask_bytes, text_of
from .rules import (
    BODY_KINDS,
    NOT_JSON,
    QUERY_PARAM,
    Redacting,
    compiled_on_use,
    dump_like,
    is_exempt,
    looks_like_json,
    try_json,
)

_BOUNDARY = compiled_on_use(r'boundary\s*=\s*(?:"(?P<quoted>[^"]+)"|(?P<plain>[^;\s]+))', re.IGNORECASE)
_PART_NAME = compiled_on_use(r'\bname\s*=\s*(?:"(?P<quoted>[^"]*)"|(?P<plain>[^;\s]+))', re.IGNORECASE)
_PART_TYPE = compiled_on_use(r"^content-type\s*:\s*(?P<value>[^\r\n]*)", re.IGNORECASE | re.MULTILINE)

# A place in a JSON value: the keys and indices leading to it.
Path = tuple[str | int, ...]


def redact_body(redactor: Redacting, body: Document, keys: bool) -> Document:
    """Redact an HTTP body (``json``/``text``/``base64``/``sse``) through its decoded view."""
    content_type = body.get("content_type")
    ctype = content_type.lower() if isinstance(content_type, str) else ""
    out = {k: redactor.redact(v, keys=keys) for k, v in body.items() if k not in BODY_KINDS}
    if "json" in body:
        out["json"] = redactor.redact(body["json"], keys=keys)
    if isinstance(body.get("text"), str):
        out.update(redact_text_body(redactor, body["text"], ctype, keys))
    elif "text" in body:
        out["text"] = redactor.redact(body["text"], keys=keys)
    if isinstance(body.get("base64"), str):
        out.update(redact_base64_body(redactor, body["base64"], ctype, keys))
    elif "base64" in body:
        out["base64"] = redactor.redact(body["base64"], keys=keys)
    if isinstance(body.get("sse"), list):
        out["sse"] = redact_sse(redactor, body["sse"], keys)
    elif "sse" in body:
        out["sse"] = redactor.redact(body["sse"], keys=keys)
    if "multipart" in body:
        out["multipart"] = [_redact_part(redactor, part, keys) for part in body["multipart"]]
    if "raw" in out and (out["raw"] != body["raw"] or out.get("json") != body.get("json")):
        del out["raw"]  # the exact text of a JSON body (http/bodies.py) holds what was redacted
    return out


def redact_text_body(redactor: Redacting, text: str, ctype: str, keys: bool) -> Document:
    """The body keys a ``text`` body becomes: ``{"json": ...}`` when it is JSON holding a secret."""
    if "json" in ctype or looks_like_json(text):
        parsed = try_json(text)
        if parsed is not NOT_JSON:
            redacted = redactor.redact(parsed, keys=keys)
            if redacted != parsed:
                return {"json": redacted}
            return {"text": text}
    if ctype.startswith("multipart/"):
        raw = text.encode("utf-8")
        redacted_raw = _redact_multipart(redactor, raw, ctype, keys)
        return {"text": text if redacted_raw == raw else redacted_raw.decode("utf-8", "replace")}
    if keys and "x-www-form-urlencoded" in ctype:
        text = QUERY_PARAM.sub(redactor.query_replacement, "&" + text)[1:]
    return {"text": redactor.redact_string(text, keys=keys)}


def redact_bytes(redactor: Redacting, raw: bytes, content_type: str | None, keys: bool) -> bytes:
    """Raw body bytes redacted through their decoded view (multipart parts, JSON, text, binary)."""
    ctype = (content_type or "").lower()
    if ctype.startswith("multipart/"):
        return _redact_multipart(redactor, raw, ctype, keys)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _masked(redactor, raw, keys)
    redacted = redact_text_body(redactor, text, ctype, keys)
    if "json" in redacted:
        return dump_like(redacted["json"], text).encode("utf-8")
    new_text: str = redacted["text"]
    return raw if new_text == text else new_text.encode("utf-8")


def _redact_multipart(redactor: Redacting, raw: bytes, ctype: str, keys: bool) -> bytes:
    found = _BOUNDARY().search(ctype)
    if found is None:
        return redactor.redact_string(raw.decode("latin-1"), keys=keys).encode("latin-1")
    boundary = (found.group("quoted") or found.group("plain")).encode("latin-1")
    delimiter = b"--" + boundary
    chunks = raw.split(delimiter)
    out = [chunks[0]]
    for chunk in chunks[1:]:
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if chunk.startswith(b"--") or not sep:
            out.append(redactor.redact_string(chunk.decode("latin-1"), keys=keys).encode("latin-1"))
            continue
        trail = b"\r\n" if content.endswith(b"\r\n") else b""
        if trail:
            content = content[:-2]
        head_text = head.decode("latin-1")
        name_match = _PART_NAME().search(head_text)
        name = (name_match.group("quoted") or name_match.group("plain") or "") if name_match else ""
        type_match = _PART_TYPE().search(head_text)
        part_type = type_match.group("value").strip() if type_match else "text/plain"
        if keys and name and redactor.is_secret_name(name) and content and content != REDACTED.encode():
            content = REDACTED.encode()
        else:
            content = redact_bytes(redactor, content, part_type, keys)
        new_head = redactor.redact_string(head_text, keys=False).encode("latin-1")
        out.append(new_head + sep + content + trail)
    return delimiter.join(out)


def _redact_part(redactor: Redacting, part: object, keys: bool) -> object:
    """One part of a multipart body stored as parts (``http/multipart.py``): named like a secret, its content
    is redacted as a JSON field of that name would be; else it is read through its decoded view (a body)."""
    if not isinstance(part, dict):
        return redactor.redact(part, keys=keys)
    name = part.get("name")
    content = [part[kind] for kind in BODY_KINDS if kind in part]
    if keys and isinstance(name, str) and redactor.is_secret_name(name) and not all(map(is_exempt, content)):
        rest = {k: v for k, v in part.items() if k not in BODY_KINDS}
        return {**redactor.redact(rest, keys=keys), "text": REDACTED}
    return redactor.redact(part, keys=keys)


def redact_base64_body(redactor: Redacting, data: str, ctype: str, keys: bool) -> Document:
    """A stored ``{"base64": ...}`` body redacted through its decoded view (the BODY keys that change)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"base64": redactor.redact_string(data, keys=keys)}
    if raw.startswith(FRAME_MAGICS) and (inner := text_of(raw)) is not None:
        # A gzip or zstd frame (stored before codings were decoded): a secret in it is stored decoded.
        redacted = redact_text_body(redactor, inner, ctype, keys)
        if redacted != {"text": inner}:
            return redacted
    textual = any(t in ctype for t in ("json", "text", "x-www-form-urlencoded", "xml"))
    if textual or raw.lstrip()[:1] in (b"{", b"["):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            redacted = redact_text_body(redactor, text, ctype, keys)
            return {"base64": data} if redacted == {"text": text} else redacted
    # Binary (protobuf over HTTP, an image, a frame): masked in place, so lengths and offsets stay valid.
    multipart = ctype.lower().startswith("multipart/")
    new = redact_bytes(redactor, raw, ctype, keys) if multipart else _masked(redactor, raw, keys)
    return {"base64": data} if new == raw else {"base64": base64.b64encode(new).decode("ascii")}


def _masked(redactor: Redacting, raw: bytes, keys: bool) -> bytes:
    masked = mask_bytes(redactor, raw, keys=keys)
    return raw if masked is None else masked


# -- server-sent events ------------------------------------------------------------------------------


def redact_sse(redactor: Redacting, events: list[object], keys: bool) -> list[object]:
    """A stream's events, redacted joined (a key split across chunks) and then one by one."""
    out = [_redact_sse_item(redactor, item, keys) for item in _redact_sse_joined(redactor, events, keys)]
    for index, (old, new) in enumerate(zip(events, out, strict=True)):
        if isinstance(new, dict) and "raw" in new and new != old:
            # An event's exact wire text (http/sse.py) holds what was redacted: render it instead.
            out[index] = {k: v for k, v in new.items() if k != "raw"}
    return out


def _redact_sse_joined(redactor: Redacting, events: list[object], keys: bool) -> list[object]:
    # The strings at one place of one event type ("choices[0].delta.content" of every chunk) are
    # one text cut into pieces: scan it whole, then cut the secrets out of the pieces they span.
    groups: dict[tuple[object, Path], list[tuple[int, Path, str]]] = {}
    for index, item in enumerate(events):
        if not isinstance(item, dict) or "data" not in item:
            continue
        leaves: list[tuple[Path, str]] = []
        _string_leaves(item["data"], ("data",), leaves)
        name = item.get("event")
        for path, text in leaves:
            groups.setdefault((name, path), []).append((index, path, text))
    out = events
    copied: set[int] = set()
    for pieces in groups.values():
        if len(pieces) < 2:
            continue
        texts = [text for _, _, text in pieces]
        if all(text == texts[0] for text in texts):
            continue  # ids and model names repeated in every chunk: nothing is split there
        spans = redactor.secret_spans("".join(texts), keys=keys)
        if not spans:
            continue
        for (index, path, old), new in zip(pieces, _apply_spans(texts, spans), strict=True):
            if new == old:
                continue
            if index not in copied:
                if out is events:
                    out = list(events)
                out[index] = copy.deepcopy(events[index])
                copied.add(index)
            _set_leaf(out[index], path, new)
    return out


def _redact_sse_item(redactor: Redacting, item: object, keys: bool) -> object:
    if not isinstance(item, dict) or not isinstance(item.get("data"), str):
        return redactor.redact(item, keys=keys)
    out = {k: redactor.redact(v, keys=keys) for k, v in item.items() if k != "data"}
    parsed = try_json(item["data"])
    if isinstance(parsed, dict | list):
        redacted = redactor.redact(parsed, keys=keys)
        out["data"] = redacted if redacted != parsed else item["data"]
    else:
        out["data"] = redactor.redact_string(item["data"], keys=keys)
    return out


def _apply_spans(pieces: list[str], spans: list[tuple[int, int]]) -> list[str]:
    """Pieces of a joined text with each span replaced once: the marker goes where the span starts, the
    rest of the span is cut from the following pieces (so the joined result reads ``...[REDACTED]...``)."""
    out: list[str] = []
    pos = 0
    for piece in pieces:
        start, end = pos, pos + len(piece)
        pos = end
        cut = [(s, e) for s, e in spans if s < end and e > start]
        if not cut:
            out.append(piece)
            continue
        buf: list[str] = []
        cur = start
        for s, e in cut:
            if s > cur:
                buf.append(piece[cur - start : s - start])
            if s >= start:
                buf.append(REDACTED)
            cur = max(cur, min(e, end))
        buf.append(piece[cur - start :])
        out.append("".join(buf))
    return out


def _string_leaves(value: object, path: Path, out: list[tuple[Path, str]]) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _string_leaves(v, (*path, k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _string_leaves(v, (*path, i), out)


def _set_leaf(root: object, path: Path, value: str) -> None:
    # The path was read from this very value (:func:`_string_leaves`): each step names a dict key or an index.
    *steps, last = path
    target: Any = root
    for step in steps:
        target = target[step]
    target[last] = value
