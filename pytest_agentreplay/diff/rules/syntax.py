"""The rule syntax: the field-path grammar, and selectors and rule dicts parsed and validated into rules.

What is valid is specified in docs/rules.md (Rule format); a bad rule raises ``ConfigError`` naming it and
its layer.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from ...core.constants import EVENT_TYPES, REPLAY_MODES
from ...exceptions import ConfigError
from .rule import VERDICTS, Rule, Verdict

# ------------------------------------------------------------------------------------------ path grammar

PRESENCE: Final = "@presence"
ORDER: Final = "@order"
# A model call's tokens, cost and latency, for model-comparison's ``max_increase`` rules.
BUDGETS: Final = ("@usage", "@cost", "@latency")
PSEUDO_PATHS: Final = (PRESENCE, ORDER, *BUDGETS)

_TOKEN_RE: Final = re.compile(r"\[[^\]]*\]|[^.\[\]]+")
_INDEX_TOKEN_RE: Final = re.compile(r"\[(?:\d+|\*)\]\Z")
# What a key token of a rule's path cannot hold: the path's own separators, and the selector's.
_UNSPELLABLE: Final = re.compile(r"[.\[\]:]")

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


def generalize_path(tokens: Iterable[str], *, keep_indexes: bool = False) -> str:
    """The path of a rule suggested for ``tokens``: every list index ``[*]`` (unless ``keep_indexes``), and a
    key holding what a path cannot spell (``.``, ``[``, ``]``, ``:``; an empty key) matched by ``*`` there."""
    return join_path(
        ("[*]" if not keep_indexes else t) if _INDEX_TOKEN_RE.match(t) else (_UNSPELLABLE.sub("*", t) or "*")
        for t in tokens
    )


# --------------------------------------------------------------------------------------------- parsing

# The keys a rule dict may have (``mode`` is accepted as an alias of ``modes``): a rule's own fields but
# its layer and place in it, which parsing assigns.
RULE_KEYS: Final = ("selector", *(name for name in Rule._fields if name not in ("source", "index")))
# The top-level keys of an event dict: a selector without ':' starting with one of them is a path.
_EVENT_FIELDS: Final = frozenset(
    {
        "run_id", "seq", "ts", "type", "actor", "class", "trace_id", "span_id", "state_hash",
        "policy_version", "tool", "input_ref", "output_ref", "effect", "data", "prev_hash",
    }
)  # fmt: skip

RuleSpec = Rule | Mapping[str, object] | Iterable[object] | None
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


# The ``ConfigError`` of one rule's problem (the rule and its layer named): what the checks below raise.
Fail = Callable[..., ConfigError]


def _split_selector(selector: str, fail: Fail) -> tuple[str, str]:
    selector = selector.strip()
    if not selector:
        raise fail("empty selector")
    if ":" in selector:
        event, path = (part.strip() for part in selector.split(":", 1))
        if not event:
            fix = 'name the event type, or "*" for every one: "*:data.request_id" = "ignore"'
            raise fail("empty event type before ':'", fixes=(fix,))
        return event, path
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


def _number(
    spec: Mapping[str, object], key: str, fail: Fail, *, low: float, high: float | None
) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(f"{key} must be a number, got {value!r}")
    # NaN compares false with every bound: an epsilon of NaN tolerated nothing, a similarity of NaN nothing.
    if value != value or value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise fail(f"{key} must be {bound}, got {value!r}")
    return float(value)


def _flag(spec: Mapping[str, object], key: str, fail: Fail) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise fail(f"{key} must be true or false, got {value!r}")
    return value


def _verdict(spec: Mapping[str, object], key: str, fail: Fail, what: str = "") -> Verdict | None:
    value = spec.get(key)
    if value is not None and value not in VERDICTS:
        raise fail(f"unknown verdict {value!r}{what}")
    return value


def _validate_path(path: str, fail: Fail) -> None:
    if not path:
        raise fail("empty field path")
    if ":" in path:
        # One ':' separates EVENT from PATH; a second one is a typo ("model.call::data", "::::").
        raise fail(f"malformed field path {path!r}: a selector is EVENT:PATH, one ':'")
    if path.startswith("@"):
        if path not in PSEUDO_PATHS:
            raise fail(f"unknown pseudo path {path!r}; use one of {', '.join(PSEUDO_PATHS)}")
        return
    tokens = _TOKEN_RE.findall(path)
    if "".join(tokens) != path.replace(".", "") or ".." in path or path.startswith(".") or path.endswith("."):
        raise fail(f"malformed field path {path!r}")
    for tok in tokens:
        if tok.startswith("[") and not _INDEX_TOKEN_RE.match(tok):
            raise fail(f"list index {tok!r} must be [N] or [*] in path {path!r}")


def parse_rule(spec: Mapping[str, object], *, source: str, index: int = 0, name: str | None = None) -> Rule:
    """Parse one rule dict (``selector`` or ``event``/``path`` plus options) into a ``Rule``."""
    name = name or (repr(spec.get("selector")) if "selector" in spec else f"#{index + 1} {dict(spec)!r}")
    fail: Fail = functools.partial(_config_error, name, source)
    unknown = sorted(str(k) for k in spec if k not in RULE_KEYS and k != "mode")
    if unknown:
        raise fail(f"unknown key(s) {', '.join(map(repr, unknown))}")
    if "selector" in spec and ("event" in spec or "path" in spec):
        raise fail("give either selector or event/path, not both")
    if "selector" in spec:
        if not isinstance(spec["selector"], str):
            raise fail("selector must be a string")
        event, path = _split_selector(spec["selector"], fail)
    else:
        raw_event, raw_path = spec.get("event", "*"), spec.get("path", "**")
        if not isinstance(raw_event, str) or not isinstance(raw_path, str):
            raise fail("event and path must be strings")
        event, path = raw_event.strip(), raw_path.strip()
        if not event:
            raise fail('empty event type; leave event out or write "*" for every one')
    if not any(fnmatch.fnmatchcase(t, event) for t in EVENT_TYPES):
        raise fail(f"event {event!r} matches no event type (known: {', '.join(EVENT_TYPES)})")
    _validate_path(path, fail)

    rule = Rule(
        event=event,
        path=path,
        verdict=_verdict(spec, "verdict", fail),
        epsilon=_number(spec, "epsilon", fail, low=0.0, high=None),
        similarity=_number(spec, "similarity", fail, low=0.0, high=1.0),
        order_insensitive=_flag(spec, "order_insensitive", fail),
        normalize=_patterns(spec.get("normalize", ()), fail),
        modes=_modes(spec, fail),
        presence_only=_flag(spec, "presence_only", fail),
        unrecorded=_verdict(spec, "unrecorded", fail, " for unrecorded"),
        judge=_judge(spec.get("judge"), fail),
        max_increase=_increase(spec.get("max_increase"), fail),
        source=source,
        index=index,
    )
    # ``modes`` only says where the rule applies: it is neither a verdict nor a tolerance.
    tolerances = (rule.verdict, rule.epsilon, rule.similarity, rule.unrecorded, rule.judge, rule.max_increase)
    flags = rule.order_insensitive or rule.normalize or rule.presence_only
    if all(v is None for v in tolerances) and not flags:
        raise fail("the rule has neither a verdict nor a tolerance")
    return rule


def _patterns(raw: object, fail: Fail) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = (raw,)
    if not isinstance(raw, list | tuple) or not all(isinstance(p, str) for p in raw):
        raise fail("normalize must be a regular expression or a list of them")
    for pattern in raw:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise fail(f"normalize pattern {pattern!r} is invalid: {exc}") from None
    return tuple(raw)


def _modes(spec: Mapping[str, object], fail: Fail) -> tuple[str, ...]:
    if "mode" in spec and "modes" in spec:
        raise fail("give either mode or modes, not both")
    raw = spec.get("modes", spec.get("mode", ()))
    if isinstance(raw, str):
        raw = (raw,)
    if not isinstance(raw, list | tuple) or any(m not in REPLAY_MODES for m in raw):
        raise fail(f"modes must be a list of replay modes, got {raw!r}")
    return tuple(raw)


def _judge(value: object, fail: Fail) -> tuple[str, str] | None:
    """``judge = {rubric = "...", model = "..."}``: model-comparison asks that model whether the live value
    passes the rubric against the recorded one."""
    if value is None:
        return None
    if (
        not isinstance(value, Mapping)
        or set(value) != {"rubric", "model"}
        or not all(isinstance(v, str) and v.strip() for v in value.values())
    ):
        problem = f"judge must be a table of rubric and model (non-empty strings), got {value!r}"
        fix = 'write judge = { rubric = "same refund amount and order", model = "gpt-4o-mini" }'
        raise fail(problem, fixes=(fix,))
    return (str(value["rubric"]), str(value["model"]))


def _increase(value: object, fail: Fail) -> float | None:
    """``max_increase = "25%"`` (or 0.25): how much more a live call may use than the recorded one."""
    if value is None:
        return None
    number: object = value
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            number = float(value.strip()[:-1]) / 100
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int | float) or not number >= 0:  # NaN too
        raise fail(f'max_increase must be a share such as "25%" or 0.25, got {value!r}')
    return float(number)


def parse_entry(selector: object, value: object, *, source: str, index: int) -> Rule:
    """The rule of one entry of a selector table: ``selector = "VERDICT"`` or ``selector = {options}``."""
    name = repr(selector)
    if not isinstance(selector, str):
        raise _config_error(name, source, "a selector must be a string")
    if isinstance(value, str):
        rule_dict: dict[str, object] = {"selector": selector, "verdict": value}
    elif isinstance(value, Mapping):
        if "selector" in value or "event" in value or "path" in value:
            raise _config_error(name, source, "the selector is the key; drop event/path/selector")
        rule_dict = {"selector": selector, **value}
    else:
        raise _config_error(name, source, f"value must be a verdict or a table of options, got {value!r}")
    return parse_rule(rule_dict, source=source, index=index, name=name)


def _add_rules(item: object, out: list[Rule], source: str) -> None:
    """Append the rules of ``item`` (a rule, a rule dict, a selector table, or an iterable of those) to
    ``out``. Not a closure over ``out``: one calling itself is a reference cycle only the collector frees."""
    if item is None:
        return
    if isinstance(item, Rule):
        # Rules parsed once at start-up come back for every test: keep them when already in place.
        same = item.source == source and item.index == len(out)
        out.append(item if same else item._replace(source=source, index=len(out)))
    elif isinstance(item, Mapping):
        keys = set(item)
        if keys and keys <= set(RULE_KEYS) and keys & {"path", "selector", "event"}:  # one rule dict
            out.append(parse_rule(item, source=source, index=len(out)))
            return
        for selector, value in item.items():
            out.append(parse_entry(selector, value, source=source, index=len(out)))
    elif isinstance(item, str | bytes):
        raise _config_error(repr(item), source, "a rule must be a table/dict, not a bare string")
    elif isinstance(item, Iterable):
        for sub in item:
            _add_rules(sub, out, source)
    else:
        raise _config_error(repr(item), source, f"a rule must be a table/dict, got {type(item).__name__}")


def parse_rules(spec: RuleSpec, *, source: str, place: str | None = None) -> list[Rule]:
    """Parse one layer (see ``RuleSpec``) into rules, in order. Raises ``ConfigError`` naming the rule and
    ``place``, where the layer was written (e.g. the pyproject.toml file), when given."""
    out: list[Rule] = []
    try:
        _add_rules(spec, out, source)
    except ConfigError as exc:
        if place is None:
            raise
        raise ConfigError(exc.headline, evidence=exc.evidence, place=place, fixes=exc.fixes) from None
    return out
