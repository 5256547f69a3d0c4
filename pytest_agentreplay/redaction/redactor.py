"""The redactor: secrets replaced with ``constants.REDACTED`` in everything that goes into a cassette.

Independent nets, because credentials hide in different places: secret-named keys, headers, query
parameters and multipart parts, URL userinfo, secret-shaped values anywhere (:mod:`.rules`); each through
its *decoded view* (:mod:`.bodies`, :mod:`.encoded`, JSON inside JSON strings). The final scan
(:meth:`Redactor.find_secrets`) is "what :meth:`Redactor.redact` would still change", so it sees those views.
"""

from __future__ import annotations

import functools
import json
import marshal
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar, cast
from urllib.parse import unquote

from ..core.canonical import same_json
from ..core.constants import REDACTED
from ..core.documents import Document
from . import bodies
from .encoded import keep_idempotency_key, redact_encoded
from .known import EnvironmentCredentials, KnownSecrets, header_credentials
from .memory import STRING_MIN_CHARS, Memory, Shared, Sharing
from .rules import (
    BODY_KINDS,
    BUILTIN_VALUE_PATTERNS,
    JSON_PAIR,
    QUERY_PARAM,
    SECRET,
    SECRET_IF_SHAPED,
    URL_REDACTED,
    USERINFO,
    Compiled,
    NameRules,
    bearer_token_is_secret,
    changed_paths,
    compile_rules,
    compiled,
    compiled_on_use,
    dump_like,
    is_body,
    is_exempt,
    is_header_pair,
    is_schema,
    looks_like_credential,
    looks_like_json,
    may_hold_value,
    merge_spans,
    read_options,
    try_json,
)

T = TypeVar("T")
_ABSENT = object()
# A tuple, not ``dict | list``: that union is built anew at every call of the walk.
_CONTAINERS = (dict, list)
_TEXT_OR_CONTAINER = (str, dict, list)
# Decisions (is a name, a header secret?) per name rules.
_DECISIONS: dict[NameRules, tuple[dict[tuple[str, bool], int], dict[str, bool]]] = {}


# Built on first use, once: every test's run makes a redactor of its own.
_builtin_values = compiled_on_use("|".join(f"(?P<{name}>{rx})" for name, rx in BUILTIN_VALUE_PATTERNS))


class Redactor:
    """Replaces secrets in JSON values with ``constants.REDACTED``; configurable per project.

    Results may share containers with the results of earlier calls (``sharing``, :mod:`.memory`): read
    them, place them, serialise them; copy one before handing it to code that may change it.
    """

    def __init__(
        self,
        *,
        extra_headers: Iterable[str] = (),
        extra_keys: Iterable[str] = (),
        extra_key_patterns: Iterable[str | re.Pattern[str]] = (),
        extra_value_patterns: Iterable[str | re.Pattern[str]] = (),
        sharing: Sharing = Sharing.BY_CONTENT_AND_IDENTITY,
        learns: bool = True,
    ) -> None:
        names = (*extra_headers, *extra_keys)
        self._start(compile_rules(names, extra_key_patterns, extra_value_patterns), sharing, learns)

    def _start(self, compiled: Compiled, sharing: Sharing, learns: bool) -> None:
        self._rules, self._extra_values = compiled
        self._memory = Memory(sharing)
        # Whether a name or header is secret depends on the rules alone: shared by redactors of equal rules.
        self._memory.names, self._memory.headers = _DECISIONS.setdefault(self._rules, ({}, {}))
        # Secrets met so far (:mod:`.known`), replaced wherever else they appear. ``default_redactor``, whose
        # callers know nothing of each other, learns nothing: one caller's value would blank another's.
        self.known = KnownSecrets()
        self._learns = learns

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> Redactor:
        """Build from ``[tool.agentreplay]`` ``redact_headers``, ``redact_keys``, ``redact_patterns``."""
        redactor = cls.__new__(cls)
        redactor._start(compiled(read_options(config)), Sharing.BY_CONTENT_AND_IDENTITY, True)
        return redactor

    # -- decisions -------------------------------------------------------------------------------

    def is_secret_name(self, name: str, *, query: bool = False, value: object = None) -> bool:
        """Whether a JSON key or (``query``) URL parameter of this name holds ``value`` as a secret."""
        kind = self._memory.names.get((name, query))
        if kind is None:
            kind = self._kind(name, query)
        return kind == SECRET or (kind == SECRET_IF_SHAPED and looks_like_credential(value))

    def _kind(self, name: str, query: bool) -> int:
        kind = self._rules.secret_kind(name, query)
        self._memory.remember_name((name, query), kind)
        return kind

    def learn(self, value: object) -> None:
        """Take ``value`` (a string, or the strings inside a container) as a secret to replace anywhere."""
        if self._learns and self.known.add(value):
            self._memory.forget_results()

    def learn_environment(
        self, environ: Mapping[str, str], seen: EnvironmentCredentials | None = None
    ) -> None:
        """Learn the environment's credentials; ``seen``: the session's, read again only when it changed."""
        seen = EnvironmentCredentials() if seen is None else seen
        found = seen.read(environ, self._rules, self.is_secret_name)
        if self._learns and not self.known:
            self.known = found.copy()
            if found:
                self._memory.forget_results()
        else:
            self.learn(found.values())

    def is_secret_header(self, name: str) -> bool:
        cached = self._memory.headers.get(name)
        if cached is not None:
            return cached
        result = self._rules.is_secret_header(name)
        self._memory.remember_header(name, result)
        return result

    # -- redaction -------------------------------------------------------------------------------

    def redact(self, value: T, *, keys: bool = True, like: Mapping[str, object] | None = None) -> T:
        """A redacted copy of a JSON value; ``keys=False`` applies only the value-shape rules. A secret learnt
        in one part (a ``password`` field) is replaced in every part, so a second pass runs when one was.

        ``like``: the value as a save wrote it (a recorded event): where the walk meets a value equal to
        ``like``'s, it returns that object, so a replay that repeats it compares by identity."""
        learnt = self.known.count
        out = self._redact(value, keys, like)
        if self.known.count != learnt:
            out = self._redact(value, keys, like)
        return cast(T, out)

    def _redact(self, value: object, keys: bool, like: Mapping[str, object] | None = None) -> object:
        if isinstance(value, str):
            return self.redact_string(value, keys=keys)
        if isinstance(value, dict):
            if is_body(value):
                return self._redact_element(value, keys, body=True)
            return self._redact_object(value, keys, like)
        if isinstance(value, list):
            if (
                keys
                and is_header_pair(value)
                and not is_exempt(value[1])
                and self.is_secret_name(value[0], value=value[1])
            ):
                self.learn(value[1])
                return [value[0], REDACTED]
            return [
                self._redact_element(v, keys) if isinstance(v, _CONTAINERS) else self._redact(v, keys)
                for v in value
            ]
        return value

    def _redact_object(self, value: Document, keys: bool, like: Mapping[str, object] | None) -> object:
        out: Document = {}
        reused = 0
        twins = like or {}
        names = self._memory.names
        for k, v in value.items():
            twin = twins.get(k, _ABSENT)
            if v is twin:  # (never the absent marker: a value is never it)
                out[k] = twin
                reused += 1
                continue
            kind = type(v)
            if (kind is str or kind is int) and v == twin and (type(twin) is kind or same_json(v, twin)):
                out[k] = twin
                reused += 1
                continue
            walked = kind is dict and k != "headers"  # an object walked into (the rest compared as JSON)
            walked = walked and ("content_type" not in v or v.keys().isdisjoint(BODY_KINDS))
            # (``v == twin`` first, never true of the absent marker: a new float costs no call.)
            if not walked and kind is not str and v == twin and same_json(v, twin):
                out[k] = twin
                reused += 1
                continue
            # (A key the recorded value holds too is what the cassette holds.)
            fixed = twin is not _ABSENT or not isinstance(k, str)
            new_key = k if fixed else self.redact_string(k, keys=False)
            secret = False
            if keys and isinstance(k, str):
                decided = names.get((k, False))  # ``is_secret_name``, inlined
                if decided is None:
                    decided = self._kind(k, False)
                secret = decided == SECRET or (decided == SECRET_IF_SHAPED and looks_like_credential(v))
                secret = secret and (walked or not is_exempt(v))  # (an object is never exempt)
            if secret:
                self.learn(v)
                out[new_key] = REDACTED
            elif keys and k == "properties" and isinstance(v, dict) and not is_body(v):
                out[new_key] = self._redact_schema_properties(v)
            elif keys and k == "headers" and isinstance(v, _CONTAINERS):
                out[new_key] = self.redact_headers(v)
            elif kind is str:  # (``_redact``'s first case)
                out[new_key] = text = self.redact_string(v, keys=keys)
                reused += text is twin
            elif not isinstance(v, _TEXT_OR_CONTAINER):  # a number, a bool, None: ``_redact`` returns it
                out[new_key] = v
                reused += v is twin
            else:
                walk: Callable[..., object] = self._redact_object if walked else self._redact
                out[new_key] = new = walk(v, keys, twin if isinstance(twin, dict) else None)
                reused += new is twin
        if like is not None and reused == len(value) == len(like):
            return like
        tool = value.get("tool") if keys else None
        if isinstance(tool, dict) and tool.get("idempotency_key"):  # (none: nothing to keep)
            out = keep_idempotency_key(self, value, out)
        return out

    def _redact_schema_properties(self, properties: Document) -> Document:
        """A JSON Schema's ``properties``: a secret-looking parameter name (``api_key``) keeps the schema
        under it (redacted inside), else a tool listing served back (MCP ``tools/list``) is one its client
        rejects; a value that is no schema is redacted by its name as anywhere."""
        out: Document = {}
        for name, schema in properties.items():
            new_name = self.redact_string(name, keys=False)
            if is_schema(schema) or is_exempt(schema) or not self.is_secret_name(name, value=schema):
                out[new_name] = self._redact(schema, True)
            else:
                self.learn(schema)
                out[new_name] = REDACTED
        return out

    def _redact_element(self, value: object, keys: bool, body: bool = False) -> object:
        """A list element, or (``body``) an HTTP body, looked up when the same object was redacted before."""
        memory = self._memory
        if memory.by_id is not None:
            seen = memory.by_id.get((id(value), keys))
            if seen is not None and seen[0] is value:
                return seen[1]
            learnt = self.known.count
            out = self._redact_whole(value, keys, body)
            if self.known.count == learnt:
                # (One that taught a new secret may hold it in text redacted before: not reused.)
                memory.remember_by_id(value, keys, out)
            return out
        return self._redact_whole(value, keys, body)

    def _redact_whole(self, value: object, keys: bool, body: bool) -> Shared:
        if body:
            return Shared(bodies.redact_body(self, cast(Document, value), keys))
        if self._memory.by_content is not None:
            return self._redact_element_by_content(value, keys)
        return Shared(self._redact(value, keys))

    def _redact_element_by_content(self, value: object, keys: bool) -> Shared:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return Shared(self._redact(value, keys))
        return self._by_content((keys, text), lambda: self._redact(value, keys))

    def _by_content(self, key: tuple[bool, str], redact: Callable[[], object]) -> Shared:
        """The result remembered under ``key``, else ``redact()``'s, remembered unless it taught a secret
        (text redacted before may hold that one)."""
        by_content = self._memory.by_content
        cached = by_content.get(key) if by_content is not None else None
        if cached is not None:
            return cached
        learnt = self.known.count
        out = Shared(redact())
        if self.known.count == learnt:
            self._memory.remember_by_content(key, out)
        return out

    def redact_headers(self, headers: T) -> T:
        """Headers as a mapping or ``[name, value]`` pairs, credential headers redacted; a mapping seen
        before is looked up."""
        if not isinstance(headers, dict) or self._memory.by_content is None:
            return self._redact_headers(headers)
        try:
            key = (True, "headers:" + marshal.dumps(headers, 2).decode("latin-1"))
        except ValueError:
            return self._redact_headers(headers)
        return cast(T, self._by_content(key, lambda: self._redact_headers(headers)))

    def _redact_headers(self, headers: T) -> T:
        if isinstance(headers, dict):
            out: Document = {}
            for name, value in headers.items():
                new_name = self.redact_string(name, keys=False) if isinstance(name, str) else name
                if isinstance(name, str) and self.is_secret_header(name) and not is_exempt(value):
                    self.learn(header_credentials(value))
                    out[new_name] = REDACTED
                else:
                    out[new_name] = self.redact(value)
            return cast(T, out)
        if isinstance(headers, list):
            pairs: list[object] = []
            for pair in headers:
                if is_header_pair(pair) and self.is_secret_header(pair[0]) and not is_exempt(pair[1]):
                    self.learn(header_credentials(pair[1]))
                    pairs.append([pair[0], REDACTED])
                else:
                    pairs.append(self.redact(pair))
            return cast(T, pairs)
        return self.redact(headers)

    def redact_url(self, url: str) -> str:
        """A URL as stored: userinfo and secret query parameters redacted (cheap when there are none)."""
        if "?" in url or "@" in url or "#" in url or "%" in url or may_hold_value(url):
            return self.redact_string(url, keys=False)
        return url

    def redact_string(self, text: str, *, keys: bool = True) -> str:
        if len(text) < STRING_MIN_CHARS:
            return self._redact_string(text, keys)
        cache_key = (text, keys)
        cached = self._memory.strings.get(cache_key)
        if cached is not None:
            return cached
        out = self._redact_string(text, keys)
        self._memory.remember_string(cache_key, out)
        return out

    def _redact_string(self, text: str, keys: bool) -> str:
        out = text
        if keys and ("{" in text or "[" in text) and text != REDACTED and looks_like_json(text):
            # JSON inside a JSON string (an OpenAI tool call's "arguments"): its keys count too.
            parsed = try_json(text)
            if isinstance(parsed, dict | list):
                redacted = self._redact(parsed, True)
                if redacted != parsed:
                    out = dump_like(redacted, text)
        if may_hold_value(out):
            out = _builtin_values().sub(self._value_replacement, out)
        for pattern in self._extra_values:
            out = pattern.sub(REDACTED, out)
        if "@" in out and "://" in out:
            out = USERINFO().sub(self._userinfo_replacement, out)
        if "=" in out and ("?" in out or "&" in out or "#" in out):
            out = QUERY_PARAM.sub(self.query_replacement, out)
        out = redact_encoded(self, out, keys)
        return self.known.replace(out)

    def _value_replacement(self, match: re.Match[str]) -> str:
        if match.group("bearer") is not None:
            token = match.group("bearer_tok")
            if not bearer_token_is_secret(token):
                return match.group(0)
            self.learn(token)
            head = match.group(0)[: match.start("bearer_tok") - match.start()]
            return head + REDACTED
        self.learn(match.group(0))
        return REDACTED

    def _userinfo_replacement(self, match: re.Match[str]) -> str:
        whole = match.group(0)
        _user, _, password = match.group("userinfo").partition(":")
        if password and password != URL_REDACTED:
            self.learn(unquote(password))
        return whole[: match.start("userinfo") - match.start()] + URL_REDACTED + "@"

    def query_replacement(self, match: re.Match[str]) -> str:
        """A matched ``name=value`` parameter, its value redacted if its name is secret."""
        lead, name, value = match.groups()
        if not value or value == REDACTED:
            return match.group(0)
        plain = unquote(value) if "%" in value else value  # (``unquote`` of text without one is it)
        if not self.is_secret_name(unquote(name) if "%" in name else name, query=True, value=plain):
            return match.group(0)
        self.learn(plain)
        return f"{lead}{name}={REDACTED}"

    def secret_spans(self, text: str, *, keys: bool = True) -> list[tuple[int, int]]:
        """Character spans of ``text`` holding secrets, merged and sorted. For text cut anywhere (a joined
        stream), so names are read from ``"name": value`` pairs and ``name=value`` parameters, not parsed."""
        spans: list[tuple[int, int]] = []
        if may_hold_value(text):
            for match in _builtin_values().finditer(text):
                if match.group("bearer") is None:
                    spans.append(match.span())
                elif bearer_token_is_secret(match.group("bearer_tok")):
                    spans.append(match.span("bearer_tok"))
        for pattern in self._extra_values:
            spans.extend(m.span() for m in pattern.finditer(text))
        if "@" in text and "://" in text:
            found = USERINFO().finditer(text)
            spans.extend(m.span("userinfo") for m in found if m["userinfo"] != URL_REDACTED)
        if "=" in text:
            for match in QUERY_PARAM.finditer(text):
                value = match.group("value")
                name = unquote(match.group("name"))
                if (
                    value
                    and value != REDACTED
                    and self.is_secret_name(name, query=True, value=unquote(value))
                ):
                    spans.append(match.span("value"))
        if keys and '"' in text:
            for match in JSON_PAIR().finditer(text):
                group = "str" if match.group("str") is not None else "num"
                value = match.group(group)
                if value and value != REDACTED and self.is_secret_name(match.group("name"), value=value):
                    spans.append(match.span(group))
        spans.extend(self.known.spans(text))
        return merge_spans(spans)

    def redact_body(self, body: Document, *, keys: bool = True) -> Document:
        return cast(Document, self._redact_element(body, keys, body=True))

    # -- final scan ------------------------------------------------------------------------------

    def find_secrets(self, value: object, path: str = "", *, keys: bool = True) -> list[str]:
        """JSON paths of everything in ``value`` that :meth:`redact` would still change."""
        found: list[str] = []
        changed_paths(self, value, self._redact(value, keys), path, found)
        return found


@functools.cache
def default_redactor() -> Redactor:
    """The redactor of the built-in rules, process-wide: it shares no container and learns no secret."""
    return Redactor(sharing=Sharing.NONE, learns=False)


def redact(value: T) -> T:
    """Redact with the built-in rules only."""
    return default_redactor().redact(value)


def redact_body(body: Document) -> Document:
    return default_redactor().redact_body(body)


def find_secrets(value: object, redactor: Redactor | None = None, *, path: str = "") -> list[str]:
    """JSON paths of anything still secret-shaped; the last check before a cassette is written."""
    return (redactor or default_redactor()).find_secrets(value, path)
