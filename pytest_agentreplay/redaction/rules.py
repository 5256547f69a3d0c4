"""What counts as a secret: the names, header words and value shapes redaction looks for, the small pure
helpers every view shares, a project's additions (``[tool.agentreplay]`` ``redact_headers``, ``redact_keys``,
``redact_patterns``: :class:`NameRules`, compiled once per distinct options, since every test's run makes a
redactor of its own), and the final scan's paths (a value compared with its redacted form, so the scan sees
the decoded views redaction saw).

Names are compared after normalisation (:func:`normalize_name`): camelCase -> snake_case, lower case, "-" and
" " -> "_".
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple, Protocol, TypeVar

from ..core.constants import JSON_FORMATS, REDACTED
from ..exceptions import ConfigError

T = TypeVar("T")


class Redacting(Protocol):
    """What the views of :mod:`.bodies` and :mod:`.encoded` ask of a redactor (declared below
    :mod:`.redactor`, so each of those modules imports one way)."""

    def redact(self, value: T, *, keys: bool = True) -> T: ...

    def redact_string(self, text: str, *, keys: bool = True) -> str: ...

    def is_secret_name(self, name: str, *, query: bool = False, value: object = None) -> bool: ...

    def secret_spans(self, text: str, *, keys: bool = True) -> list[tuple[int, int]]: ...

    def query_replacement(self, match: re.Match[str]) -> str: ...


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def compiled_on_use(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """``pattern`` compiled when first asked for, once: a run meets few of the shapes redaction looks into
    (compiling them all at import cost a run that used none of them ~10 M instructions)."""
    return functools.cache(functools.partial(re.compile, pattern, flags))


# Names compared after normalisation: camelCase -> snake_case, lower case, "-" and " " -> "_". A base is a
# secret name alone and as the end of a longer one ("anthropic_api_key", "x_auth_token").
_SECRET_BASES = (
    "authorization",
    "api_key",
    "apikey",
    "cookie",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "private_key",
    "access_key",
    "secret_key",
    "subscription_key",
)
_SECRET_NAMES = frozenset({*_SECRET_BASES, "signing_key", "encryption_key", "master_key"})
_SECRET_SUFFIXES = (*("_" + base for base in _SECRET_BASES), "_session_id", "_sessionid")
# Names that hold a secret only when their value looks like one (:func:`looks_like_credential`): a Jira
# issue's "key" (PROJ-123), an "auth": {"type": "none"} block, a "pwd" that is a folder, an analytics
# "session_id" are data; a 40-character token under "key" (a Google API key in ?key=) is a credential.
_AMBIGUOUS_NAMES = frozenset({"key", "auth", "pwd", "session_id", "sessionid"})
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
_QUERY_ONLY_NAMES = frozenset({"sig", "signature", "x_amz_signature", "x_goog_signature", "code_verifier"})

# How a secret-named field is judged (:meth:`NameRules.secret_kind`).
NOT_SECRET, SECRET_IF_SHAPED, SECRET = 0, 1, 2
_CREDENTIAL_MIN_CHARS = 16


def looks_like_credential(value: object) -> bool:
    """A string shaped like a machine credential: one word of 16 characters or more, mixing letters and
    digits (a token, a key, a signature), not prose and not a short identifier."""
    if not isinstance(value, str) or len(value) < _CREDENTIAL_MIN_CHARS or value == REDACTED:
        return False
    # ``map`` over the str methods: a scan per character class without a Python frame per character.
    return not any(map(str.isspace, value)) and any(map(str.isdigit, value)) and any(map(str.isalpha, value))


_BEARER_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"
BUILTIN_VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
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
QUERY_PARAM = re.compile(r"(?P<lead>[?&;#])(?P<name>[A-Za-z0-9_.\-%\[\]]+)=(?P<value>[^&#;\s\"'<>]*)")
USERINFO = compiled_on_use(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://(?P<userinfo>[^\s/?#@\"'<>\[\]\\]+)@"
)
# Userinfo is replaced without brackets: "http://[REDACTED]@host" would parse as an IPv6 host.
URL_REDACTED = REDACTED.strip("[]")
# A "name": value pair in JSON text that may be cut anywhere (streamed tool-call arguments).
JSON_PAIR = compiled_on_use(
    r'"(?P<name>[A-Za-z0-9_\-. $]{1,64})"\s*:\s*(?:"(?P<str>(?:[^"\\]|\\.)*)"?|(?P<num>-?[0-9][0-9.eE+\-]*))'
)
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
REGEX_META = frozenset("^$*+?()[]{}|\\.")
BODY_KINDS = ("json", "text", "base64", "sse", "multipart")

# A header is a credential when a word of its name says so ("X-Auth-Key", "X-Session-Id", "Cookie")...
_HEADER_MARKERS = ("auth", "key", "token", "secret", "signature", "session", "password", "passwd", "cookie")
# ...except these words (rate-limit counters: "x-ratelimit-remaining-tokens") and any name saying
# "idempotency", which replay and reviewers need readable: idempotency keys match and de-duplicate writes.
_HEADER_WORDS_KEPT = frozenset({"tokens"})
_SECRET_HEADER_NAMES = frozenset({"openai_organization", "openai_project", "anthropic_organization_id"})


def normalize_name(name: str) -> str:
    return _CAMEL.sub("_", name).lower().replace("-", "_").replace(" ", "_")


def is_exempt(value: object) -> bool:
    # Nothing to hide in an absent value, a flag or something already redacted; keeps redaction idempotent.
    return value is None or isinstance(value, bool) or value == "" or value == REDACTED


def bearer_token_is_secret(token: str) -> bool:
    # "the bearer of bad news" is prose; a token has length or machine characters.
    return len(token) >= 20 or any(c.isdigit() or c in "-._~+/=" for c in token)


def looks_like_json(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= 2 and (
        (stripped[0] == "{" and stripped[-1] == "}") or (stripped[0] == "[" and stripped[-1] == "]")
    )


class _NotJson:
    """The value of text that is not JSON (``None`` is JSON's ``null``)."""


NOT_JSON = _NotJson()


def try_json(text: str) -> object:
    try:
        parsed: object = json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON
    return parsed


def dump_like(value: object, original: str) -> str:
    """``value`` serialised as ``original`` was (compact, spaced, indented): only the secret changes."""
    parsed = try_json(original)
    if parsed is not NOT_JSON:
        for kwargs in JSON_FORMATS.values():
            if json.dumps(parsed, **kwargs) == original:
                return json.dumps(value, **kwargs)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# Cheap pre-filter: every built-in value pattern needs one of these substrings (one C-level scan).
_VALUE_HINT = re.compile("sk-|sk_|rk_|AKIA|ASIA|gh|AIza|xox|eyJ|earer|EARER|PRIVATE KEY")


def may_hold_value(text: str) -> bool:
    return _VALUE_HINT.search(text) is not None


def is_body(value: Mapping[str, object]) -> bool:
    return "content_type" in value and not value.keys().isdisjoint(BODY_KINDS)


def is_header_pair(value: list[object]) -> bool:
    # Some clients keep headers as [name, value] pairs to preserve duplicates and order.
    return (
        len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], str)
        and _HEADER_NAME.fullmatch(value[0]) is not None
    )


def compile_option(pattern: str, option: str, flags: int) -> re.Pattern[str]:
    """A ``redact_keys``/``redact_patterns`` regex compiled, or the configuration error naming it."""
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


class NameRules(NamedTuple):
    """The built-in name rules plus a project's additions (``redact_headers``/``redact_keys``)."""

    extra_names: frozenset[str] = frozenset()
    key_patterns: tuple[re.Pattern[str], ...] = ()

    def secret_kind(self, name: str, query: bool) -> int:
        """:data:`SECRET` (any value under the name is one), :data:`SECRET_IF_SHAPED` (only a value that
        looks like a credential) or :data:`NOT_SECRET`. A project's own names are always secret."""
        norm = normalize_name(name)
        if norm in self.extra_names or any(p.fullmatch(name) for p in self.key_patterns):
            return SECRET
        if norm in _NEVER_SECRET:
            return NOT_SECRET
        # The suffixes catch vendor headers: "anthropic-api-key", "x-goog-api-key", "x-auth-token".
        if norm in _SECRET_NAMES or norm.endswith(_SECRET_SUFFIXES) or (query and norm in _QUERY_ONLY_NAMES):
            return SECRET
        return SECRET_IF_SHAPED if norm in _AMBIGUOUS_NAMES else NOT_SECRET

    def is_secret_header(self, name: str) -> bool:
        norm = normalize_name(name)
        if self.secret_kind(name, False) != NOT_SECRET or norm in _SECRET_HEADER_NAMES:
            return True
        if norm in _NEVER_SECRET or "idempotency" in norm:
            return False
        return any(
            word not in _HEADER_WORDS_KEPT and any(marker in word for marker in _HEADER_MARKERS)
            for word in norm.split("_")
        )


# The keywords a JSON Schema (draft 2020-12, and OpenAPI's additions tools use) describes a value with.
_SCHEMA_KEYWORDS = frozenset({
    "type", "description", "title", "format", "default", "examples", "enum", "const", "items",
    "prefixItems", "properties", "required", "additionalProperties", "patternProperties", "anyOf", "oneOf",
    "allOf", "not", "$ref", "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
    "nullable", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "multipleOf",
    "minProperties", "maxProperties", "dependentRequired", "$schema", "$id", "$comment",
})  # fmt: skip


def is_schema(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(key in _SCHEMA_KEYWORDS for key in value)


# -- a project's options ---------------------------------------------------------------------------

_OPTIONS: Final = ("redact_headers", "redact_keys", "redact_patterns")
_SEQUENCES: Final = (list, tuple)


# The three options (headers, keys, patterns), each a list of strings. Plain tuples, not NamedTuples: a
# NamedTuple class is compiled from source when the module is imported, on every start-up.
RedactionOptions = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
# What a redactor's rules are: the name rules, and the patterns of secret values a project adds.
Compiled = tuple[NameRules, tuple[re.Pattern[str], ...]]


def read_options(config: Mapping[str, object]) -> RedactionOptions:
    """The options of a ``[tool.agentreplay]`` table (a string is a list of one)."""
    lists: list[tuple[str, ...]] = []
    for option in _OPTIONS:
        raw = config.get(option, ())
        if isinstance(raw, str):
            raw = (raw,)
        if not isinstance(raw, _SEQUENCES) or not all(isinstance(item, str) for item in raw):
            raise ConfigError(
                f"[tool.agentreplay] {option} must be a list of strings",
                evidence=[f"got: {raw!r}"],
                place=f"[tool.agentreplay] {option}",
                fixes=[f'write it as {option} = ["..."]'],
            )
        lists.append(tuple(raw))
    headers, keys, patterns = lists
    return headers, keys, patterns


def compile_rules(
    names: Iterable[str],
    name_patterns: Iterable[str | re.Pattern[str]],
    value_patterns: Iterable[str | re.Pattern[str]],
) -> Compiled:
    """The rules of secret ``names`` (headers and keys), of names matching ``name_patterns`` (regexes
    matched case-insensitively) and of values matching ``value_patterns``."""
    return (
        NameRules(
            frozenset(normalize_name(n) for n in names),
            tuple(re.compile(p, re.IGNORECASE) if isinstance(p, str) else p for p in name_patterns),
        ),
        tuple(re.compile(p) if isinstance(p, str) else p for p in value_patterns),
    )


@functools.lru_cache(maxsize=64)
def compiled(options: RedactionOptions) -> Compiled:
    """The rules of ``options``, compiled once: a ``redact_keys`` entry with regex metacharacters is a
    case-insensitive full-match regex; an invalid regex is a ``ConfigError`` naming it (not cached: asked
    again, it is raised again)."""
    headers, keys, patterns = options
    return compile_rules(
        (*headers, *[k for k in keys if not (REGEX_META & set(k))]),
        [compile_option(k, "redact_keys", re.I) for k in keys if REGEX_META & set(k)],
        [compile_option(p, "redact_patterns", 0) for p in patterns],
    )


# -- the final scan ----------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_\-$]*")


def changed_paths(redactor: Redacting, value: object, redacted: object, path: str, found: list[str]) -> None:
    if value == redacted:
        return
    if isinstance(value, dict) and isinstance(redacted, dict):
        if is_body(value):
            changed = [k for k in BODY_KINDS if k in value and redacted.get(k) != value[k]]
            found.extend(_child_path(path, k) for k in changed or ["content_type"])
            return
        for k, v in value.items():
            child = _child_path(path, str(k))
            new_key = redactor.redact_string(k, keys=False) if isinstance(k, str) else k
            if new_key != k:
                found.append(f"{child} (key)")
            changed_paths(redactor, v, redacted.get(new_key), child, found)
        return
    if isinstance(value, list) and isinstance(redacted, list) and len(value) == len(redacted):
        if is_header_pair(value) and redacted[1] == REDACTED:
            found.append(f"{path or '$'}[1]")
            return
        for i, (v, r) in enumerate(zip(value, redacted, strict=True)):
            changed_paths(redactor, v, r, f"{path}[{i}]", found)
        return
    found.append(path or "$")


def _child_path(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
