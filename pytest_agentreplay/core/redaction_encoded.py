"""Secrets hidden in an encoding: the views :mod:`.redaction` takes of a string beyond its plain text.

- **base64**: a string that is wholly base64 (standard or URL-safe, padded or not, MIME line breaks) or a
  ``data:...;base64,`` URL, whose bytes decode to plausible text (UTF-8, at most one control character in
  twenty), is redacted as that text and encoded again in the same alphabet, padding and line width: the
  stored value decodes to the redacted text, so no decoding of it shows the secret, and a text document
  stays a readable document. Bytes that are a gzip or zstd frame of plausible text are looked into as
  well; a frame holding a secret is replaced whole by the marker (recompressing it would hide the
  redaction from the reviewer). Binary (a PDF, an image) fails the text test on its first bytes and is
  left as it is; strings over :data:`MAX_ENCODED_CHARS` are not decoded, so the cost stays bounded.
- **percent-encoding**: a run of URL characters holding ``%XX`` escapes is decoded (repeatedly, for a
  value encoded twice) and redacted as its decoded text; a changed run is encoded again around the marker.
- **idempotency keys**: an ``@tool`` argument carrying the call's idempotency key is kept as the event's
  ``tool.idempotency_key`` is, in clear: a key that de-duplicates writes is not a credential, and replay
  and reviewers match writes on it. A key shaped like a secret is redacted in both places alike.

Every view goes through :meth:`Redactor.redact_string`, so the final scan and ``agentreplay verify`` (both
"what redaction would still change") see them too.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import zlib
from typing import Any, Protocol
from urllib.parse import quote, unquote

from .constants import REDACTED
from .run_state import RunRedactor


class Redactor(Protocol):
    """What these views need of ``redaction.Redactor``: declared here so the import goes one way."""

    def redact(self, value: Any, *, keys: bool = True) -> Any: ...

    def redact_string(self, text: str, *, keys: bool = True) -> str: ...

    def redact_bytes(self, raw: bytes, content_type: str | None = None, *, keys: bool = True) -> bytes: ...

    def _redact_text_body(self, text: str, ctype: str, keys: bool) -> dict[str, Any]: ...

# Base64 longer than this is not decoded (about 3 MiB of text); a secret needs more than the minimum.
MAX_ENCODED_CHARS = 4 * 1024 * 1024
MIN_ENCODED_CHARS = 24
# Decompressed output looked at, at most: a frame is small on disk and may expand a thousandfold.
MAX_FRAME_OUTPUT = 8 * 1024 * 1024
# Bytes decoded first to tell text from binary before decoding a large string whole.
_PROBE_CHARS = 4096

_BASE64 = re.compile(r"[A-Za-z0-9+/\-_\r\n]+={0,2}")
_DATA_URL = re.compile(r"data:[^,;\s]*(?:;[^,;\s]+)*;base64,", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_URL_CHARS = r"[A-Za-z0-9\-._~!$'()*+,:@/%\[\]]*"
_PERCENT_RUN = re.compile(_URL_CHARS + "%[0-9A-Fa-f]{2}" + _URL_CHARS)
# Literal in a re-encoded percent run: what the run could already hold literally, and the marker.
_PERCENT_SAFE = "-._~!$'()*+,:@/[]"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def redact_encoded(redactor: Redactor, text: str, keys: bool) -> str:
    """``text`` with secrets inside its base64 or percent-encoded forms redacted (unchanged otherwise)."""
    if len(text) >= MIN_ENCODED_CHARS:
        out = _redact_base64_string(redactor, text, keys)
        if out is not None:
            return out
    if "%" in text:
        return _PERCENT_RUN.sub(lambda m: _redact_percent_run(redactor, m.group(0), keys), text)
    return text


# -- base64 ----------------------------------------------------------------------------------------


def _redact_base64_string(redactor: Redactor, text: str, keys: bool) -> str | None:
    """The redacted string when ``text`` is base64 (or a base64 data URL) of text holding a secret."""
    prefix = ""
    if text[:5].lower() == "data:":
        found = _DATA_URL.match(text)
        if found is None:
            return None
        prefix, text = text[: found.end()], text[found.end() :]
    if len(text) > MAX_ENCODED_CHARS or _BASE64.fullmatch(text) is None:
        return None
    urlsafe = "-" in text or "_" in text
    if urlsafe and ("+" in text or "/" in text):
        return None
    compact = text.replace("\r", "").replace("\n", "")
    if len(compact) % 4 == 1 or not _plausible(_decode(compact[:_PROBE_CHARS], urlsafe), probe=True):
        return None
    raw = _decode(compact, urlsafe)
    if raw is None:
        return None
    plain = text_of(raw)
    if plain is None:
        return None
    redacted = redactor.redact_string(plain, keys=keys)
    if redacted == plain:
        return None
    if raw.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)):
        return REDACTED
    return prefix + _encode_like(redacted.encode("utf-8"), text, urlsafe)


def _decode(compact: str, urlsafe: bool) -> bytes | None:
    body = compact.rstrip("=")
    if len(body) % 4 == 1:
        body = body[:-1]  # a probe cut inside a quantum: the last character alone holds no whole byte
    padded = body + "=" * (-len(body) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def text_of(raw: bytes) -> str | None:
    """The plausible text ``raw`` holds, itself or as a gzip/zstd frame; None for binary."""
    if raw.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)):
        expanded = _expand_frame(raw)
        return expanded.decode("utf-8") if expanded is not None and _plausible(expanded) else None
    return raw.decode("utf-8") if _plausible(raw) else None


def _plausible(raw: bytes | None, *, probe: bool = False) -> bool:
    """UTF-8 with few control characters (``probe``: ``raw`` may end inside a character or be a frame)."""
    if raw is None:
        return False
    if probe and raw.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)):
        return True
    for cut in range(4 if probe else 1):
        try:
            text = raw[: len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return len(_CONTROL.findall(text)) * 20 <= len(text)
    return False


def _expand_frame(raw: bytes) -> bytes | None:
    """A gzip or zstd frame decompressed, bounded; None when it is not one or expands beyond the bound."""
    try:
        if raw.startswith(_GZIP_MAGIC):
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            out = inflater.decompress(raw, MAX_FRAME_OUTPUT)
            return None if inflater.unconsumed_tail else out
        import zstandard  # lazily, and optional: without it a zstd frame is scanned as the bytes it is

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as reader:
            out = reader.read(MAX_FRAME_OUTPUT + 1)
        return out if len(out) <= MAX_FRAME_OUTPUT else None
    except Exception:  # not a frame after all (or a damaged one): bytes like any other
        return None


def _encode_like(raw: bytes, original: str, urlsafe: bool) -> str:
    """``raw`` in base64 as ``original`` was written: alphabet, padding and line width."""
    encoded = (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode("ascii")
    if not original.rstrip("\r\n").endswith("="):
        encoded = encoded.rstrip("=")
    newline = "\r\n" if "\r\n" in original else "\n"
    width = original.find(newline)
    if width > 0:
        encoded = newline.join(encoded[i : i + width] for i in range(0, len(encoded), width))
    return encoded


def redact_base64_body(redactor: Redactor, data: str, ctype: str, keys: bool) -> dict[str, Any]:
    """A stored ``{"base64": ...}`` body redacted through its decoded view (the BODY keys that change)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"base64": redactor.redact_string(data, keys=keys)}
    if raw.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)) and (inner := text_of(raw)) is not None:
        # A gzip or zstd frame (stored before codings were decoded): a secret in it is stored decoded.
        redacted = redactor._redact_text_body(inner, ctype, keys)
        if redacted != {"text": inner}:
            return redacted
    textual = any(t in ctype for t in ("json", "text", "x-www-form-urlencoded", "xml"))
    if textual or raw.lstrip()[:1] in (b"{", b"["):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            redacted = redactor._redact_text_body(text, ctype, keys)
            if redacted == {"text": text}:
                return {"base64": data}
            return redacted
    new = redactor.redact_bytes(raw, ctype, keys=keys)
    return {"base64": data} if new == raw else {"base64": base64.b64encode(new).decode("ascii")}


# -- percent-encoding -------------------------------------------------------------------------------


def _redact_percent_run(redactor: Redactor, run: str, keys: bool) -> str:
    decoded = unquote(run)
    if decoded == run:
        return run
    redacted = redactor.redact_string(decoded, keys=keys)
    if redacted == decoded:
        return run
    return quote(redacted, safe=_PERCENT_SAFE)


# -- idempotency keys -------------------------------------------------------------------------------


def redact_tool_arguments(
    redactor: RunRedactor, arguments: dict[str, Any], idempotency_key: str | None
) -> dict[str, Any]:
    """Live ``@tool`` arguments redacted as a saved ``tool.call`` holds them (replay matches on them)."""
    event = {"tool": {"idempotency_key": idempotency_key}, "data": {"arguments": arguments}}
    redacted: dict[str, Any] = redactor.redact(event)["data"]["arguments"]
    return redacted


def keep_idempotency_key(redactor: RunRedactor, event: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``out`` (``event`` redacted) with the tool argument that carries ``tool.idempotency_key`` restored."""
    tool, data, new_data = event.get("tool"), event.get("data"), out.get("data")
    if not isinstance(tool, dict) or not isinstance(data, dict) or not isinstance(new_data, dict):
        return out
    key = tool.get("idempotency_key")
    arguments, redacted = data.get("arguments"), new_data.get("arguments")
    if not (isinstance(key, str) and key and isinstance(arguments, dict) and isinstance(redacted, dict)):
        return out
    if redactor.redact_string(key, keys=False) != key:
        return out  # shaped like a secret: redacted in the tool info too
    kept = {
        name: value
        for name, value in arguments.items()
        if redacted.get(name) == REDACTED
        and isinstance(value, str | int)
        and not isinstance(value, bool)
        and str(value) == key
    }
    if not kept:
        return out
    return {**out, "data": {**new_data, "arguments": {**redacted, **kept}}}
