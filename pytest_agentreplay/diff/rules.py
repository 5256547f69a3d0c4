"""Diff rules: which differences between a recorded and a replayed history are ignored, expected or
regressions.

Rule format
===========

A rule has a **selector** ``EVENT:PATH`` and a **verdict**:

- ``EVENT`` is an event type or a glob over event types: ``model.call``, ``tool.*``, ``*``.
- ``PATH`` is a field path glob inside the event (the JSON form of the event): ``data.decision.text``,
  ``tool.name``, ``ts``, ``input_ref.body.json.messages[*].content``, ``**.id``.
  ``.`` separates keys, ``[3]`` is a list index, ``[*]`` any index, ``*`` any part of one key and
  ``**`` any number of keys. ``input_ref`` / ``output_ref`` paths address the *payload* the reference
  points to (e.g. the HTTP request of a model call: ``input_ref.body.json.messages[0].content``).
  Matching is case-insensitive (HTTP header names) and a rule on a path also covers everything below
  it (``data.usage`` covers ``data.usage.total_tokens``).
  Two pseudo paths judge whole events: ``@presence`` (an event only in the recorded history,
  *missing*, or only in the replayed one, *inserted*) and ``@order`` (an event that is in both
  histories but moved relative to the other steps).
  A selector without ``:`` is a path for every event type (``"ts"`` is ``"*:ts"``), unless it names
  event types (``"http"`` is ``"http:**"``).
- ``verdict`` is ``ignore`` (volatile, not reported), ``expected`` (reported, does not fail) or
  ``regression`` (fails the test).

Tolerances (optional) make near-equal values equal; what is still different gets the verdict:

- ``epsilon = 0.01``: numbers whose absolute difference is ``<= epsilon`` are equal;
- ``similarity = 0.9``: texts whose similarity ratio (difflib, over words) is ``>= similarity`` are
  equal;
- ``order_insensitive = true``: lists under the path are compared as multisets. On ``@order`` it makes
  consecutive events of the selected types one order-insensitive group (events sharing the same
  ``data.group`` value always form one);
- ``normalize = ["req_[0-9a-z]+", "\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z?"]``: regular expressions whose matches
  are replaced by a placeholder in both texts before comparing;
- ``presence_only = true``: two present values are equal whatever they hold (secret headers, redacted on
  both sides); only a value present on one side is a difference;
- ``unrecorded = "ignore"``: the verdict for a value the recording does not have at all (a header an
  imported recording never stored); a value the replay lacks keeps the rule's verdict;
- ``modes = ["model-comparison"]``: the rule applies only in these replay modes.

A rule without ``verdict`` takes the verdict of the next matching rule below it (so a project can add
a tolerance without restating the verdict).

In ``pyproject.toml``::

    [tool.agentreplay.rules]
    "model.call:data.decision.text" = "expected"
    "*:**.request_id" = "ignore"
    "retrieval:data.scores" = { epsilon = 0.001 }
    "tool.call:@order" = { order_insensitive = true }
    "model.call:input_ref.body.json.messages[*].content" = { normalize = ["\\d{4}-\\d{2}-\\d{2}"] }

or as an array of tables (``event`` defaults to ``*``)::

    [[tool.agentreplay.rules]]
    event = "model.call"
    path = "data.decision.text"
    verdict = "expected"
    similarity = 0.85
    modes = ["model-comparison"]

The marker takes the same shapes: ``@pytest.mark.agentreplay(rules={"model.call:data.decision.text":
"expected"})`` or a list of rule dicts; the ``pytest_agentreplay_diff_rules`` hook returns the same.

Precedence: per-mode defaults < project config < marker < hook. A matching rule of a later layer wins
over every rule of an earlier layer; within one layer the most specific selector wins (more literal
path keys first, then an exact event type over a glob), and on a tie the rule written last.

Per-mode defaults (``default_rules(mode)``): every mode ignores ``ts``, ``seq``, ``run_id``,
``trace_id``, ``span_id``, ``prev_hash``, ``data.group``, response ids (``data.response_id``,
``output_ref.body.json.id``, ``**.created``, ``system_fingerprint``), latencies and volatile HTTP headers
(``date``, ``request-id``, ``x-request-id``, ``set-cookie``, rate-limit headers...; never
``idempotency-key``); token usage is ``expected``; everything else is a ``regression``. Request headers:
transport headers the HTTP stack or SDK version picks (``TRANSPORT_HEADERS``: ``accept-encoding``,
``user-agent``, ``content-length``, ``connection``, ``x-stainless-*``...) are ignored; secret headers
(``SECRET_REQUEST_HEADERS``) are compared by presence only (``presence_only``) and one the recording lacks
is ignored (``unrecorded``); every other request header (``anthropic-beta``, ``openai-beta``, the agent's
own ``extra_headers``) is ``expected``, except ``idempotency-key``, a regression.
Recordings imported from vcrpy (``default_rules(mode, imported=True)``, for runs labelled
``source: vcr``) additionally expect request-body changes (and the model-call fields derived from the
body: decoding, tools hash, model, streaming) and do not compare headers the recording lacks. Inserted or
missing events are regressions, except ``http`` exchanges (writes also appear as ``effect`` events,
which are regressions) and ``state.update`` checkpoints (the state hashes of matched updates are still
compared), which are ``expected``. Moved events (``@order``) are regressions. ``runtime.values`` (the
clock, uuid, random and ``record_value`` values the run read) are served, not compared: only a different
number of reads (``data.reads``, per source and stream), another random state after the run
(``data.random``) or another set of sources is reported, as ``expected``; a value that changed what the
agent sends fails where it is sent.
``model-comparison`` additionally expects different model wording (``data.decision.text`` with
similarity 0.8), model name (requested and answered), provider URL,
stop reason, streaming flag, request model, raw response payload,
conversation messages (they carry the live model's earlier answers) and state hashes, and ignores
provider tool-call ids; tool calls, their arguments, system prompt, tools and decoding stay
regressions. ``sandbox`` additionally expects tool results and errors, ``http`` and ``retrieval``
responses, effect receipts and the conversation messages that carry them to the model (the services
are fakes). ``audit`` compares nothing.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, cast

from ..core.constants import EVENT_TYPES, REPLAY_MODES
from ..exceptions import ConfigError

Verdict = Literal["ignore", "expected", "regression"]
VERDICTS: Final[tuple[Verdict, ...]] = ("ignore", "expected", "regression")
LAYERS: Final = ("default", "project", "marker", "hook")
RULE_KEYS: Final = (
    "selector",
    "event",
    "path",
    "verdict",
    "epsilon",
    "similarity",
    "order_insensitive",
    "normalize",
    "modes",
    "presence_only",
    "unrecorded",
)
PRESENCE: Final = "@presence"
ORDER: Final = "@order"
PSEUDO_PATHS: Final = (PRESENCE, ORDER)
PLACEHOLDER: Final = "<~>"

# The top-level keys of an event dict: a selector without ':' starting with one of them is a path.
_EVENT_FIELDS: Final = frozenset(
    {
        "run_id", "seq", "ts", "type", "actor", "class", "trace_id", "span_id", "state_hash",
        "policy_version", "tool", "input_ref", "output_ref", "effect", "data", "prev_hash",
    }
)  # fmt: skip
_TOKEN_RE: Final = re.compile(r"\[[^\]]*\]|[^.\[\]]+")
_INDEX_TOKEN_RE: Final = re.compile(r"\[(?:\d+|\*)\]\Z")
_SEP: Final = "\x00"

Path = tuple[str, ...]
"""A field path as tokens: keys, and list indexes written ``[3]``."""


def split_path(path: str) -> Path:
    """``"a.b[0].c"`` -> ``("a", "b", "[0]", "c")``."""
    if path in PSEUDO_PATHS:
        return (path,)
    return tuple(_TOKEN_RE.findall(path))


def join_path(tokens: Iterable[str]) -> str:
    """``("a", "b", "[0]", "c")`` -> ``"a.b[0].c"``."""
    out: list[str] = []
    for tok in tokens:
        if tok.startswith("[") or not out:
            out.append(tok)
        else:
            out.append("." + tok)
    return "".join(out)


def generalize_path(tokens: Iterable[str]) -> str:
    """The display path with every list index replaced by ``[*]`` (for suggesting a rule)."""
    return join_path("[*]" if _INDEX_TOKEN_RE.match(t) else t for t in tokens)


@dataclass(frozen=True)
class Rule:
    """One diff rule. ``source`` is the layer it came from; ``index`` its position in that layer."""

    event: str = "*"
    path: str = "**"
    verdict: Verdict | None = None
    epsilon: float | None = None
    similarity: float | None = None
    order_insensitive: bool = False
    normalize: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    presence_only: bool = False
    unrecorded: Verdict | None = None
    source: str = "hook"
    index: int = 0

    @property
    def selector(self) -> str:
        return f"{self.event}:{self.path}"

    def describe(self) -> str:
        """``project rule "model.call:data.decision.text"``, with its tolerances."""
        extras = []
        if self.epsilon is not None:
            extras.append(f"epsilon={self.epsilon:g}")
        if self.similarity is not None:
            extras.append(f"similarity={self.similarity:g}")
        if self.order_insensitive:
            extras.append("order_insensitive")
        if self.normalize:
            extras.append(f"normalize={len(self.normalize)}")
        if self.presence_only:
            extras.append("presence_only")
        if self.unrecorded is not None:
            extras.append(f"unrecorded={self.unrecorded}")
        tail = f" ({', '.join(extras)})" if extras else ""
        return f'{self.source} rule "{self.selector}"{tail}'

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "selector": self.selector}
        if self.verdict is not None:
            out["verdict"] = self.verdict
        if self.epsilon is not None:
            out["epsilon"] = self.epsilon
        if self.similarity is not None:
            out["similarity"] = self.similarity
        if self.order_insensitive:
            out["order_insensitive"] = True
        if self.normalize:
            out["normalize"] = list(self.normalize)
        if self.modes:
            out["modes"] = list(self.modes)
        if self.presence_only:
            out["presence_only"] = True
        if self.unrecorded is not None:
            out["unrecorded"] = self.unrecorded
        return out


# --------------------------------------------------------------------------------------------- parsing

RuleSpec = Rule | Mapping[str, Any] | Iterable[Any] | None
"""What a layer may be: a shorthand mapping ``{selector: verdict | {options}}``, one rule dict, a
``Rule``, or a list of any of these (nested lists are flattened: pluggy returns one list per plugin)."""


_PLACES: Final = {
    "project": "pyproject.toml [tool.agentreplay.rules]",
    "marker": "@pytest.mark.agentreplay(rules=...)",
    "hook": "a pytest_agentreplay_diff_rules hook",
    "default": "the built-in default rules",
}


def _config_error(name: str, source: str, problem: str, *, fixes: Iterable[str] = ()) -> ConfigError:
    return ConfigError(
        f"invalid agentreplay diff rule {name} ({source}): {problem}",
        evidence=(
            f"valid verdicts: {', '.join(VERDICTS)}",
            f"valid keys: {', '.join(RULE_KEYS)}",
            f"valid modes: {', '.join(REPLAY_MODES)}",
        ),
        place=_PLACES.get(source, f"{source} rules"),
        fixes=tuple(fixes)
        or (
            'write it as "EVENT:PATH" = "VERDICT", e.g. "model.call:data.decision.text" = "expected"',
            'or as a table: "retrieval:data.scores" = { verdict = "expected", epsilon = 0.01 }',
        ),
    )


def _looks_like_single_rule(spec: Mapping[str, Any]) -> bool:
    keys = set(spec)
    return bool(keys) and keys <= set(RULE_KEYS) and bool(keys & {"path", "selector", "event"})


def _split_selector(selector: str, name: str, source: str) -> tuple[str, str]:
    selector = selector.strip()
    if not selector:
        raise _config_error(name, source, "empty selector")
    if ":" in selector:
        event, path = selector.split(":", 1)
        return event.strip() or "*", path.strip()
    first = _TOKEN_RE.findall(selector)[:1]
    if (
        not selector.startswith("@")
        and first
        and first[0] not in _EVENT_FIELDS
        and selector != "*"
        and any(fnmatch.fnmatchcase(t, selector) for t in EVENT_TYPES)
    ):
        return selector, "**"
    return "*", selector


def _number(value: Any, key: str, name: str, source: str, *, low: float, high: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _config_error(name, source, f"{key} must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise _config_error(name, source, f"{key} must be {bound}, got {value!r}")
    return float(value)


def _validate_path(path: str, name: str, source: str) -> None:
    if not path:
        raise _config_error(name, source, "empty field path")
    if path.startswith("@"):
        if path not in PSEUDO_PATHS:
            raise _config_error(
                name, source, f"unknown pseudo path {path!r}; use one of {', '.join(PSEUDO_PATHS)}"
            )
        return
    if "".join(_TOKEN_RE.findall(path)) != path.replace(".", ""):
        raise _config_error(name, source, f"malformed field path {path!r}")
    for tok in _TOKEN_RE.findall(path):
        if tok.startswith("[") and not _INDEX_TOKEN_RE.match(tok):
            raise _config_error(name, source, f"list index {tok!r} must be [N] or [*] in path {path!r}")
    if ".." in path or path.startswith(".") or path.endswith("."):
        raise _config_error(name, source, f"malformed field path {path!r}")


def parse_rule(spec: Mapping[str, Any], *, source: str, index: int = 0, name: str | None = None) -> Rule:
    """Parse one rule dict (``selector`` or ``event``/``path`` plus options) into a ``Rule``."""
    name = name or (repr(spec.get("selector")) if "selector" in spec else f"#{index + 1} {dict(spec)!r}")
    unknown = sorted(str(k) for k in spec if k not in RULE_KEYS and k != "mode")
    if unknown:
        raise _config_error(name, source, f"unknown key(s) {', '.join(map(repr, unknown))}")
    if "selector" in spec and ("event" in spec or "path" in spec):
        raise _config_error(name, source, "give either selector or event/path, not both")
    if "selector" in spec:
        if not isinstance(spec["selector"], str):
            raise _config_error(name, source, "selector must be a string")
        event, path = _split_selector(spec["selector"], name, source)
    else:
        event = spec.get("event", "*")
        path = spec.get("path", "**")
        if not isinstance(event, str) or not isinstance(path, str):
            raise _config_error(name, source, "event and path must be strings")
        event, path = event.strip() or "*", path.strip()
    if not any(fnmatch.fnmatchcase(t, event) for t in EVENT_TYPES):
        raise _config_error(
            name, source, f"event {event!r} matches no event type (known: {', '.join(EVENT_TYPES)})"
        )
    _validate_path(path, name, source)

    verdict = spec.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise _config_error(name, source, f"unknown verdict {verdict!r}")
    epsilon = similarity = None
    if spec.get("epsilon") is not None:
        epsilon = _number(spec["epsilon"], "epsilon", name, source, low=0.0, high=None)
    if spec.get("similarity") is not None:
        similarity = _number(spec["similarity"], "similarity", name, source, low=0.0, high=1.0)
    order_insensitive = spec.get("order_insensitive", False)
    if not isinstance(order_insensitive, bool):
        raise _config_error(
            name, source, f"order_insensitive must be true or false, got {order_insensitive!r}"
        )
    raw_norm = spec.get("normalize", ())
    if isinstance(raw_norm, str):
        raw_norm = (raw_norm,)
    if not isinstance(raw_norm, list | tuple) or not all(isinstance(p, str) for p in raw_norm):
        raise _config_error(name, source, "normalize must be a regular expression or a list of them")
    for pattern in raw_norm:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _config_error(name, source, f"normalize pattern {pattern!r} is invalid: {exc}") from None
    if "mode" in spec and "modes" in spec:
        raise _config_error(name, source, "give either mode or modes, not both")
    raw_modes = spec.get("modes", spec.get("mode", ()))
    if isinstance(raw_modes, str):
        raw_modes = (raw_modes,)
    if not isinstance(raw_modes, list | tuple) or any(m not in REPLAY_MODES for m in raw_modes):
        raise _config_error(name, source, f"modes must be a list of replay modes, got {raw_modes!r}")
    presence_only = spec.get("presence_only", False)
    if not isinstance(presence_only, bool):
        raise _config_error(name, source, f"presence_only must be true or false, got {presence_only!r}")
    unrecorded = spec.get("unrecorded")
    if unrecorded is not None and unrecorded not in VERDICTS:
        raise _config_error(name, source, f"unknown verdict {unrecorded!r} for unrecorded")
    if (
        verdict is None
        and epsilon is None
        and similarity is None
        and not order_insensitive
        and not raw_norm
        and not presence_only
        and unrecorded is None
    ):
        raise _config_error(name, source, "the rule has neither a verdict nor a tolerance")
    return Rule(
        event=event,
        path=path,
        verdict=cast("Verdict | None", verdict),
        epsilon=epsilon,
        similarity=similarity,
        order_insensitive=order_insensitive,
        normalize=tuple(raw_norm),
        modes=tuple(raw_modes),
        presence_only=presence_only,
        unrecorded=cast("Verdict | None", unrecorded),
        source=source,
        index=index,
    )


def parse_rules(spec: RuleSpec, *, source: str) -> list[Rule]:
    """Parse one layer (see ``RuleSpec``) into rules, in order. Raises ``ConfigError`` naming the rule."""
    out: list[Rule] = []

    def add(item: Any, name_hint: str | None = None) -> None:
        if item is None:
            return
        if isinstance(item, Rule):
            out.append(replace(item, source=source, index=len(out)))
        elif isinstance(item, Mapping):
            if _looks_like_single_rule(item):
                out.append(parse_rule(item, source=source, index=len(out), name=name_hint))
                return
            for selector, value in item.items():
                name = repr(selector)
                if not isinstance(selector, str):
                    raise _config_error(name, source, "a selector must be a string")
                if isinstance(value, str):
                    rule_dict: dict[str, Any] = {"selector": selector, "verdict": value}
                elif isinstance(value, Mapping):
                    if "selector" in value or "event" in value or "path" in value:
                        raise _config_error(name, source, "the selector is the key; drop event/path/selector")
                    rule_dict = {"selector": selector, **value}
                else:
                    raise _config_error(
                        name, source, f"value must be a verdict or a table of options, got {value!r}"
                    )
                out.append(parse_rule(rule_dict, source=source, index=len(out), name=name))
        elif isinstance(item, str | bytes):
            raise _config_error(repr(item), source, "a rule must be a table/dict, not a bare string")
        elif isinstance(item, Iterable):
            for sub in item:
                add(sub)
        else:
            raise _config_error(repr(item), source, f"a rule must be a table/dict, got {type(item).__name__}")

    add(spec)
    return out


# -------------------------------------------------------------------------------------------- defaults

VOLATILE_HEADERS: Final = (
    "date", "request-id", "x-request-id", "set-cookie", "cookie", "cf-ray", "cf-cache-status", "age",
    "server-timing", "traceparent", "tracestate", "user-agent", "content-length", "openai-processing-ms",
    "openai-organization", "openai-project", "openai-version", "x-stainless-*", "x-ratelimit-*",
    "anthropic-ratelimit-*", "retry-after", "x-envoy-upstream-service-time", "via", "x-amzn-*",
    "alt-svc", "strict-transport-security", "etag", "last-modified", "expires",
)  # fmt: skip

# Request headers the HTTP stack or the SDK version chooses (compression, framing, client versions):
# they say nothing about the agent, so they never drift.
TRANSPORT_HEADERS: Final = (
    "accept", "accept-encoding", "user-agent", "content-length", "connection", "keep-alive", "host", "te",
    "expect", "transfer-encoding", "content-encoding", "x-stainless-*", "x-goog-api-client",
    "x-goog-request-params", "traceparent", "tracestate", "baggage", "sentry-trace", "x-request-id",
    "request-id", "x-client-request-id",
)  # fmt: skip
# Credentials: redacted on every write, so only their presence is compared; a header the recording
# lacks (vcrpy's filter_headers removed it) is not compared at all.
SECRET_REQUEST_HEADERS: Final = (
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
    "openai-organization", "openai-project", "anthropic-organization-id",
)  # fmt: skip
# Labels (``RunMeta.labels["source"]``) of recordings made by another tool, replayed with its leniency.
IMPORTED_SOURCES: Final = frozenset({"vcr"})


def is_imported(labels: Mapping[str, Any] | None) -> bool:
    """Whether a cassette's run labels say it was imported (``agentreplay import-vcr``)."""
    return bool(labels) and str((labels or {}).get("source")) in IMPORTED_SOURCES


_COMMON: Final[tuple[tuple[str, str | dict[str, Any]], ...]] = (
    ("*:**", "regression"),
    ("*:@presence", "regression"),
    ("*:@order", "regression"),
    ("http:@presence", "expected"),
    ("state.update:@presence", "expected"),
    # Runtime values (clock, uuid, random, record_value) are inputs served back, not compared; how many the
    # run drew is reported, never failing: what the values change shows in the decisions that use them.
    ("runtime.values:**", "ignore"),
    ("runtime.values:@presence", "expected"),
    ("runtime.values:data.reads", "expected"),
    ("runtime.values:data.random", "expected"),
    ("runtime.values:data.sources", "expected"),
    ("*:ts", "ignore"),
    ("*:seq", "ignore"),
    ("*:run_id", "ignore"),
    ("*:trace_id", "ignore"),
    ("*:span_id", "ignore"),
    ("*:prev_hash", "ignore"),
    ("*:data.group", "ignore"),
    ("*:data.response_id", "ignore"),
    ("*:output_ref.body.json.id", "ignore"),
    ("*:output_ref.body.json.system_fingerprint", "ignore"),
    ("*:**.created", "ignore"),
    ("*:data.latency_ms", "ignore"),
    ("*:**.latency_ms", "ignore"),
    ("*:**.duration_ms", "ignore"),
    # When each streamed event arrived: timing, not behaviour.
    ("*:output_ref.body.sse[*].t", "ignore"),
    # The whole-body hash duplicates input_ref, which is compared field by field (and JSON-aware).
    ("model.call:data.request_hash", "ignore"),
    ("*:data.usage", "expected"),
    ("*:output_ref.body.json.usage", "expected"),
    # Request headers: what the agent chose (provider beta / feature flags such as anthropic-beta or
    # openai-beta, its own extra_headers) is reported, never failing; the environment's are ignored.
    ("*:input_ref.headers", "expected"),
    *((f"*:**.headers.{h}", "ignore") for h in VOLATILE_HEADERS),
    *((f"*:input_ref.headers.{h}", "ignore") for h in TRANSPORT_HEADERS),
    *(
        (f"*:input_ref.headers.{h}", {"verdict": "expected", "presence_only": True, "unrecorded": "ignore"})
        for h in SECRET_REQUEST_HEADERS
    ),
    # A write's idempotency key is behaviour (pitfall: tools that drop it as noise).
    ("*:input_ref.headers.idempotency-key", "regression"),
)
# Recordings imported from vcrpy / pytest-recording: vcrpy never compared request bodies and kept
# whatever headers its filters left, so body changes are reported (not failing) and headers the recording
# lacks are not compared. This plugin's own recordings keep the strict comparison.
_IMPORTED: Final[tuple[tuple[str, str | dict[str, Any]], ...]] = (
    ("*:input_ref.body", "expected"),
    ("model.call:data.decoding", "expected"),
    ("model.call:data.tools_hash", "expected"),
    ("model.call:data.model", "expected"),
    ("model.call:data.streamed", "expected"),
    ("*:input_ref.headers", {"unrecorded": "ignore"}),
    ("*:input_ref.headers.idempotency-key", {"verdict": "regression", "unrecorded": "ignore"}),
)
_MODE_DEFAULTS: Final[dict[str, tuple[tuple[str, str | dict[str, Any]], ...]]] = {
    "regression": (),
    "model-comparison": (
        ("model.call:data.decision.text", {"verdict": "expected", "similarity": 0.8}),
        ("model.call:data.decision.stop_reason", "expected"),
        ("model.call:data.decision.tool_calls[*].id", "ignore"),
        ("model.call:data.model", "expected"),
        ("model.call:data.response_model", "expected"),
        # Another provider (or another deployment of it) answers at another address.
        ("model.call:input_ref.url", "expected"),
        ("model.call:input_ref.headers.host", "expected"),
        ("model.call:data.streamed", "expected"),
        ("model.call:input_ref.body.json.model", "expected"),
        ("model.call:input_ref.body.json.messages", "expected"),
        ("model.call:output_ref", "expected"),
        ("*:**.tool_call_id", "ignore"),
        ("*:**.tool_use_id", "ignore"),
        ("model.call:input_ref.body.json.messages[*].tool_calls[*].id", "ignore"),
        ("state.update:state_hash", "expected"),
    ),
    "sandbox": (
        # The conversation carries the fake services' results back to the (served) model.
        ("model.call:input_ref.body.json.messages", "expected"),
        ("tool.result:data.result", "expected"),
        ("tool.result:data.error", "expected"),
        ("tool.result:output_ref", "expected"),
        ("http:output_ref", "expected"),
        ("http:data.status", "expected"),
        ("retrieval:output_ref", "expected"),
        ("effect:effect.receipt", "expected"),
    ),
    "audit": (),
}


def default_rules(mode: str, *, imported: bool = False) -> list[Rule]:
    """The per-mode default rules (layer ``default``); ``imported`` adds the leniency of recordings
    imported from vcrpy (see :func:`is_imported`)."""
    _check_mode(mode)
    table: dict[str, Any] = {}
    specs = [*_COMMON, *_MODE_DEFAULTS[mode], *(_IMPORTED if imported else ())]
    rules = []
    for n, (selector, value) in enumerate(specs):
        table = {selector: value}
        (rule,) = parse_rules(table, source="default")
        rules.append(replace(rule, index=n))
    return rules


def _check_mode(mode: str) -> None:
    if mode not in REPLAY_MODES:
        raise ConfigError(
            f"unknown agentreplay mode {mode!r}",
            evidence=(f"valid modes: {', '.join(REPLAY_MODES)}",),
            fixes=("pass --agentreplay-mode with one of the valid modes",),
        )


# ---------------------------------------------------------------------------------------------- match


def _path_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob to a regex over ``SEP``-terminated tokens; prefix match covers descendants."""
    parts: list[str] = []
    for tok in split_path(pattern):
        if tok == "**":
            parts.append(f"(?:[^{_SEP}]*{_SEP})*")
        elif tok == "[*]":
            parts.append(rf"\[\d+\]{_SEP}")
        elif "*" in tok:
            parts.append(f"[^{_SEP}]*".join(re.escape(p) for p in tok.split("*")) + _SEP)
        else:
            parts.append(re.escape(tok) + _SEP)
    return re.compile("".join(parts), re.IGNORECASE)


def _path_specificity(pattern: str) -> tuple[int, int, int]:
    toks = split_path(pattern)
    literal = sum(1 for t in toks if "*" not in t)
    partial = sum(1 for t in toks if "*" in t and t not in ("*", "**", "[*]"))
    single = sum(1 for t in toks if t in ("*", "[*]"))
    return (literal, partial, single)


def _type_specificity(pattern: str) -> int:
    if "*" not in pattern and "?" not in pattern and "[" not in pattern:
        return 2
    return 0 if pattern == "*" else 1


@dataclass(frozen=True)
class _Compiled:
    rule: Rule
    regex: re.Pattern[str]
    pseudo: bool
    key: tuple[Any, ...]


@dataclass(frozen=True)
class Judgement:
    """What the rules say about one (event type, path): the verdict, the rule whose tolerances apply,
    and the rule that gave the verdict (differs when the winning rule has no verdict of its own)."""

    verdict: Verdict
    rule: Rule
    verdict_rule: Rule
    normalizers: tuple[re.Pattern[str], ...] = field(default=(), compare=False)
    # The verdict for a value absent from the recording, when a rule down to the verdict's one says.
    unrecorded: Verdict | None = None

    def normalize(self, text: str) -> str:
        for regex in self.normalizers:
            text = regex.sub(PLACEHOLDER, text)
        return text


class RuleSet:
    """Layered rules for one replay mode; ``judge`` answers per (event type, path), cached."""

    def __init__(self, mode: str, rules: Iterable[Rule]) -> None:
        _check_mode(mode)
        self.mode = mode
        self.rules: tuple[Rule, ...] = tuple(r for r in rules if not r.modes or mode in r.modes)
        self._compiled: list[_Compiled] = []
        for rule in self.rules:
            rank = LAYERS.index(rule.source) if rule.source in LAYERS else len(LAYERS)
            key = (rank, _path_specificity(rule.path), _type_specificity(rule.event), rule.index)
            self._compiled.append(_Compiled(rule, _path_regex(rule.path), rule.path.startswith("@"), key))
        self._compiled.sort(key=lambda c: c.key, reverse=True)
        self._by_type: dict[str, list[_Compiled]] = {}
        self._cache: dict[tuple[str, Path], Judgement] = {}
        self._regex_cache: dict[str, re.Pattern[str]] = {}

    # construction -------------------------------------------------------------------------------
    @classmethod
    def defaults(cls, mode: str = "regression", *, imported: bool = False) -> RuleSet:
        return cls(mode, default_rules(mode, imported=imported))

    @classmethod
    def from_layers(
        cls,
        mode: str = "regression",
        *,
        project: RuleSpec = None,
        marker: RuleSpec = None,
        hook: RuleSpec = None,
        imported: bool = False,
    ) -> RuleSet:
        """Defaults of ``mode`` < ``project`` (``[tool.agentreplay.rules]``) < ``marker`` (``rules=``) <
        ``hook`` (results of ``pytest_agentreplay_diff_rules``). Raises ``ConfigError`` on a bad rule.
        ``imported``: the recording came from vcrpy (``is_imported(cassette.run.labels)``)."""
        rules = default_rules(mode, imported=imported)
        rules += parse_rules(project, source="project")
        rules += parse_rules(marker, source="marker")
        rules += parse_rules(hook, source="hook")
        return cls(mode, rules)

    def with_rules(self, spec: RuleSpec, *, source: str = "hook") -> RuleSet:
        """A new rule set with ``spec`` added as layer ``source``."""
        if source not in LAYERS:
            raise ValueError(f"unknown rule layer {source!r}; use one of {LAYERS}")
        return RuleSet(self.mode, [*self.rules, *parse_rules(spec, source=source)])

    # queries ----------------------------------------------------------------------------------------
    @property
    def compares(self) -> bool:
        """False in audit mode: nothing is compared."""
        return self.mode != "audit"

    def _candidates(self, event_type: str) -> list[_Compiled]:
        found = self._by_type.get(event_type)
        if found is None:
            found = [c for c in self._compiled if fnmatch.fnmatchcase(event_type, c.rule.event)]
            self._by_type[event_type] = found
        return found

    def judge(self, event_type: str, path: Path | str) -> Judgement:
        tokens = split_path(path) if isinstance(path, str) else path
        cache_key = (event_type, tokens)
        found = self._cache.get(cache_key)
        if found is not None:
            return found
        pseudo = len(tokens) == 1 and tokens[0] in PSEUDO_PATHS
        subject = _SEP.join(tokens) + _SEP
        winner: Rule | None = None
        verdict_rule: Rule | None = None
        unrecorded: Verdict | None = None
        for comp in self._candidates(event_type):
            if comp.pseudo != pseudo or not comp.regex.match(subject):
                continue
            if winner is None:
                winner = comp.rule
            if unrecorded is None:
                unrecorded = comp.rule.unrecorded
            if comp.rule.verdict is not None:
                verdict_rule = comp.rule
                break
        if winner is None or verdict_rule is None:  # only without the default catch-alls
            fallback = Rule(source="default", verdict="regression", path=tokens[0] if pseudo else "**")
            winner = winner or fallback
            verdict_rule = verdict_rule or fallback
        assert verdict_rule.verdict is not None
        normalizers = tuple(self._regex(p) for p in winner.normalize)
        found = Judgement(verdict_rule.verdict, winner, verdict_rule, normalizers, unrecorded)
        self._cache[cache_key] = found
        return found

    def _regex(self, pattern: str) -> re.Pattern[str]:
        regex = self._regex_cache.get(pattern)
        if regex is None:
            regex = self._regex_cache[pattern] = re.compile(pattern)
        return regex

    def order_insensitive_types(self, types: Iterable[str] = EVENT_TYPES) -> frozenset[str]:
        """Event types whose consecutive runs form order-insensitive groups (``TYPE:@order`` rules)."""
        return frozenset(t for t in types if self.judge(t, (ORDER,)).rule.order_insensitive)

    def __repr__(self) -> str:
        return f"RuleSet(mode={self.mode!r}, rules={len(self.rules)})"
