"""Secret redaction for everything that goes into a cassette, and the final scan that proves it worked.

Independent nets, because credentials hide in different places: secret-named JSON keys, headers whose
name says auth/key/token/secret/signature/session/password/cookie, secret-named URL query parameters,
URL userinfo, named multipart parts, and secret-shaped values anywhere.

Redaction works on *decoded views*, what is on the wire rather than how it is stored: base64 bodies
decoded (binary ones scanned byte for byte), JSON recognised by content whatever the content type,
JSON nested inside JSON strings (tool-call arguments), multipart parts one by one, and SSE streams
joined (a key split across two chunks is one key). The final scan (:meth:`Redactor.find_secrets`) is
defined as "what :meth:`Redactor.redact` would still change", so the scan before a write,
``agentreplay verify`` and the reports see exactly the views redaction saw.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from ..exceptions import ConfigError
from . import redaction_encoded as encoded
from .constants import REDACTED

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Names compared after normalisation: camelCase -> snake_case, lower case, "-" and " " -> "_".
_SECRET_NAMES = frozenset(
    {
        "authorization",
        "proxy_authorization",
        "api_key",
        "apikey",
        "x_api_key",
        "cookie",
        "set_cookie",
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "auth",
        "private_key",
        "access_key",
        "secret_key",
        "client_secret",
        "session_id",
        "sessionid",
        "session_token",
        "signing_key",
        "encryption_key",
        "master_key",
        "subscription_key",
    }
)
_SECRET_SUFFIXES = (
    "_token",
    "_secret",
    "_password",
    "_passwd",
    "_api_key",
    "_apikey",
    "_private_key",
    "_access_key",
    "_secret_key",
    "_session_id",
    "_sessionid",
    "_credential",
    "_credentials",
    "_subscription_key",
    "_cookie",
    "_authorization",
)
# Usage counters and replay bookkeeping look like secrets by name but must survive: replay matches on them.
_NEVER_SECRET = frozenset(
    {
        "tokens",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "reasoning_tokens",
        "cached_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "idempotency_key",
        "cache_key",
        "prompt_cache_key",
        "page_token",
        "next_page_token",
        "pagination_token",
        "bos_token",
        "eos_token",
        "pad_token",
        "unk_token",
        "sep_token",
        "cls_token",
        "mask_token",
        "stop_token",
    }
)
# Only meaningful as URL parameters: a JSON "signature" is e.g. Anthropic's thinking-block signature.
_QUERY_ONLY_NAMES = frozenset({"sig", "signature", "x_amz_signature", "code_verifier"})

_BEARER_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"
_BUILTIN_VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private_key_block",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    ),
    ("anthropic", r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{16,}"),
    ("openai", r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws", r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    ("github", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("google", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    ("slack", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("jwt", r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer", rf"(?i:\bbearer)\s+(?P<bearer_tok>[{_BEARER_TOKEN_CHARS}]{{8,}}=*)"),
)
# A URL fragment's parameters ("#access_token=...", OAuth implicit flow) are parameters too.
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;#])(?P<name>[A-Za-z0-9_.\-%\[\]]+)=(?P<value>[^&#;\s\"'<>]*)")
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://(?P<userinfo>[^\s/?#@\"'<>\[\]\\]+)@")
# Userinfo is replaced without brackets: "http://[REDACTED]@host" would parse as an IPv6 host.
_URL_REDACTED = REDACTED.strip("[]")
# A "name": value pair in JSON text that may be cut anywhere (streamed tool-call arguments).
_JSON_PAIR = re.compile(
    r'"(?P<name>[A-Za-z0-9_\-. $]{1,64})"\s*:\s*(?:"(?P<str>(?:[^"\\]|\\.)*)"?|(?P<num>-?[0-9][0-9.eE+\-]*))'
)
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
_REGEX_META = frozenset("^$*+?()[]{}|\\.")
_BODY_KINDS = ("json", "text", "base64", "sse")
_BOUNDARY = re.compile(r'boundary\s*=\s*(?:"(?P<quoted>[^"]+)"|(?P<plain>[^;\s]+))', re.IGNORECASE)
_PART_NAME = re.compile(r'\bname\s*=\s*(?:"(?P<quoted>[^"]*)"|(?P<plain>[^;\s]+))', re.IGNORECASE)
_PART_TYPE = re.compile(r"^content-type\s*:\s*(?P<value>[^\r\n]*)", re.IGNORECASE | re.MULTILINE)

# A header is a credential when a word of its name says so ("X-Auth-Key", "X-Session-Id", "Cookie")...
_HEADER_MARKERS = ("auth", "key", "token", "secret", "signature", "session", "password", "passwd", "cookie")
# ...except these words (rate-limit counters: "x-ratelimit-remaining-tokens") and names, which replay
# and reviewers need readable: idempotency keys are how writes are matched and de-duplicated.
_HEADER_WORDS_KEPT = frozenset({"tokens"})
_HEADERS_KEPT = frozenset({"idempotency_key", "x_idempotency_key", "idempotency_token", "cache_key"})
_SECRET_HEADER_NAMES = frozenset({"openai_organization", "openai_project", "anthropic_organization_id"})

# Large strings (conversation messages resent with every call) are redacted once per Redactor.
_CACHE_MIN_CHARS = 48
_CACHE_MAX_CHARS = 8_000_000
_MISSING = object()
_MAX_IDS = 200_000
_JSON_DUMP_FORMATS: tuple[dict[str, Any], ...] = (
    {"separators": (",", ":"), "ensure_ascii": False},
    {"ensure_ascii": True},
    {"ensure_ascii": False},
    {"separators": (",", ":"), "ensure_ascii": True},
    {"indent": 2, "ensure_ascii": False},
    {"indent": 2, "ensure_ascii": True},
)


def normalize_name(name: str) -> str:
    return _CAMEL.sub("_", name).lower().replace("-", "_").replace(" ", "_")


def _is_exempt(value: Any) -> bool:
    # Nothing to hide in an absent value, a flag or something already redacted; keeps redaction idempotent.
    return value is None or isinstance(value, bool) or value == "" or value == REDACTED


def _bearer_token_is_secret(token: str) -> bool:
    # "the bearer of bad news" is prose; a token has length or machine characters.
    return len(token) >= 20 or any(c.isdigit() or c in "-._~+/=" for c in token)


def _child_path(path: str, key: str) -> str:
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_\-$]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _looks_like_json(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= 2 and (
        (stripped[0] == "{" and stripped[-1] == "}") or (stripped[0] == "[" and stripped[-1] == "]")
    )


def _dump_like(value: Any, original: str) -> str:
    """``value`` serialised as ``original`` was (compact, spaced, indented): only the secret changes."""
    try:
        parsed = json.loads(original)
    except (ValueError, RecursionError):
        parsed = _NOT_JSON
    if parsed is not _NOT_JSON:
        for kwargs in _JSON_DUMP_FORMATS:
            if json.dumps(parsed, **kwargs) == original:
                return json.dumps(value, **kwargs)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


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


def _string_leaves(value: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], str]]) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _string_leaves(v, (*path, k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _string_leaves(v, (*path, i), out)


def _set_leaf(root: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    target: Any = root
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


class Redactor:
    """Replaces secrets in JSON values with ``constants.REDACTED``; configurable per project."""

    def __init__(
        self,
        *,
        extra_headers: Iterable[str] = (),
        extra_keys: Iterable[str] = (),
        extra_key_patterns: Iterable[str | re.Pattern[str]] = (),
        extra_value_patterns: Iterable[str | re.Pattern[str]] = (),
    ) -> None:
        self._extra_names = frozenset(normalize_name(n) for n in (*extra_headers, *extra_keys))
        self._key_patterns = tuple(
            re.compile(p, re.IGNORECASE) if isinstance(p, str) else p for p in extra_key_patterns
        )
        extra_values = tuple(re.compile(p) if isinstance(p, str) else p for p in extra_value_patterns)
        self._extra_values = extra_values
        self._values = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _BUILTIN_VALUE_PATTERNS))
        self._name_cache: dict[tuple[str, bool], bool] = {}
        self._header_cache: dict[str, bool] = {}
        self._string_cache: dict[tuple[str, bool], str] = {}
        self._cached_chars = 0
        # A conversation resends its history on every call: each message (a list element) is redacted
        # once per run, keyed by its canonical text, and the redacted copy is shared by every request.
        self._element_cache: dict[tuple[bool, str], Any] = {}
        self._element_ids: dict[tuple[int, bool], tuple[Any, Any]] = {}
        # Off for the process-wide default redactor: it would keep every object it saw alive.
        self.remember_objects = True
        self._element_chars = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Redactor:
        """Build from ``[tool.agentreplay]`` keys ``redact_headers``, ``redact_keys``, ``redact_patterns``.

        A ``redact_keys`` entry with regex metacharacters is a case-insensitive full-match regex.
        """
        lists: dict[str, list[str]] = {}
        for option in ("redact_headers", "redact_keys", "redact_patterns"):
            raw = config.get(option, [])
            if isinstance(raw, str):
                raw = [raw]
            if not isinstance(raw, list | tuple) or not all(isinstance(item, str) for item in raw):
                raise ConfigError(
                    f"[tool.agentreplay] {option} must be a list of strings",
                    evidence=[f"got: {raw!r}"],
                    place=f"[tool.agentreplay] {option}",
                    fixes=[f'write it as {option} = ["..."]'],
                )
            lists[option] = list(raw)
        names = [k for k in lists["redact_keys"] if not (_REGEX_META & set(k))]
        key_patterns = [k for k in lists["redact_keys"] if _REGEX_META & set(k)]
        compiled_keys = [_compile(p, "redact_keys", re.IGNORECASE) for p in key_patterns]
        compiled_values = [_compile(p, "redact_patterns", 0) for p in lists["redact_patterns"]]
        return cls(
            extra_headers=lists["redact_headers"],
            extra_keys=names,
            extra_key_patterns=compiled_keys,
            extra_value_patterns=compiled_values,
        )

    # -- decisions -------------------------------------------------------------------------------

    def is_secret_name(self, name: str, *, query: bool = False) -> bool:
        """Whether a JSON key or (with ``query``) URL parameter of this name holds a secret."""
        cache_key = (name, query)
        cached = self._name_cache.get(cache_key)
        if cached is not None:
            return cached
        result = self._decide_name(name, query)
        if len(self._name_cache) < 65536:
            self._name_cache[cache_key] = result
        return result

    def _decide_name(self, name: str, query: bool) -> bool:
        norm = normalize_name(name)
        if norm in self._extra_names or any(p.fullmatch(name) for p in self._key_patterns):
            return True
        if norm in _NEVER_SECRET:
            return False
        # The suffixes catch vendor headers: "anthropic-api-key", "x-goog-api-key", "x-auth-token".
        if norm in _SECRET_NAMES or norm.endswith(_SECRET_SUFFIXES):
            return True
        return query and norm in _QUERY_ONLY_NAMES

    def is_secret_header(self, name: str) -> bool:
        """Whether an HTTP header of this name carries a credential.

        Wider than JSON keys: any word of the name containing auth/key/token/secret/signature/session/
        password/cookie ("X-Auth-Key", "X-Amz-Security-Token", "X-Session-Id"), minus a short allowlist
        that must stay readable (``Idempotency-Key``, rate-limit token counters).
        """
        cached = self._header_cache.get(name)
        if cached is not None:
            return cached
        norm = normalize_name(name)
        if self.is_secret_name(name) or norm in _SECRET_HEADER_NAMES:
            result = True
        elif norm in _NEVER_SECRET or norm in _HEADERS_KEPT or "idempotency" in norm:
            result = False
        else:
            result = any(
                word not in _HEADER_WORDS_KEPT and any(marker in word for marker in _HEADER_MARKERS)
                for word in norm.split("_")
            )
        if len(self._header_cache) < 65536:
            self._header_cache[name] = result
        return result

    # -- redaction -------------------------------------------------------------------------------

    def redact(self, value: Any, *, keys: bool = True) -> Any:
        """A redacted copy of a JSON value; ``keys=False`` applies only the value-shape rules."""
        if isinstance(value, str):
            return self.redact_string(value, keys=keys)
        if isinstance(value, dict):
            if _is_body(value):
                return self.redact_body(value, keys=keys)
            out: dict[str, Any] = {}
            for k, v in value.items():
                new_key = self.redact_string(k, keys=False) if isinstance(k, str) else k
                if keys and isinstance(k, str) and self.is_secret_name(k) and not _is_exempt(v):
                    out[new_key] = REDACTED
                elif keys and k == "headers" and isinstance(v, dict | list):
                    out[new_key] = self.redact_headers(v)
                else:
                    out[new_key] = self.redact(v, keys=keys)
            if keys and "tool" in value:
                out = encoded.keep_idempotency_key(self, value, out)
            return out
        if isinstance(value, list):
            if keys and _is_header_pair(value) and self.is_secret_name(value[0]) and not _is_exempt(value[1]):
                return [value[0], REDACTED]
            return [
                self._redact_element(v, keys) if isinstance(v, dict | list) else self.redact(v, keys=keys)
                for v in value
            ]
        return value

    def _redact_element(self, value: Any, keys: bool) -> Any:
        # The same object again (a history shared between requests, see http.recording.share_repeats).
        if not self.remember_objects:
            return self._redact_element_by_content(value, keys)
        seen = self._element_ids.get((id(value), keys))
        if seen is not None and seen[0] is value:
            return seen[1]
        out = self._redact_element_by_content(value, keys)
        if len(self._element_ids) >= _MAX_IDS:
            self._element_ids.clear()
        self._element_ids[(id(value), keys)] = (value, out)  # holding value keeps its id unique
        return out

    def _redact_element_by_content(self, value: Any, keys: bool) -> Any:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return self.redact(value, keys=keys)
        cache_key = (keys, text)
        cached = self._element_cache.get(cache_key, _MISSING)
        if cached is not _MISSING:
            return cached
        out = self.redact(value, keys=keys)
        if self._element_chars + len(text) > _CACHE_MAX_CHARS:
            self._element_cache.clear()
            self._element_chars = 0
        self._element_cache[cache_key] = out
        self._element_chars += len(text)
        return out

    def redact_headers(self, headers: Any) -> Any:
        """Headers as a mapping or as ``[name, value]`` pairs, with every credential header redacted."""
        if isinstance(headers, dict):
            out: dict[str, Any] = {}
            for name, value in headers.items():
                new_name = self.redact_string(name, keys=False) if isinstance(name, str) else name
                if isinstance(name, str) and self.is_secret_header(name) and not _is_exempt(value):
                    out[new_name] = REDACTED
                else:
                    out[new_name] = self.redact(value)
            return out
        if isinstance(headers, list):
            return [
                [pair[0], REDACTED]
                if _is_header_pair(pair) and self.is_secret_header(pair[0]) and not _is_exempt(pair[1])
                else self.redact(pair)
                for pair in headers
            ]
        return self.redact(headers)

    def redact_url(self, url: str) -> str:
        """A URL as stored: userinfo and secret query parameters redacted (cheap when there are none)."""
        if not any(c in url for c in "?@#%") and not _may_hold_value(url):
            return url
        return self.redact_string(url, keys=False)

    def redact_string(self, text: str, *, keys: bool = True) -> str:
        if len(text) < _CACHE_MIN_CHARS:
            return self._redact_string(text, keys)
        cache_key = (text, keys)
        cached = self._string_cache.get(cache_key)
        if cached is not None:
            return cached
        out = self._redact_string(text, keys)
        if self._cached_chars + len(text) > _CACHE_MAX_CHARS:
            self._string_cache.clear()
            self._cached_chars = 0
        self._string_cache[cache_key] = out
        self._cached_chars += len(text)
        return out

    def _redact_string(self, text: str, keys: bool) -> str:
        out = text
        if keys and text != REDACTED and _looks_like_json(text):
            # JSON inside a JSON string (an OpenAI tool call's "arguments"): its keys count too.
            parsed = _try_json(text)
            if isinstance(parsed, dict | list):
                redacted = self.redact(parsed, keys=True)
                if redacted != parsed:
                    out = _dump_like(redacted, text)
        if _may_hold_value(out):
            out = self._values.sub(self._value_replacement, out)
        for pattern in self._extra_values:
            out = pattern.sub(REDACTED, out)
        if "@" in out and "://" in out:
            out = _USERINFO.sub(self._userinfo_replacement, out)
        if "=" in out and ("?" in out or "&" in out or "#" in out):
            out = _QUERY_PARAM.sub(self._query_replacement, out)
        return encoded.redact_encoded(self, out, keys)

    def _value_replacement(self, match: re.Match[str]) -> str:
        if match.group("bearer") is not None:
            token = match.group("bearer_tok")
            if not _bearer_token_is_secret(token):
                return match.group(0)
            head = match.group(0)[: match.start("bearer_tok") - match.start()]
            return head + REDACTED
        return REDACTED

    @staticmethod
    def _userinfo_replacement(match: re.Match[str]) -> str:
        whole = match.group(0)
        return whole[: match.start("userinfo") - match.start()] + _URL_REDACTED + "@"

    def _query_replacement(self, match: re.Match[str]) -> str:
        name = match.group("name")
        value = match.group("value")
        if not value or value == REDACTED or not self.is_secret_name(unquote(name), query=True):
            return match.group(0)
        return f"{match.group('lead')}{name}={REDACTED}"

    def secret_spans(self, text: str, *, keys: bool = True) -> list[tuple[int, int]]:
        """Character spans of ``text`` holding secrets, merged and sorted.

        Works on text cut anywhere (a stream joined from its chunks, JSON that never closes), so the
        name rules look at ``"name": value`` pairs and ``name=value`` parameters rather than parse.
        """
        spans: list[tuple[int, int]] = []
        if _may_hold_value(text):
            for match in self._values.finditer(text):
                if match.group("bearer") is None:
                    spans.append(match.span())
                elif _bearer_token_is_secret(match.group("bearer_tok")):
                    spans.append(match.span("bearer_tok"))
        for pattern in self._extra_values:
            spans.extend(m.span() for m in pattern.finditer(text))
        if "@" in text and "://" in text:
            found = _USERINFO.finditer(text)
            spans.extend(m.span("userinfo") for m in found if m["userinfo"] != _URL_REDACTED)
        if "=" in text:
            for match in _QUERY_PARAM.finditer(text):
                value = match.group("value")
                name = unquote(match.group("name"))
                if value and value != REDACTED and self.is_secret_name(name, query=True):
                    spans.append(match.span("value"))
        if keys and '"' in text:
            for match in _JSON_PAIR.finditer(text):
                group = "str" if match.group("str") is not None else "num"
                value = match.group(group)
                if value and value != REDACTED and self.is_secret_name(match.group("name")):
                    spans.append(match.span(group))
        return _merge(spans)

    def redact_body(self, body: dict[str, Any], *, keys: bool = True) -> dict[str, Any]:
        """Redact an HTTP body (``json``/``text``/``base64``/``sse``) through its decoded view.

        JSON is recognised by content, whatever the content type (``text/plain`` too; matching only
        ``application/json`` is how vcrpy leaks secrets); changed JSON text becomes ``json``. Base64
        bodies are decoded; multipart bodies are redacted part by part; SSE streams are scanned joined.
        """
        content_type = body.get("content_type")
        ctype = content_type.lower() if isinstance(content_type, str) else ""
        out = {k: self.redact(v, keys=keys) for k, v in body.items() if k not in _BODY_KINDS}
        if "json" in body:
            out["json"] = self.redact(body["json"], keys=keys)
        if isinstance(body.get("text"), str):
            out.update(self._redact_text_body(body["text"], ctype, keys))
        elif "text" in body:
            out["text"] = self.redact(body["text"], keys=keys)
        if isinstance(body.get("base64"), str):
            out.update(encoded.redact_base64_body(self, body["base64"], ctype, keys))
        elif "base64" in body:
            out["base64"] = self.redact(body["base64"], keys=keys)
        if isinstance(body.get("sse"), list):
            out["sse"] = self.redact_sse(body["sse"], keys=keys)
        elif "sse" in body:
            out["sse"] = self.redact(body["sse"], keys=keys)
        if "raw" in out and (out["raw"] != body["raw"] or out.get("json") != body.get("json")):
            del out["raw"]  # the exact text of a JSON body (http/bodies.py) holds what was redacted
        return out

    def _redact_text_body(self, text: str, ctype: str, keys: bool) -> dict[str, Any]:
        if "json" in ctype or _looks_like_json(text):
            parsed = _try_json(text)
            if parsed is not _NOT_JSON:
                redacted = self.redact(parsed, keys=keys)
                if redacted != parsed:
                    return {"json": redacted}
                return {"text": text}
        if ctype.startswith("multipart/"):
            raw = text.encode("utf-8")
            redacted_raw = self._redact_multipart(raw, ctype, keys)
            return {"text": text if redacted_raw == raw else redacted_raw.decode("utf-8", "replace")}
        if keys and "x-www-form-urlencoded" in ctype:
            text = _QUERY_PARAM.sub(self._query_replacement, "&" + text)[1:]
        return {"text": self.redact_string(text, keys=keys)}

    def redact_bytes(self, raw: bytes, content_type: str | None = None, *, keys: bool = True) -> bytes:
        """Raw body bytes redacted through their decoded view (multipart parts, JSON, text, binary)."""
        ctype = (content_type or "").lower()
        if ctype.startswith("multipart/"):
            return self._redact_multipart(raw, ctype, keys)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Binary: latin-1 maps every byte to one character, so ASCII-shaped keys are found in
            # place and every other byte comes back unchanged.
            return self.redact_string(raw.decode("latin-1"), keys=keys).encode("latin-1")
        redacted = self._redact_text_body(text, ctype, keys)
        if "json" in redacted:
            return _dump_like(redacted["json"], text).encode("utf-8")
        new_text: str = redacted["text"]
        return raw if new_text == text else new_text.encode("utf-8")

    def _redact_multipart(self, raw: bytes, ctype: str, keys: bool) -> bytes:
        found = _BOUNDARY.search(ctype)
        if found is None:
            return self.redact_string(raw.decode("latin-1"), keys=keys).encode("latin-1")
        boundary = (found.group("quoted") or found.group("plain")).encode("latin-1")
        delimiter = b"--" + boundary
        chunks = raw.split(delimiter)
        out = [chunks[0]]
        for chunk in chunks[1:]:
            head, sep, content = chunk.partition(b"\r\n\r\n")
            if chunk.startswith(b"--") or not sep:
                out.append(self.redact_string(chunk.decode("latin-1"), keys=keys).encode("latin-1"))
                continue
            trail = b"\r\n" if content.endswith(b"\r\n") else b""
            if trail:
                content = content[:-2]
            head_text = head.decode("latin-1")
            name_match = _PART_NAME.search(head_text)
            name = (name_match.group("quoted") or name_match.group("plain") or "") if name_match else ""
            type_match = _PART_TYPE.search(head_text)
            part_type = type_match.group("value").strip() if type_match else "text/plain"
            if keys and name and self.is_secret_name(name) and content and content != REDACTED.encode():
                content = REDACTED.encode()
            else:
                content = self.redact_bytes(content, part_type, keys=keys)
            new_head = self.redact_string(head_text, keys=False).encode("latin-1")
            out.append(new_head + sep + content + trail)
        return delimiter.join(out)

    def redact_sse(self, events: list[Any], *, keys: bool = True) -> list[Any]:
        """A stream's events, redacted joined (a key split across chunks) and then one by one."""
        out = [self._redact_sse_item(item, keys) for item in self._redact_sse_joined(events, keys)]
        for index, (old, new) in enumerate(zip(events, out, strict=True)):
            if isinstance(new, dict) and "raw" in new and new != old:
                # An event's exact wire text (http/sse.py) holds what was redacted: render it instead.
                out[index] = {k: v for k, v in new.items() if k != "raw"}
        return out

    def _redact_sse_joined(self, events: list[Any], keys: bool) -> list[Any]:
        # The strings at one place of one event type ("choices[0].delta.content" of every chunk) are
        # one text cut into pieces: scan it whole, then cut the secrets out of the pieces they span.
        groups: dict[tuple[Any, tuple[Any, ...]], list[tuple[int, tuple[Any, ...], str]]] = {}
        for index, item in enumerate(events):
            if not isinstance(item, dict) or "data" not in item:
                continue
            leaves: list[tuple[tuple[Any, ...], str]] = []
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
            spans = self.secret_spans("".join(texts), keys=keys)
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

    def _redact_sse_item(self, item: Any, keys: bool) -> Any:
        if not isinstance(item, dict) or not isinstance(item.get("data"), str):
            return self.redact(item, keys=keys)
        out = {k: self.redact(v, keys=keys) for k, v in item.items() if k != "data"}
        parsed = _try_json(item["data"])
        if isinstance(parsed, dict | list):
            redacted = self.redact(parsed, keys=keys)
            out["data"] = redacted if redacted != parsed else item["data"]
        else:
            out["data"] = self.redact_string(item["data"], keys=keys)
        return out

    # -- final scan ------------------------------------------------------------------------------

    def find_secrets(self, value: Any, path: str = "", *, keys: bool = True) -> list[str]:
        """JSON paths of everything in ``value`` that :meth:`redact` would still change.

        Defined through :meth:`redact` itself, so the scan sees the same decoded views (base64
        decoded, nested JSON, joined streams, multipart parts) and can never disagree with it.
        """
        found: list[str] = []
        self._diff(value, self.redact(value, keys=keys), path, found)
        return found

    def _diff(self, value: Any, redacted: Any, path: str, found: list[str]) -> None:
        if value == redacted:
            return
        if isinstance(value, dict) and isinstance(redacted, dict):
            if _is_body(value):
                changed = [k for k in _BODY_KINDS if k in value and redacted.get(k) != value[k]]
                found.extend(_child_path(path, k) for k in changed or ["content_type"])
                return
            for k, v in value.items():
                child = _child_path(path, str(k))
                new_key = self.redact_string(k, keys=False) if isinstance(k, str) else k
                if new_key != k:
                    found.append(f"{child} (key)")
                self._diff(v, redacted.get(new_key), child, found)
            return
        if isinstance(value, list) and isinstance(redacted, list) and len(value) == len(redacted):
            if _is_header_pair(value) and redacted[1] == REDACTED:
                found.append(f"{path or '$'}[1]")
                return
            for i, (v, r) in enumerate(zip(value, redacted, strict=True)):
                self._diff(v, r, f"{path}[{i}]", found)
            return
        found.append(path or "$")


_NOT_JSON: Any = object()


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


# Cheap pre-filter: every built-in value pattern needs one of these substrings (one C-level scan).
_VALUE_HINT = re.compile("sk-|sk_|rk_|AKIA|ASIA|gh|AIza|xox|eyJ|earer|EARER|PRIVATE KEY")


def _may_hold_value(text: str) -> bool:
    return _VALUE_HINT.search(text) is not None


def _is_body(value: dict[str, Any]) -> bool:
    return "content_type" in value and any(kind in value for kind in _BODY_KINDS)


def _is_header_pair(value: list[Any]) -> bool:
    # Some clients keep headers as [name, value] pairs to preserve duplicates and order.
    return (
        len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], str)
        and _HEADER_NAME.fullmatch(value[0]) is not None
    )


def _compile(pattern: str, option: str, flags: int) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ConfigError(
            f"[tool.agentreplay] {option} contains an invalid regular expression: {pattern!r}",
            evidence=[f"re.error: {exc}"],
            place=f"[tool.agentreplay] {option}",
            fixes=[
                f"fix or remove {pattern!r} (Python `re` syntax)",
                "escape literal characters with a backslash",
            ],
        ) from exc


@functools.cache
def default_redactor() -> Redactor:
    """The redactor of the built-in rules, built once: it holds compiled patterns and nothing per run."""
    redactor = Redactor()
    redactor.remember_objects = False
    return redactor


def redact(value: Any) -> Any:
    """Redact with the built-in rules only."""
    return default_redactor().redact(value)


def redact_body(body: dict[str, Any]) -> dict[str, Any]:
    return default_redactor().redact_body(body)


def find_secrets(value: Any, redactor: Redactor | None = None, *, path: str = "") -> list[str]:
    """JSON paths of anything still secret-shaped; the last check before a cassette is written."""
    return (redactor or default_redactor()).find_secrets(value, path)


RedactHook = Callable[[dict[str, Any]], dict[str, Any]]
