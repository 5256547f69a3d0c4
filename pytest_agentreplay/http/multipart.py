"""``multipart/*`` request bodies stored as their parts, since clients pick a new random boundary for
every upload: ``{"multipart": [PART, ...], "content_type"}`` (without its ``boundary``), each PART ``{"name",
"filename"?, "content_type", "headers"?, "text" | "base64"}``. A body not taken apart exactly (no boundary,
a preamble, no closing delimiter) is stored as its bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Final

from ..core.documents import Document

# ``boundary=`` in a Content-Type: a quoted string (escapes allowed) or a token.
_BOUNDARY: Final = r'(?i);\s*boundary\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<plain>[^;\s]+))'
# One parameter of a Content-Disposition header.
_PARAM: Final = r';\s*(?P<name>[^=;\s]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<plain>[^;]*))'
# What the rendered bytes of a stored body are delimited with (the stored content type names none).
RENDER_BOUNDARY: Final = "agentreplay-boundary"
# Content-Disposition parameters a part stores by name; any other keeps the whole header in ``headers``.
_DISPOSITION_FIELDS: Final = frozenset({"name", "filename"})
_CRLF: Final = b"\r\n"


def is_multipart(content_type: object) -> bool:
    return isinstance(content_type, str) and content_type.lstrip()[:10].lower() == "multipart/"


def boundary_of(content_type: str | None) -> str | None:
    """The ``boundary`` parameter of a multipart content type, unquoted; None when it names none."""
    found = re.search(_BOUNDARY, content_type or "")
    return _unquoted(found) if found is not None else None


def _unquoted(found: re.Match[str]) -> str:
    """A matched parameter's value: its quoted string without the quoting, else its token."""
    quoted = found.group("quoted")
    return re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else found.group("plain").strip()


def without_boundary(content_type: str) -> str:
    """``multipart/form-data; boundary=x; charset=utf-8`` -> ``multipart/form-data; charset=utf-8``."""
    return re.sub(_BOUNDARY, "", content_type).strip()


def parse(raw: bytes, content_type: str | None) -> list[Document] | None:
    """The stored parts of a multipart body; None when the bytes are not exactly a multipart body."""
    boundary = boundary_of(content_type)
    if not boundary:
        return None
    try:
        dash = b"--" + boundary.encode("ascii")
    except UnicodeEncodeError:
        return None
    delimiter = _CRLF + dash
    # The first delimiter opens the body (a preamble would be text nobody compares: not taken apart).
    if not raw.startswith(dash):
        return None
    pos = len(dash)
    parts: list[Document] = []
    while True:
        if raw.startswith(b"--", pos):
            # The closing delimiter; only a line break may follow it.
            return parts if raw[pos + 2 :].strip(b"\r\n") == b"" else None
        eol = raw.find(_CRLF, pos)
        if eol < 0 or raw[pos:eol].strip(b" \t"):  # transport padding only, then the line ends
            return None
        start = eol + 2
        end = raw.find(delimiter, start)
        if end < 0:
            return None
        part = _part(raw[start:end])
        if part is None:
            return None
        parts.append(part)
        pos = end + len(delimiter)


def _part(chunk: bytes) -> Document | None:
    if chunk.startswith(_CRLF):  # no header at all
        head, content = b"", chunk[2:]
    else:
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            return None
    headers = _headers(head)
    if headers is None:
        return None
    part: Document = {"name": None}
    disposition = headers.pop("content-disposition", None)
    if disposition is not None:
        kind, _, rest = disposition.partition(";")
        params = {found.group("name").lower(): _unquoted(found) for found in re.finditer(_PARAM, ";" + rest)}
        part["name"] = params.get("name")
        if "filename" in params:
            part["filename"] = params["filename"]
        if kind.strip().lower() != "form-data" or set(params) - _DISPOSITION_FIELDS:
            headers["content-disposition"] = disposition  # said more than a name and a file name
    part["content_type"] = headers.pop("content-type", None)
    if headers:
        part["headers"] = headers
    try:
        part["text"] = content.decode("utf-8")  # it reads, and encodes back to the same bytes
    except UnicodeDecodeError:
        part["base64"] = base64.b64encode(content).decode("ascii")
    return part


def _headers(head: bytes) -> dict[str, str] | None:
    text = _text(head)
    out: dict[str, str] = {}
    last: str | None = None
    for line in text.split("\r\n") if text else ():
        if line[:1] in (" ", "\t") and last is not None:  # a folded header continues the previous one
            out[last] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            return None
        last = name.strip().lower()
        out[last] = f"{out[last]}, {value.strip()}" if last in out else value.strip()
    return out


def _text(data: bytes) -> str:
    # Header values are ASCII by the RFC; clients put UTF-8 file names there all the same.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def part_bytes(part: Mapping[str, object]) -> bytes:
    """The content bytes of a stored part (``json``: a part redaction rewrote as JSON)."""
    text = part.get("text")
    if isinstance(text, str):
        return text.encode("utf-8")
    data = part.get("base64")
    if isinstance(data, str):
        try:
            return base64.b64decode(data)
        except (binascii.Error, ValueError):
            return data.encode("ascii", "replace")
    if "json" in part:
        return json.dumps(part["json"], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b""


def render(parts: list[object], boundary: str = RENDER_BOUNDARY) -> bytes:
    """Stored parts as a multipart body delimited by ``boundary`` (for excerpts and exports: requests are
    never sent from a cassette)."""
    dash = b"--" + boundary.encode("ascii")
    out: list[bytes] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        headers = part.get("headers")
        headers = headers if isinstance(headers, Mapping) else {}
        lines: list[bytes] = []
        if "content-disposition" not in headers:  # else the part's own header says it whole
            lines.append(b"Content-Disposition: " + _disposition_of(part).encode("utf-8"))
        if isinstance(part.get("content_type"), str):
            lines.append(b"Content-Type: " + part["content_type"].encode("utf-8"))
        lines.extend(f"{k}: {v}".encode() for k, v in headers.items())
        out.append(dash + _CRLF + _CRLF.join(lines) + _CRLF + _CRLF + part_bytes(part) + _CRLF)
    return b"".join(out) + dash + b"--" + _CRLF


def _disposition_of(part: Mapping[str, object]) -> str:
    out = "form-data"
    for key in ("name", "filename"):
        value = part.get(key)
        if isinstance(value, str):
            out += f'; {key}="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return out


def stored(raw: bytes, content_type: str) -> Document | None:
    """The stored body of a multipart request (see the module docstring); None when it is not one."""
    parts = parse(raw, content_type)
    if parts is None:
        return None
    return {"multipart": parts, "content_type": without_boundary(content_type)}


def comparable_request(payload: object) -> object:
    """A request payload as the comparison sees it: a multipart body by its parts, also when a cassette
    recorded before parts were stored holds its bytes (and their boundary), and the ``Content-Type`` header
    without the boundary. Anything else is returned as it is."""
    if not isinstance(payload, Mapping):
        return payload
    body = payload.get("body")
    if not isinstance(body, Mapping) or not is_multipart(body.get("content_type")):
        return payload
    out = dict(payload)
    if "multipart" not in body:
        # Bytes that are not exactly a multipart body (undecodable base64 is not) stay as they are.
        parsed = stored(part_bytes(body), str(body["content_type"]))
        if parsed is not None:
            out["body"] = {**{k: v for k, v in body.items() if k not in ("text", "base64")}, **parsed}
    headers = payload.get("headers")
    if isinstance(headers, Mapping) and is_multipart(headers.get("content-type")):
        out["headers"] = {**headers, "content-type": without_boundary(str(headers["content-type"]))}
    return out
