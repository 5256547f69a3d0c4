"""The matcher: a mode's layered rules compiled once, answering each (event type, path) with a judgement."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from ...core.constants import EVENT_TYPES
from .defaults import check_mode, default_rules
from .rule import Rule, Verdict
from .syntax import ORDER, PSEUDO_PATHS, Path, RuleSpec, parse_rules, split_path

# Precedence, lowest first: a matching rule of a later layer wins over every rule of an earlier one.
LAYERS: Final = ("default", "project", "marker", "hook")
# What a ``normalize`` pattern's matches become in both texts before they are compared.
PLACEHOLDER: Final = "<~>"
# Ends every token of a path turned into the string the compiled path globs match.
_SEP: Final = "\x00"


@functools.lru_cache(maxsize=2048)
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


@functools.lru_cache(maxsize=2048)  # every event type's candidates ask for those of the rules of ``*``
def _literal_words(pattern: str) -> frozenset[str]:
    """The lower-cased literal tokens of an ASCII path glob, which every path it matches holds (none for a
    non-ASCII glob: its case-insensitive match is not ``str.lower``'s)."""
    if not pattern.isascii():
        return frozenset()
    return frozenset(tok.lower() for tok in split_path(pattern) if "*" not in tok)


def _is_literal(glob: str) -> bool:
    return not any(c in glob for c in "*?[")


def _event_matches(event_type: str, glob: str) -> bool:
    # A glob naming one type is compared as it is: its regex is never compiled.
    return event_type == glob if _is_literal(glob) else fnmatch.fnmatchcase(event_type, glob)


def _precedence(rule: Rule) -> tuple[int, int, int, int, int, int]:
    """Later layer, then more specific path (literal tokens, then partial globs, then single-token
    wildcards), then more specific event type (a name, a glob, ``*``), then later in its layer."""
    rank = LAYERS.index(rule.source) if rule.source in LAYERS else len(LAYERS)
    literal = partial = single = 0
    for token in split_path(rule.path):
        if "*" not in token:
            literal += 1
        elif token in ("*", "[*]"):
            single += 1
        elif token != "**":
            partial += 1
    event = 2 if _is_literal(rule.event) else 0 if rule.event == "*" else 1
    return (rank, literal, partial, single, event, rule.index)


class Judgement(NamedTuple):
    """What the rules say about one (event type, path): the verdict, the rule whose tolerances apply,
    and the rule that gave the verdict (differs when the winning rule has no verdict of its own)."""

    verdict: Verdict
    rule: Rule
    verdict_rule: Rule
    normalizers: tuple[re.Pattern[str], ...] = ()
    # The verdict for a value absent from the recording, when a rule down to the verdict's one says.
    unrecorded: Verdict | None = None

    def normalize(self, text: str) -> str:
        for regex in self.normalizers:
            text = regex.sub(PLACEHOLDER, text)
        return text


class RuleSet:
    """Layered rules for one replay mode; ``judge`` answers per (event type, path), cached. The rules never
    change, so one set (and its caches) is shared by every run judged by the same rules (:func:`compiled`)."""

    def __init__(self, mode: str, rules: Iterable[Rule]) -> None:
        check_mode(mode)
        self.mode = mode
        self.rules: tuple[Rule, ...] = tuple(r for r in rules if not r.modes or mode in r.modes)
        self._ordered = sorted(self.rules, key=_precedence, reverse=True)
        # Per event type, its rules in precedence order, each with whether its path is a pseudo path and
        # the words any path it matches holds.
        self._by_type: dict[str, list[tuple[Rule, bool, frozenset[str]]]] = {}
        self._cache: dict[tuple[str, Path], Judgement] = {}
        self._unordered: frozenset[str] | None = None

    @classmethod
    def defaults(cls, mode: str = "regression", *, imported: bool = False) -> RuleSet:
        return compiled(mode, imported=imported)

    @classmethod
    def from_layers(
        cls,
        mode: str = "regression",
        *,
        project: RuleSpec = None,
        marker: RuleSpec = None,
        hook: RuleSpec = None,
        extra: RuleSpec = None,
        imported: bool = False,
    ) -> RuleSet:
        """Defaults of ``mode`` < ``project`` (``[tool.agentreplay.rules]``) < ``marker`` (``rules=``) <
        ``hook`` (results of ``pytest_agentreplay_diff_rules``) < ``extra`` (what the mode's own checks
        add, as layer ``default``). Raises ``ConfigError`` on a bad rule. ``imported``: the recording came
        from vcrpy (``is_imported(cassette.run.labels)``)."""
        added = (
            *parse_rules(project, source="project"),
            *parse_rules(marker, source="marker"),
            *parse_rules(hook, source="hook"),
            *(parse_rules(extra, source="default") if extra else ()),
        )
        return compiled(mode, added, imported=imported)

    @property
    def compares(self) -> bool:
        """False in audit mode: nothing is compared."""
        return self.mode != "audit"

    def _candidates(self, event_type: str) -> list[tuple[Rule, bool, frozenset[str]]]:
        found = self._by_type.get(event_type)
        if found is None:
            # A few distinct event globs among the rules: each matched once.
            events = {p for p in {r.event for r in self._ordered} if _event_matches(event_type, p)}
            found = [
                (rule, rule.path.startswith("@"), _literal_words(rule.path))
                for rule in self._ordered
                if rule.event in events
            ]
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
        # A glob naming a word the path lacks cannot match it: its regex is never compiled.
        words = frozenset(subject.lower().split(_SEP)) if subject.isascii() else None
        winner: Rule | None = None
        verdict_rule: Rule | None = None
        unrecorded: Verdict | None = None
        for rule, rule_pseudo, needed in self._candidates(event_type):
            # A path glob's regex is compiled when first matched: most rules name types a run never has.
            if rule_pseudo != pseudo or (words is not None and not needed <= words):
                continue
            if not _path_regex(rule.path).match(subject):
                continue
            if winner is None:
                winner = rule
            if unrecorded is None:
                unrecorded = rule.unrecorded
            if rule.verdict is not None:
                verdict_rule = rule
                break
        if winner is None or verdict_rule is None:  # only without the default catch-alls
            fallback = Rule(source="default", verdict="regression", path=tokens[0] if pseudo else "**")
            winner = winner or fallback
            verdict_rule = verdict_rule or fallback
        assert verdict_rule.verdict is not None
        normalizers = tuple(re.compile(p) for p in winner.normalize)
        found = Judgement(verdict_rule.verdict, winner, verdict_rule, normalizers, unrecorded)
        self._cache[cache_key] = found
        return found

    def ignored_anywhere(self, event_type: str) -> frozenset[str]:
        """The keys these rules ignore at any depth (``*:**.created``) that they also ignore at the top of a
        JSON request body of ``event_type``: what replay leaves out when it matches a live request to a
        recorded one, so that two requests the comparison calls equal are the same request to the matching."""
        names = set()
        for rule, _, _ in self._candidates(event_type):
            tokens = split_path(rule.path)
            if len(tokens) == 2 and tokens[0] == "**" and not any(c in tokens[1] for c in "*?[]"):
                names.add(tokens[1])
        under = ("input_ref", "body", "json")
        return frozenset(n for n in names if self.judge(event_type, (*under, n)).verdict == "ignore")

    def order_insensitive_types(self) -> frozenset[str]:
        """Event types whose consecutive runs form order-insensitive groups (``TYPE:@order`` rules)."""
        if self._unordered is None:  # asked by every comparison: answered once per set
            # Without an order_insensitive rule no type is: its @order is not judged.
            types = EVENT_TYPES if any(r.order_insensitive for r in self.rules) else ()
            self._unordered = frozenset(t for t in types if self.judge(t, (ORDER,)).rule.order_insensitive)
        return self._unordered

    def __repr__(self) -> str:
        return f"RuleSet(mode={self.mode!r}, rules={len(self.rules)})"


def compiled(mode: str, added: tuple[Rule, ...] = (), *, imported: bool = False) -> RuleSet:
    """The rule set of ``mode``'s defaults (``imported``: vcrpy leniency) then ``added``, built once per
    distinct triple: a suite's runs share a handful of sets. Keyed by ``added`` alone: hashing the defaults
    per run cost more."""
    try:
        hash(added)
    except TypeError:  # a Rule built by hand with a list in a field: judged by a set of its own
        return _built(mode, added, imported)
    return _compiled(mode, added, imported)


def _built(mode: str, added: tuple[Rule, ...], imported: bool) -> RuleSet:
    return RuleSet(mode, (*default_rules(mode, imported=imported), *added))


_compiled = functools.lru_cache(maxsize=64)(_built)
