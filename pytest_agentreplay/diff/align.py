"""Alignment of a recorded and a replayed history: which events correspond.

Events are aligned by identity (type plus what names the step: tool, endpoint, effect target...) with a
Myers diff (:mod:`.sequence`), so one inserted event is one ``inserted`` and every later pair stays matched.
Events left over in a gap pair on a coarser identity, so a changed field reads as a change, not as missing +
inserted; order-insensitive runs (one ``data.group``, or rule-configured types) match as multisets; what is
left missing on one side and inserted on the other with the same identity has ``moved``.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from ..core.canonical import dumps_compact
from ..core.constants import VOLATILE_ENVELOPE as _ENVELOPE_FIELDS
from .sequence import lcs_pairs, multiset_pairs

Event = Mapping[str, object]
Key = tuple[Hashable, ...]
_EMPTY: Final[Mapping[str, object]] = {}


def _sub(event: Event, name: str) -> Mapping[str, object]:
    value = event.get(name)
    # Most events lack one of the parts: None is answered before the slow ABC check.
    if type(value) is dict or (value is not None and isinstance(value, Mapping)):
        return value
    return _EMPTY


def _hashable(value: object) -> Hashable:
    """``value`` as a part of an identity key: itself when it hashes (a str at once), else its JSON text (a
    list or an object where a name was expected, in a hand-edited cassette or an event built by hand)."""
    if type(value) is str or value is None:
        return value
    try:
        hash(value)
    except TypeError:
        return dumps_compact(value)
    return value


# The data fields the identity of these types is made of (with the type and the idempotency key): what
# :func:`identities` reads, and what :func:`_same_identity` finds the same objects in two events.
_IDENTITY_DATA: Final[Mapping[object, tuple[str, str]]] = {
    "http": ("method", "url"),
    "model.call": ("provider", "endpoint"),
}


def identities(event: Event) -> tuple[Key, Key]:
    """``(identity, coarse_identity)`` of an event, computed together."""
    etype = _hashable(event.get("type"))
    tool = _sub(event, "tool")
    coarse: Key
    fine: Key
    if etype == "http" or etype == "model.call":
        data = _sub(event, "data")
        first, second = _IDENTITY_DATA[etype]
        if etype == "http":
            url = data.get(second)
            coarse = (etype, _hashable(data.get(first)))
            fine = (*coarse, _url_identity(url) if isinstance(url, str) else _hashable(url))
        else:
            coarse = fine = (etype, _hashable(data.get(first)), _hashable(data.get(second)))
    elif etype == "tool.call" or etype == "tool.result":
        coarse = fine = (etype, _hashable(tool.get("name")))
    elif etype == "effect":
        effect = _sub(event, "effect")
        coarse = (etype, _hashable(effect.get("kind")))
        fine = (*coarse, _hashable(effect.get("target")))
    elif etype == "policy.decision":
        coarse = fine = (etype, _hashable(_sub(event, "data").get("policy")))
    elif etype == "approval":
        coarse = fine = (etype, _hashable(_sub(event, "data").get("subject")))
    else:
        coarse = fine = (etype,)
    idem = tool.get("idempotency_key")
    if idem is not None:
        fine = (*fine, _hashable(idem))
    return fine, coarse


# scheme://authority, then the path up to the query or fragment. For printable ASCII without spaces and
# without an IPv6 bracket this is what ``urlsplit`` gives, at a tenth of its cost (a replay of 1,000 GETs
# takes the identity of 2,000 distinct URLs).
_PLAIN_URL: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://([^/?#\[\]]*)(?=[/?#]|\Z)([^?#]*)")


def _url_identity(url: str) -> str:
    if url.isascii() and url.isprintable() and " " not in url:
        found = _PLAIN_URL.match(url)
        if found is not None:
            scheme, netloc, path = found.groups()
            return f"{scheme.lower()}://{netloc}{path}"
    return _split_url_identity(url)


@functools.lru_cache(maxsize=4096)
def _split_url_identity(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def coarse_identity(event: Event) -> Key:
    """Type plus the name of the step (tool name, provider and endpoint, effect kind, policy name,
    approval subject, HTTP method): what must stay the same for two events to be the same step."""
    return identities(event)[1]


def identity(event: Event) -> Key:
    """The identity used for alignment: the coarse identity plus effect target, HTTP URL (without
    query) and the tool idempotency key."""
    return identities(event)[0]


def group_of(event: Event) -> Hashable | None:
    data = event.get("data")
    group = data.get("group") if type(data) is dict else _sub(event, "data").get("group")
    if group is None or isinstance(group, bool):
        return None
    return group if isinstance(group, Hashable) else dumps_compact(group)


class Alignment(NamedTuple):
    """Indexes into the recorded (first) and replayed (second) event lists."""

    pairs: tuple[tuple[int, int], ...]
    """Matched events, in replayed order."""
    missing: tuple[int, ...]
    """Recorded events with no replayed counterpart."""
    inserted: tuple[int, ...]
    """Replayed events with no recorded counterpart."""
    moved: tuple[tuple[int, int], ...]
    """Same step in both histories, but its order relative to the other steps changed."""
    grouped: frozenset[int] = frozenset()
    """Recorded indexes of events matched inside an order-insensitive group."""


_Unit = tuple[Key, Key, tuple[int, ...], bool]
"""(identity key, coarse key, member indexes, is an order-insensitive group)"""


def _units(events: Sequence[Event], oi_types: frozenset[str]) -> list[_Unit]:
    units: list[_Unit] = []
    i, n = 0, len(events)
    while i < n:
        ev = events[i]
        group = group_of(ev)
        etype = ev.get("type")
        j = i + 1
        if group is not None:
            while j < n and group_of(events[j]) == group:
                j += 1
            units.append((("<group>",), ("<group>",), tuple(range(i, j)), True))
        elif etype in oi_types:
            while j < n and events[j].get("type") in oi_types and group_of(events[j]) is None:
                j += 1
            units.append((("<unordered>",), ("<unordered>",), tuple(range(i, j)), True))
        else:
            fine, coarse = identities(ev)
            units.append((fine, coarse, (i,), False))
        i = j
    return units


def content_key(event: Event) -> str:
    """Canonical JSON of the event without its volatile envelope (seq, ts, ids, hash chain)."""
    return dumps_compact({k: v for k, v in event.items() if k not in VOLATILE_ENVELOPE})


# The volatile event fields (``core.constants``), as a set: content keys and field signatures leave them out
# whatever the rules say (the rule defaults ignore them too).
VOLATILE_ENVELOPE: Final = frozenset(_ENVELOPE_FIELDS)


def _field_signature(event: Event) -> frozenset[tuple[str, str, str]]:
    """The event's fields two levels deep, for scoring how alike two events are."""
    sig: set[tuple[str, str, str]] = set()
    for key, value in event.items():
        if key in VOLATILE_ENVELOPE:
            continue
        if isinstance(value, Mapping):
            sig.update((key, str(k2), repr(v2)) for k2, v2 in value.items())
        else:
            sig.add((key, "", repr(value)))
    return frozenset(sig)


BEST_MATCH_LIMIT: Final = 4096


def _pair_bucket(
    recorded: Sequence[Event], replayed: Sequence[Event], la: list[int], lb: list[int],
    pairs: list[tuple[int, int]], in_order: bool,
) -> tuple[list[int], list[int]]:  # fmt: skip
    """Pair events of one bucket, most alike first (in order when ``in_order`` or the bucket is huge)."""
    if in_order or not lb or len(la) * len(lb) > BEST_MATCH_LIMIT or len(la) == 1 == len(lb):
        n = min(len(la), len(lb))
        pairs.extend(zip(la[:n], lb[:n], strict=True))
        return la[n:], lb[n:]
    sig_b = [_field_signature(replayed[j]) for j in lb]
    scored = sorted(
        ((-len(sa & sb), x, y) for x, sa in enumerate(_field_signature(recorded[i]) for i in la)
         for y, sb in enumerate(sig_b)),
    )  # fmt: skip
    used_a: set[int] = set()
    used_b: set[int] = set()
    for _, x, y in scored:
        if x not in used_a and y not in used_b:
            used_a.add(x)
            used_b.add(y)
            pairs.append((la[x], lb[y]))
    return (
        [i for x, i in enumerate(la) if x not in used_a],
        [j for y, j in enumerate(lb) if y not in used_b],
    )


def _pair_unordered(
    recorded: Sequence[Event], replayed: Sequence[Event], ma: Sequence[int], mb: Sequence[int],
    pairs: list[tuple[int, int]], missing: list[int], inserted: list[int],
) -> None:  # fmt: skip
    """Match two groups as multisets: same content first (hash buckets), then within the same identity
    (then coarse identity) the most alike events."""
    left_a = list(ma)
    left_b = list(mb)
    for keyfn in (content_key, identity, coarse_identity):
        if not left_a or not left_b:
            break
        bucket_a, bucket_b = _buckets(recorded, left_a, keyfn), _buckets(replayed, left_b, keyfn)
        still_a: list[int] = []
        still_b: list[int] = []
        for key, la in bucket_a.items():
            lb = bucket_b.pop(key, [])
            rest_a, rest_b = _pair_bucket(recorded, replayed, la, lb, pairs, keyfn is content_key)
            still_a += rest_a
            still_b += rest_b
        for lb in bucket_b.values():
            still_b += lb
        left_a, left_b = sorted(still_a), sorted(still_b)
    missing.extend(left_a)
    inserted.extend(left_b)


def _buckets(
    events: Sequence[Event], indexes: list[int], keyfn: Callable[[Event], Hashable]
) -> dict[Hashable, list[int]]:
    found: dict[Hashable, list[int]] = defaultdict(list)
    for i in indexes:
        found[keyfn(events[i])].append(i)
    return found


# The ``data`` objects of two events (``_sub``'s).
_DataPair = tuple[Mapping[str, object], Mapping[str, object]]


def _same_steps(recorded: Sequence[Event], replayed: Sequence[Event], oi: frozenset[str]) -> bool:
    """Whether the histories are the same steps in the same order, none in an order-insensitive run: the
    usual replay, aligned one to one. Nothing is kept, so this allocates nothing that outlives it."""
    if len(recorded) != len(replayed):
        return False
    for a, b in zip(recorded, replayed, strict=True):
        etype = a.get("type")
        if etype != b.get("type") or etype in oi:
            return False
        da, db = _sub(a, "data"), _sub(b, "data")
        # Most events have no group at all: asked what it is only when one has.
        if (da.get("group") is not None or db.get("group") is not None) and (
            group_of(a) is not None or group_of(b) is not None
        ):
            return False
        if not _same_identity(etype, a, b, data=(da, db)):
            return False
    return True


def _same_identity(etype: object, a: Event, b: Event, *, data: _DataPair | None = None) -> bool:
    """Whether two events of type ``etype`` have one identity; at once when it is made of the same objects
    in both (a replayed event holds its recorded twin's values where they are equal)."""
    names = _IDENTITY_DATA.get(etype)
    if names is not None and (
        a.get("tool") is b.get("tool")  # (then its idempotency key too)
        or _sub(a, "tool").get("idempotency_key") is _sub(b, "tool").get("idempotency_key")
    ):
        da, db = data if data is not None else (_sub(a, "data"), _sub(b, "data"))
        first, second = names
        if da.get(first) is db.get(first) and da.get(second) is db.get(second):
            return True
    return identities(a)[0] == identities(b)[0]


def align_histories(
    recorded: Sequence[Event],
    replayed: Sequence[Event],
    *,
    order_insensitive_types: Iterable[str] = (),
) -> Alignment:
    """Pair recorded and replayed events; see the module docstring."""
    oi = frozenset(order_insensitive_types)
    if _same_steps(recorded, replayed, oi):
        # What the diff below gives for equal identity sequences without groups, without building units.
        return Alignment(pairs=tuple((i, i) for i in range(len(recorded))), missing=(), inserted=(), moved=())
    units_a = _units(recorded, oi)
    units_b = _units(replayed, oi)
    interned: dict[Key, int] = {}
    ka = [interned.setdefault(u[0], len(interned)) for u in units_a]
    kb = [interned.setdefault(u[0], len(interned)) for u in units_b]
    matched = lcs_pairs(ka, kb)

    unit_pairs: list[tuple[int, int]] = []
    pa = pb = 0
    for ua, ub in [*matched, (len(units_a), len(units_b))]:
        if ua > pa and ub > pb:  # a gap with events on both sides: pair on the coarse identity
            ca = [units_a[x][1] for x in range(pa, ua)]
            cb = [units_b[x][1] for x in range(pb, ub)]
            unit_pairs.extend((pa + x, pb + y) for x, y in lcs_pairs(ca, cb))
        if ua < len(units_a):
            unit_pairs.append((ua, ub))
        pa, pb = ua + 1, ub + 1

    pairs: list[tuple[int, int]] = []
    missing: list[int] = []
    inserted: list[int] = []
    grouped: set[int] = set()
    paired_a: set[int] = set()
    paired_b: set[int] = set()
    for ua, ub in unit_pairs:
        paired_a.add(ua)
        paired_b.add(ub)
        unit_a, unit_b = units_a[ua], units_b[ub]
        if unit_a[3] or unit_b[3]:
            before = len(pairs)
            _pair_unordered(recorded, replayed, unit_a[2], unit_b[2], pairs, missing, inserted)
            grouped.update(i for i, _ in pairs[before:])
        else:
            pairs.append((unit_a[2][0], unit_b[2][0]))
    missing += [i for n, unit in enumerate(units_a) if n not in paired_a for i in unit[2]]
    inserted += [j for n, unit in enumerate(units_b) if n not in paired_b for j in unit[2]]

    # Same step on both sides but not aligned: it moved relative to the others.
    moved: list[tuple[int, int]] = []
    if missing and inserted:
        missing.sort()
        inserted.sort()
        for keyfn in (identity, coarse_identity):
            found, left_a, left_b = multiset_pairs(
                [keyfn(recorded[i]) for i in missing], [keyfn(replayed[j]) for j in inserted]
            )
            moved += [(missing[x], inserted[y]) for x, y in found]
            missing, inserted = [missing[x] for x in left_a], [inserted[y] for y in left_b]
    pairs.sort(key=lambda p: p[1])
    moved.sort(key=lambda p: p[1])
    return Alignment(
        pairs=tuple(pairs),
        missing=tuple(sorted(missing)),
        inserted=tuple(sorted(inserted)),
        moved=tuple(moved),
        grouped=frozenset(grouped),
    )
