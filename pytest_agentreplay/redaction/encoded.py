"""Secrets hidden in an encoding: the views :mod:`.redactor` takes of a string beyond its plain text.

- **base64** (either alphabet, padded or not, MIME lines, ``data:`` URLs) is decoded and, redacted, encoded
  again as it was written: a JSON document is redacted as JSON; a gzip/zstd frame holding a secret becomes
  the marker whole (recompressed, the redaction would be hidden from the reviewer); other bytes are
  **masked in place** (:func:`mask_bytes`; docs/cassettes.md, "Secrets in bytes"), so every length prefix
  and offset of a binary format stays true.
- **percent-encoding**: a run holding ``%XX`` escapes is redacted as its decoded text, then encoded again.
- **idempotency keys**: an ``@tool`` argument carrying the call's idempotency key stays in clear, as the
  event's ``tool.idempotency_key`` does (replay and reviewers match writes on it).

Every view goes through :meth:`Redactor.redact_string`, so the final scan sees them too.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import zlib
from urllib.parse import quote, unquote

from ..core.constants import REDACTED
from ..core.documents import Document
from .rules import NOT_JSON, Redacting, compiled_on_use, looks_like_json, try_json

# Base64 longer than this is not decoded (about 3 MiB of text); a secret needs more than the minimum.
MAX_ENCODED_CHARS = 4 * 1024 * 1024
MIN_ENCODED_CHARS = 24
# Decompressed output looked at, at most: a frame is small on disk and may expand a thousandfold.
MAX_FRAME_OUTPUT = 8 * 1024 * 1024

_BASE64 = compiled_on_use(r"[A-Za-z0-9+/\-_\r\n]+={0,2}")
_DATA_URL = compiled_on_use(r"data:[^,;\s]*(?:;[^,;\s]+)*;base64,", re.IGNORECASE)
_CONTROL = compiled_on_use(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_URL_CHARS = r"[A-Za-z0-9\-._~!$'()*+,:@/%\[\]]*"
_PERCENT_RUN = compiled_on_use(_URL_CHARS + "%[0-9A-Fa-f]{2}" + _URL_CHARS)
# Literal in a re-encoded percent run: what the run could already hold literally, and the marker.
_PERCENT_SAFE = "-._~!$'()*+,:@/[]"
# The value shapes of :data:`.rules.BUILTIN_VALUE_PATTERNS` refuse a letter or digit just before them (inside
# a word, "task-..." is no key). In bytes that character is often a length prefix: a protobuf field holding
# a 48-character key is ``\n0sk-proj-...`` ("0" is 48). A lone word character before one of their
# beginnings is read as a separator in a second view of the bytes.
_GLUED = compiled_on_use(
    r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-](?=sk-|sk_|rk_|AKIA|ASIA|gh[pousr]_|github_pat_|AIza|xox|eyJ)"
)
# A mask :func:`mask` wrote: the marker padded with "*", or cut (to two characters at least).
_MASKED = compiled_on_use("|".join([r"\[REDACTED\]\**", *(re.escape(REDACTED[:n]) for n in range(9, 1, -1))]))
# A run of text in bytes: no control character (tab and line breaks are text) and no undecodable byte.
_RUN = compiled_on_use("[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f\udc80-\udcff]{6,}")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
FRAME_MAGICS = (_GZIP_MAGIC, _ZSTD_MAGIC)


def redact_encoded(redactor: Redacting, text: str, keys: bool) -> str:
    """``text`` with secrets inside its base64 or percent-encoded forms redacted (unchanged otherwise)."""
    # Text holding ':' or ' ' is base64 only after a data URL's prefix (neither is in its alphabet).
    if len(text) >= MIN_ENCODED_CHARS and (
        (":" not in text and " " not in text) or text[:5].lower() == "data:"
    ):
        out = _redact_base64_string(redactor, text, keys)
        if out is not None:
            return out
    if "%" in text:
        return _PERCENT_RUN().sub(lambda m: _redact_percent_run(redactor, m.group(0), keys), text)
    return text


# -- base64 ----------------------------------------------------------------------------------------


def _redact_base64_string(redactor: Redacting, text: str, keys: bool) -> str | None:
    """The redacted string when ``text`` is base64 (or a base64 data URL) of bytes holding a secret."""
    prefix = ""
    if text[:5].lower() == "data:":
        found = _DATA_URL().match(text)
        if found is None:
            return None
        prefix, text = text[: found.end()], text[found.end() :]
    if len(text) > MAX_ENCODED_CHARS or _BASE64().fullmatch(text) is None:
        return None
    urlsafe = "-" in text or "_" in text
    if urlsafe and ("+" in text or "/" in text):
        return None
    compact = text.replace("\r", "").replace("\n", "")
    if len(compact) % 4 == 1:
        return None
    raw = _decode(compact, urlsafe)
    if raw is None:
        return None
    if raw.startswith(FRAME_MAGICS):
        plain = text_of(raw)
        if plain is None or redactor.redact_string(plain, keys=keys) == plain:
            return None
        return REDACTED
    document = _json_document(raw)
    if document is not None:
        redacted = redactor.redact_string(document, keys=keys)
        if redacted == document:
            return None
        return prefix + _encode_like(redacted.encode("utf-8"), text, urlsafe)
    masked = mask_bytes(redactor, raw, keys=keys)
    if masked is None:
        return None
    return prefix + _encode_like(masked, text, urlsafe)


def _json_document(raw: bytes) -> str | None:
    """The text of ``raw`` when it is a JSON object or array (UTF-8): redacted as JSON, its length free."""
    if raw.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if looks_like_json(text) and try_json(text) is not NOT_JSON else None


# -- bytes whose length matters -----------------------------------------------------------------------


def mask(length: int) -> str:
    """The marker cut or padded with ``*`` to ``length`` characters: ``[REDACTED]***``, ``[REDA``."""
    return (REDACTED + "*" * max(0, length - len(REDACTED)))[:length]


def mask_bytes(redactor: Redacting, raw: bytes, *, keys: bool = True) -> bytes | None:
    """``raw`` with every secret's bytes overwritten in place by :func:`mask` of their length; None when it
    holds none. Read run by run (text between control characters and undecodable bytes), so the cost follows
    the text the bytes hold; a change no span places (a nested encoding) masks its whole run.
    """
    view = raw.decode("utf-8", "surrogateescape")
    spans = _run_spans(redactor, view, keys, whole=False)
    if not spans:
        return None
    out = _overwrite(raw, view, spans)
    check = out.decode("utf-8", "surrogateescape")
    left = _run_spans(redactor, check, keys, whole=True)
    if left:
        out = _overwrite(out, check, left)
    return None if out == raw else out


def _run_spans(redactor: Redacting, view: str, keys: bool, *, whole: bool) -> list[tuple[int, int]]:
    """Character spans of ``view`` to mask in the runs redaction would change (whole runs with ``whole``)."""
    spans: list[tuple[int, int]] = []
    for run in _RUN().finditer(view):
        text = run.group(0)
        glued = _GLUED().sub("\x00", text)
        changed = [v for v in dict.fromkeys((text, glued)) if _changes(redactor, v, keys)]
        if not changed:
            continue
        found: list[tuple[int, int]] = []
        if not whole:
            found = [span for v in changed for span in redactor.secret_spans(v, keys=keys)]
            if "%" in text:
                found.extend(
                    percent.span()
                    for percent in _PERCENT_RUN().finditer(text)
                    if _redact_percent_run(redactor, percent.group(0), keys) != percent.group(0)
                )
        base = run.start()
        spans.extend((base + start, base + end) for start, end in found or [(0, len(text))])
    return spans


def _changes(redactor: Redacting, text: str, keys: bool) -> bool:
    """Whether redaction would change ``text``, its masks read as the marker they stand for (a masked
    ``access_token=[REDACTED]****`` is redacted already)."""
    plain = _MASKED().sub(REDACTED, text)
    return redactor.redact_string(plain, keys=keys) != plain


def _overwrite(raw: bytes, view: str, spans: list[tuple[int, int]]) -> bytes:
    """``raw`` with the bytes under each character span of ``view`` (its UTF-8 view) masked."""
    multibyte = len(view) != len(raw)  # then character offsets are not byte offsets

    def at(index: int) -> int:
        return len(view[:index].encode("utf-8", "surrogateescape")) if multibyte else index

    out = bytearray(raw)
    for start, end in spans:
        first, last = at(start), at(end)
        if last > first:
            out[first:last] = mask(last - first).encode("ascii")
    return bytes(out)


def _decode(compact: str, urlsafe: bool) -> bytes | None:
    body = compact.rstrip("=")
    if len(body) % 4 == 1:
        body = body[:-1]  # the last character alone holds no whole byte
    padded = body + "=" * (-len(body) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def text_of(raw: bytes) -> str | None:
    """The plausible text ``raw`` holds, itself or as a gzip/zstd frame; None for binary."""
    if raw.startswith(FRAME_MAGICS):
        expanded = _expand_frame(raw)
        return expanded.decode("utf-8") if expanded is not None and _plausible(expanded) else None
    return raw.decode("utf-8") if _plausible(raw) else None


def _plausible(raw: bytes) -> bool:
    """UTF-8 with few control characters (at most one in twenty)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return len(_CONTROL().findall(text)) * 20 <= len(text)


def _expand_frame(raw: bytes) -> bytes | None:
    """A gzip or zstd frame decompressed, bounded; None when it is not one or expands beyond the bound."""
    try:
        if raw.startswith(_GZIP_MAGIC):
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            out = inflater.decompress(raw, MAX_FRAME_OUTPUT)
            return None if inflater.unconsumed_tail else out
        import zstandard  # optional, and lazily: without it a zstd frame is scanned as the bytes it is

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


# -- percent-encoding -------------------------------------------------------------------------------


def _redact_percent_run(redactor: Redacting, run: str, keys: bool) -> str:
    decoded = unquote(run)
    if decoded == run:
        return run
    redacted = redactor.redact_string(decoded, keys=keys)
    if redacted == decoded:
        return run
    return quote(redacted, safe=_PERCENT_SAFE)


# -- idempotency keys -------------------------------------------------------------------------------


def redact_tool_arguments(redactor: Redacting, arguments: Document, idempotency_key: str | None) -> Document:
    """Live ``@tool`` arguments redacted as a saved ``tool.call`` holds them (replay matches on them)."""
    event: Document = {"tool": {"idempotency_key": idempotency_key}, "data": {"arguments": arguments}}
    redacted: Document = redactor.redact(event)["data"]["arguments"]
    return redacted


def keep_idempotency_key(redactor: Redacting, event: Document, out: Document) -> Document:
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
