"""Secret redaction for everything that goes into a cassette, and the final scan that proves it worked.

Three independent nets, because providers put credentials in different places: secret-named keys
(headers and JSON fields), secret-named URL query parameters, and secret-shaped values anywhere.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from .constants import REDACTED
from .exceptions import ConfigError

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
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[A-Za-z0-9_.\-%\[\]]+)=(?P<value>[^&#;\s\"'<>]*)")
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
_REGEX_META = frozenset("^$*+?()[]{}|\\.")
_BODY_KINDS = ("json", "text", "base64", "sse")


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
        """Whether a header, JSON key or (with ``query``) URL parameter of this name holds a secret."""
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

    # -- redaction -------------------------------------------------------------------------------

    def redact(self, value: Any, *, keys: bool = True) -> Any:
        """A redacted copy of a JSON value; ``keys=False`` applies only the value-shape rules."""
        if isinstance(value, str):
            return self.redact_string(value)
        if isinstance(value, dict):
            if _is_body(value):
                return self.redact_body(value, keys=keys)
            out: dict[str, Any] = {}
            for k, v in value.items():
                new_key = self.redact_string(k) if isinstance(k, str) else k
                if keys and isinstance(k, str) and self.is_secret_name(k) and not _is_exempt(v):
                    out[new_key] = REDACTED
                else:
                    out[new_key] = self.redact(v, keys=keys)
            return out
        if isinstance(value, list):
            if keys and _is_header_pair(value) and self.is_secret_name(value[0]) and not _is_exempt(value[1]):
                return [value[0], REDACTED]
            return [self.redact(v, keys=keys) for v in value]
        return value

    def redact_string(self, text: str) -> str:
        out = self._values.sub(self._value_replacement, text) if _may_hold_value(text) else text
        for pattern in self._extra_values:
            out = pattern.sub(REDACTED, out)
        if "=" in out and ("?" in out or "&" in out):
            out = _QUERY_PARAM.sub(self._query_replacement, out)
        return out

    def _value_replacement(self, match: re.Match[str]) -> str:
        if match.group("bearer") is not None:
            token = match.group("bearer_tok")
            if not _bearer_token_is_secret(token):
                return match.group(0)
            head = match.group(0)[: match.start("bearer_tok") - match.start()]
            return head + REDACTED
        return REDACTED

    def _query_replacement(self, match: re.Match[str]) -> str:
        name = match.group("name")
        value = match.group("value")
        if not value or value == REDACTED or not self.is_secret_name(unquote(name), query=True):
            return match.group(0)
        return f"{match.group('lead')}{name}={REDACTED}"

    def redact_body(self, body: dict[str, Any], *, keys: bool = True) -> dict[str, Any]:
        """Redact an HTTP body (``json``/``text``/``base64``/``sse``); changed JSON text becomes ``json``.

        Any content type containing ``json`` counts (``application/json; charset=utf-8``,
        ``application/vnd.api+json``): matching only ``application/json`` is how vcrpy leaks secrets.
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
            out.update(self._redact_base64_body(body["base64"], ctype, keys))
        elif "base64" in body:
            out["base64"] = self.redact(body["base64"], keys=keys)
        if isinstance(body.get("sse"), list):
            out["sse"] = [self._redact_sse_item(item, keys) for item in body["sse"]]
        elif "sse" in body:
            out["sse"] = self.redact(body["sse"], keys=keys)
        return out

    def _redact_text_body(self, text: str, ctype: str, keys: bool) -> dict[str, Any]:
        if "json" in ctype:
            parsed = _try_json(text)
            if parsed is not _NOT_JSON:
                redacted = self.redact(parsed, keys=keys)
                if redacted != parsed:
                    return {"json": redacted}
                return {"text": text}
        if keys and "x-www-form-urlencoded" in ctype:
            text = _QUERY_PARAM.sub(self._query_replacement, "&" + text)[1:]
        return {"text": self.redact_string(text)}

    def _redact_base64_body(self, data: str, ctype: str, keys: bool) -> dict[str, Any]:
        if not any(t in ctype for t in ("json", "text", "x-www-form-urlencoded", "xml")):
            return {"base64": data}
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return {"base64": data}
        redacted = self._redact_text_body(text, ctype, keys)
        if redacted == {"text": text}:
            return {"base64": data}
        return redacted

    def _redact_sse_item(self, item: Any, keys: bool) -> Any:
        if not isinstance(item, dict) or not isinstance(item.get("data"), str):
            return self.redact(item, keys=keys)
        out = {k: self.redact(v, keys=keys) for k, v in item.items() if k != "data"}
        parsed = _try_json(item["data"])
        if isinstance(parsed, dict | list):
            redacted = self.redact(parsed, keys=keys)
            out["data"] = redacted if redacted != parsed else item["data"]
        else:
            out["data"] = self.redact_string(item["data"])
        return out

    # -- final scan ------------------------------------------------------------------------------

    def find_secrets(self, value: Any, path: str = "", *, keys: bool = True) -> list[str]:
        """JSON paths of everything in ``value`` that :meth:`redact` would still change."""
        found: list[str] = []
        self._scan(value, path, keys, found)
        return found

    def _scan(self, value: Any, path: str, keys: bool, found: list[str]) -> None:
        if isinstance(value, str):
            if self.redact_string(value) != value:
                found.append(path or "$")
            return
        if isinstance(value, dict):
            if _is_body(value):
                redacted = self.redact_body(value, keys=keys)
                if redacted != value:
                    changed = [k for k in _BODY_KINDS if k in value and redacted.get(k) != value[k]]
                    found.extend(_child_path(path, k) for k in changed or ["content_type"])
                return
            for k, v in value.items():
                child = _child_path(path, str(k))
                if isinstance(k, str) and self.redact_string(k) != k:
                    found.append(f"{child} (key)")
                if keys and isinstance(k, str) and self.is_secret_name(k) and not _is_exempt(v):
                    found.append(child)
                else:
                    self._scan(v, child, keys, found)
            return
        if isinstance(value, list):
            if keys and _is_header_pair(value) and self.is_secret_name(value[0]) and not _is_exempt(value[1]):
                found.append(f"{path or '$'}[1]")
                return
            for i, v in enumerate(value):
                self._scan(v, f"{path}[{i}]", keys, found)


_NOT_JSON: Any = object()


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _may_hold_value(text: str) -> bool:
    # Cheap pre-filter: every built-in value pattern needs one of these substrings.
    return any(
        marker in text
        for marker in (
            "sk-",
            "sk_",
            "rk_",
            "AKIA",
            "ASIA",
            "gh",
            "AIza",
            "xox",
            "eyJ",
            "earer",
            "EARER",
            "PRIVATE KEY",
        )
    )


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


_DEFAULT: Redactor | None = None


def default_redactor() -> Redactor:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


def redact(value: Any) -> Any:
    """Redact with the built-in rules only."""
    return default_redactor().redact(value)


def redact_body(body: dict[str, Any]) -> dict[str, Any]:
    return default_redactor().redact_body(body)


def find_secrets(value: Any, redactor: Redactor | None = None, *, path: str = "") -> list[str]:
    """JSON paths of anything still secret-shaped; the last check before a cassette is written."""
    return (redactor or default_redactor()).find_secrets(value, path)


RedactHook = Callable[[dict[str, Any]], dict[str, Any]]
