"""Compare two aligned histories under rules: equal pairs are skipped by their canonical hash, only
differing pairs are walked field by field (payload references resolved on demand)."""

from __future__ import annotations

import bisect
import json
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeGuard

from ..core.canonical import dumps_compact, same_json
from ..http.multipart import comparable_request
from .align import VOLATILE_ENVELOPE, align_histories
from .carried import (
    DEFAULT_NAMES,
    InputNames,
    RoleMap,
    collapse_carried,
    is_conversation_item,
    is_multipart_part,
    note_role,
)
from .labels import event_label, identity_text
from .result import Difference, DiffKind, DriftResult
from .rules import ORDER, PRESENCE, Judgement, Path, RuleSet, Verdict, join_path
from .sequence import lcs_pairs
from .text import ABSENT, similar

Event = Mapping[str, object]
Resolver = Callable[[Mapping[str, object]], object]
REF_FIELDS = ("input_ref", "output_ref")
# A tuple, not ``dict | list``: that union is built anew at every call of the hot checks below.
_CONTAINERS = (dict, list)


def _unshared(a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    """The keys whose values are not one object in both (a key of one side only included): most values of
    a replayed event are the recording's own (see ``replay.replayed_history``) and cost nothing."""
    keys = [key for key, value in a.items() if value is not b.get(key, ABSENT)]
    return keys if a.keys() == b.keys() else [*keys, *(b.keys() - a.keys())]


def _differing_keys(a: Event, b: Event) -> list[str]:
    """The top-level keys whose values differ as JSON values, type for type (``true`` is not ``1``)."""
    return [key for key in _unshared(a, b) if not same_json(a.get(key, ABSENT), b.get(key, ABSENT))]


def events_equal(a: Event, b: Event) -> bool:
    """Equal without their volatile envelope."""
    return VOLATILE_ENVELOPE.issuperset(_differing_keys(a, b))


def _only_ignored(rules: RuleSet, event_type: str, a: Event, b: Event, keys: Sequence[str]) -> int | None:
    """How many leaves of two events differ, when each is a scalar the rules ignore (a timestamp, a
    latency): what walking the pair would count, without the walk; None when any difference needs it.
    ``keys``: the only top-level keys whose values may differ (the others are known equal)."""
    count = 0
    for key in keys:
        va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
        if key in REF_FIELDS:
            # As ``_PairWalker.payload`` compares refs: by their inline payloads (a blob takes the walk).
            va, vb = _inline(va), _inline(vb)
            if va is None or vb is None:
                return None
        counted = _ignored_within(rules, event_type, (str(key),), va, vb, 2)
        if counted is None:
            return None
        count += counted
    return count


def _inline(ref: object) -> object:
    """What the walk compares of a ref held inline: its payload (ABSENT for no ref); None for a blob."""
    if ref is ABSENT or ref is None:
        return ABSENT
    if not isinstance(ref, Mapping) or ref.get("sha256") or "inline" not in ref:
        return None
    return ref["inline"]


def _ignored_within(
    rules: RuleSet, event_type: str, tokens: Path, a: object, b: object, depth: int
) -> int | None:
    """:func:`_ignored_leaf` over the differing leaves of two values, through ``depth`` levels of objects."""
    if _same(a, b):
        return 0
    if depth and type(a) is dict and type(b) is dict:
        count = 0
        for key in _unshared(a, b):
            va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
            counted = _ignored_within(rules, event_type, (*tokens, str(key)), va, vb, depth - 1)
            if counted is None:
                return None
            count += counted
        return count
    return _ignored_leaf(rules, event_type, tokens, a, b)


def _ignored_leaf(rules: RuleSet, event_type: str, tokens: Path, a: object, b: object) -> int | None:
    """As ``_PairWalker.leaf`` judges two differing scalars: 0 when they are the same JSON text, 1 when the
    rules ignore the difference (it is only counted), None when the walk must see it."""
    if isinstance(a, _CONTAINERS) or isinstance(b, _CONTAINERS):
        return None
    if isinstance(a, str) and isinstance(b, str) and _same_json_text(a, b):
        return 0
    return 1 if _verdict_of(rules.judge(event_type, tokens), a) == "ignore" else None


def _verdict_of(judgement: Judgement, recorded: object) -> Verdict:
    """The verdict on a differing leaf: a value absent from the recording takes the rule's ``unrecorded``
    verdict when it has one (e.g. a header an imported recording never stored)."""
    if recorded is ABSENT and judgement.unrecorded is not None:
        return judgement.unrecorded
    return judgement.verdict


def _seq(event: Event, index: int) -> int:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else index


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: object, b: object) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python's ``==`` says it is), ``1`` is ``1.0``."""
    if a is b:
        return True
    if isinstance(a, _CONTAINERS):
        # Settled at C speed (key order included) before the walk would descend into every item.
        return same_json(a, b)
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


class _Stats:
    __slots__ = ("ignored", "tolerated")

    def __init__(self) -> None:
        self.ignored = 0
        self.tolerated = 0


class _PairWalker:
    """Walks two values of one event pair, emitting a ``Difference`` per differing leaf."""

    def __init__(
        self,
        rules: RuleSet,
        resolve: Resolver | None,
        event_type: str,
        event: Event,
        seqs: tuple[int | None, int | None],
        sink: list[Difference],
        stats: _Stats,
        kind: DiffKind = "changed",
        roles: RoleMap | None = None,
        names: InputNames = DEFAULT_NAMES,
    ) -> None:
        self.rules = rules
        self.names = names
        self.resolve = resolve
        self.event_type = event_type
        self.labelled = event
        self._label: str | None = None
        self.seqs = seqs
        self.sink = sink
        self.stats = stats
        self.kind = kind
        self.roles = roles

    @property
    def label(self) -> str:
        # Worded only for a difference: most pairs differ only where the rules ignore.
        if self._label is None:
            self._label = event_label(self.labelled)
        return self._label

    def judge(self, tokens: Path) -> Judgement:
        return self.rules.judge(self.event_type, tokens)

    def event(self, a: Event, b: Event) -> None:
        for key in sorted(_unshared(a, b), key=str):
            va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
            if _same(va, vb):
                continue
            if key in REF_FIELDS:
                self.payload(va, vb, (key,))
            else:
                self.walk(va, vb, (str(key),))

    def _load(self, ref: object) -> object:
        if ref is ABSENT or ref is None:
            return ABSENT
        if not isinstance(ref, Mapping):
            return ref
        if ref.get("sha256"):
            if "inline" in ref and ref["inline"] is not None:
                return ref["inline"]
            if self.resolve is None:
                return {"sha256": ref["sha256"]}
            return self.resolve(ref)
        if "inline" in ref:
            return ref["inline"]
        return self.resolve(ref) if self.resolve is not None else dict(ref)

    def payload(self, ra: object, rb: object, tokens: Path) -> None:
        if isinstance(ra, Mapping) and isinstance(rb, Mapping):
            sha = ra.get("sha256")
            if sha and sha == rb.get("sha256"):
                return  # same content; ref metadata (size, media type) follows from it
            if not sha and not rb.get("sha256") and _same(ra.get("inline"), rb.get("inline")):
                return
        a, b = self._load(ra), self._load(rb)
        if tokens == ("input_ref",):
            # A multipart request compares by its parts: a new boundary is no change (nor is a cassette
            # recorded before parts were stored, which holds the bytes the old boundary delimits).
            a, b = comparable_request(a), comparable_request(b)
        self.walk(a, b, tokens)

    def walk(self, a: object, b: object, tokens: Path) -> None:
        if _same(a, b):
            return
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            roles = self.roles
            if roles is not None and (is_conversation_item(tokens, self.names) or is_multipart_part(tokens)):
                note_role(roles, self.seqs, tokens, a, b)  # names the change: "system prompt", 'part "f"'
            for key in sorted(_unshared(a, b), key=str):
                va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
                if not _same(va, vb):
                    self.walk(va, vb, (*tokens, str(key)))
            return
        if isinstance(a, list) and isinstance(b, list):
            judgement = self.judge(tokens)
            if judgement.rule.order_insensitive:
                self._multiset(a, b, tokens, judgement)
            else:
                self._sequence(a, b, tokens, judgement)
            return
        self.leaf(a, b, tokens)

    def leaf(self, a: object, b: object, tokens: Path) -> None:
        if isinstance(a, str) and isinstance(b, str) and _same_json_text(a, b):
            return
        judgement = self.judge(tokens)
        verdict = _verdict_of(judgement, a)
        if verdict == "ignore":
            self.stats.ignored += 1
            return
        if _tolerated(judgement, a, b):
            self.stats.tolerated += 1
            return
        self.sink.append(
            Difference(
                kind=self.kind,
                event_type=self.event_type,
                label=self.label,
                path=join_path(tokens),
                recorded=a,
                replayed=b,
                verdict=verdict,
                rule=judgement.verdict_rule if judgement.rule.verdict is None else judgement.rule,
                seq_recorded=self.seqs[0],
                seq_replayed=self.seqs[1],
                path_tokens=tokens,
            )
        )

    def _sequence(self, a: list[object], b: list[object], tokens: Path, judgement: Judgement) -> None:
        if len(a) == len(b):
            for i, (va, vb) in enumerate(zip(a, b, strict=True)):
                if not _same(va, vb):
                    self.walk(va, vb, (*tokens, f"[{i}]"))
            return
        ka = [_item_key(x, judgement) for x in a]
        kb = [_item_key(x, judgement) for x in b]
        pa = pb = 0
        for ia, ib in [*lcs_pairs(ka, kb), (len(a), len(b))]:
            common = min(ia - pa, ib - pb)
            for off in range(common):  # changed items, side by side
                self.walk(a[pa + off], b[pb + off], (*tokens, f"[{pa + off}]"))
            for i in range(pa + common, ia):
                self.leaf(a[i], ABSENT, (*tokens, f"[{i}]"))
            for j in range(pb + common, ib):
                self.leaf(ABSENT, b[j], (*tokens, f"[{j}]"))
            pa, pb = ia + 1, ib + 1

    def _multiset(self, a: list[object], b: list[object], tokens: Path, judgement: Judgement) -> None:
        pool: dict[Hashable, deque[int]] = defaultdict(deque)
        for j, item in enumerate(b):
            pool[_item_key(item, judgement)].append(j)
        left_a: list[int] = []
        used: set[int] = set()
        for i, item in enumerate(a):
            bucket = pool.get(_item_key(item, judgement))
            if bucket:
                used.add(bucket.popleft())
            else:
                left_a.append(i)
        left_b = [j for j in range(len(b)) if j not in used]
        for i, j in zip(left_a, left_b, strict=False):
            self.walk(a[i], b[j], (*tokens, f"[{i}]"))
        for i in left_a[len(left_b) :]:
            self.leaf(a[i], ABSENT, (*tokens, f"[{i}]"))
        for j in left_b[len(left_a) :]:
            self.leaf(ABSENT, b[j], (*tokens, f"[{j}]"))


def _same_json_text(a: str, b: str) -> bool:
    """Two JSON documents as text that differ only in key order or spacing. Agents put tool results into
    model messages with ``json.dumps``; a result served from the cassette (stored canonically, keys
    sorted) serialises with another key order than the live one did, which is no change at all."""
    if a[:1] not in ("{", "[") or a[:1] != b[:1]:
        return False
    try:
        return bool(dumps_compact(json.loads(a)) == dumps_compact(json.loads(b)))
    except (ValueError, TypeError):
        return False


def _normalized(value: object, judgement: Judgement) -> object:
    if isinstance(value, str):
        return judgement.normalize(value)
    if isinstance(value, Mapping):
        return {k: _normalized(v, judgement) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v, judgement) for v in value]
    return value


def _item_key(item: object, judgement: Judgement) -> Hashable:
    if judgement.normalizers:
        item = _normalized(item, judgement)
    if isinstance(item, Mapping | list):
        try:
            return ("j", dumps_compact(item))
        except (TypeError, ValueError):
            return ("r", repr(item))
    if isinstance(item, Hashable):
        return (type(item).__name__, item)
    return ("r", repr(item))


def _tolerated(judgement: Judgement, a: object, b: object) -> bool:
    if a is ABSENT or b is ABSENT:
        return False
    rule = judgement.rule
    if rule.presence_only:
        return True
    if rule.epsilon is not None and _is_number(a) and _is_number(b):
        return bool(abs(a - b) <= rule.epsilon)
    if isinstance(a, str) and isinstance(b, str):
        if judgement.normalizers:
            a, b = judgement.normalize(a), judgement.normalize(b)
            if a == b:
                return True
        if rule.similarity is not None:
            return similar(a, b, rule.similarity)
    return False


def compare_histories(
    recorded: Sequence[Event],
    replayed: Sequence[Event],
    *,
    rules: RuleSet | None = None,
    resolve: Resolver | None = None,
    names: InputNames = DEFAULT_NAMES,
) -> DriftResult:
    """Align ``replayed`` to ``recorded`` and judge every difference with ``rules`` (default: the
    regression-mode defaults). ``resolve(ref)`` returns the payload of an ``input_ref``/``output_ref``
    stored by ``sha256``; refs with the same ``sha256`` (or the same ``inline`` value) are equal without
    resolving. Without ``resolve`` differing blob refs are compared by their ``sha256``. ``names``: the
    request keys that hold a model's conversation, system prompt and tools (the run's providers')."""
    rules = rules if rules is not None else RuleSet.defaults("regression")
    if not rules.compares:
        return DriftResult(
            mode=rules.mode, events_recorded=len(recorded), events_replayed=len(replayed), compared=False
        )
    alignment = align_histories(recorded, replayed, order_insensitive_types=rules.order_insensitive_types())
    stats = _Stats()
    roles: RoleMap = {}
    entries: list[tuple[tuple[float, int, int], list[Difference]]] = []
    equal = 0

    def walker(
        ev: Event, seqs: tuple[int | None, int | None], sink: list[Difference], kind: DiffKind
    ) -> _PairWalker:
        return _PairWalker(rules, resolve, str(ev.get("type")), ev, seqs, sink, stats, kind, roles, names)

    def whole(
        kind: DiffKind, ev: Event, seqs: tuple[int | None, int | None], a: object, b: object, pseudo: str
    ) -> tuple[_PairWalker, list[Difference]]:
        """The walker of an event that moved, is missing or was inserted, and the difference saying so
        (none when the rules ignore it)."""
        sink: list[Difference] = []
        w = walker(ev, seqs, sink, kind)
        judgement = rules.judge(w.event_type, (pseudo,))
        if judgement.verdict == "ignore":
            stats.ignored += 1
        else:
            sink.append(_whole_event(kind, w, a, b, judgement, pseudo))
        return w, sink

    for i, j in alignment.pairs:
        a, b = recorded[i], replayed[j]
        differing = _differing_keys(a, b)
        if VOLATILE_ENVELOPE.issuperset(differing):  # events_equal
            equal += 1
            continue
        ignored = _only_ignored(rules, str(b.get("type")), a, b, differing)
        if ignored is not None:
            stats.ignored += ignored
            continue
        sink: list[Difference] = []
        walker(b, (_seq(a, i), _seq(b, j)), sink, "changed").event(a, b)
        if sink:
            entries.append(((j, 1, i), sink))

    for i, j in alignment.moved:
        a, b = recorded[i], replayed[j]
        w, sink = whole("moved", b, (_seq(a, i), _seq(b, j)), a, b, ORDER)
        if not events_equal(a, b):
            w.kind = "changed"
            w.event(a, b)
        if sink:
            entries.append(((j, 1, i), sink))

    # Missing events sit where they would have been in the replay: after the replayed partner of the
    # closest preceding matched recorded event.
    monotone = sorted(alignment.pairs) if alignment.missing else []
    rec_index = [p[0] for p in monotone]
    for i in alignment.missing:
        a = recorded[i]
        k = bisect.bisect_left(rec_index, i)
        anchor = monotone[k - 1][1] + 0.5 if k > 0 else -0.5
        _, sink = whole("missing", a, (_seq(a, i), None), a, ABSENT, PRESENCE)
        if sink:
            entries.append(((anchor, 0, i), sink))
    for j in alignment.inserted:
        b = replayed[j]
        _, sink = whole("inserted", b, (None, _seq(b, j)), ABSENT, b, PRESENCE)
        if sink:
            entries.append(((j, 1, -1), sink))

    entries.sort(key=lambda e: e[0])
    return DriftResult(
        mode=rules.mode,
        differences=collapse_carried((d for _, sink in entries for d in sink), roles, names),
        events_recorded=len(recorded),
        events_replayed=len(replayed),
        pairs_compared=len(alignment.pairs) + len(alignment.moved),
        pairs_equal=equal,
        ignored=stats.ignored,
        tolerated=stats.tolerated,
    )


def _whole_event(
    kind: DiffKind, w: _PairWalker, a: object, b: object, judgement: Judgement, pseudo: str
) -> Difference:
    return Difference(
        kind=kind,
        event_type=w.event_type,
        label=w.label,
        path=pseudo,
        recorded=ABSENT if a is ABSENT else identity_text(a),
        replayed=ABSENT if b is ABSENT else identity_text(b),
        verdict=judgement.verdict,
        rule=judgement.verdict_rule if judgement.rule.verdict is None else judgement.rule,
        seq_recorded=w.seqs[0],
        seq_replayed=w.seqs[1],
        path_tokens=(pseudo,),
    )
