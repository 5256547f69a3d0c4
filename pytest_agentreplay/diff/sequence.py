"""A longest common subsequence of two key sequences, as index pairs (what :mod:`.align` pairs events by):
a Myers diff (O((N+M)·D), linear for the usual few edits) after the common head and tail are cut; past
``MYERS_MAX_EDITS`` edits, patience anchoring on keys unique on both sides, else a greedy pass, bound the
cost when the sequences differ wildly."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Sequence
from typing import Final

MYERS_MAX_EDITS: Final = 400


def lcs_pairs(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` with ``a[i] == b[j]``, increasing in both, of a longest (or, when the
    sequences differ by more than a few hundred edits, a long) common subsequence."""
    out: list[tuple[int, int]] = []
    _diff(a, 0, len(a), b, 0, len(b), out)
    return out


def multiset_pairs(
    a: Sequence[Hashable], b: Sequence[Hashable]
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Index pairs of equal keys, ignoring order (the first of a key in ``a`` with its first in ``b``), and
    the positions left unpaired in ``a`` and in ``b``."""
    pool: dict[Hashable, deque[int]] = defaultdict(deque)
    for j, key in enumerate(b):
        pool[key].append(j)
    pairs: list[tuple[int, int]] = []
    left_a: list[int] = []
    for i, key in enumerate(a):
        bucket = pool.get(key)
        if bucket:
            pairs.append((i, bucket.popleft()))
        else:
            left_a.append(i)
    used = {j for _, j in pairs}
    return pairs, left_a, [j for j in range(len(b)) if j not in used]


def _diff(
    a: Sequence[Hashable], alo: int, ahi: int, b: Sequence[Hashable], blo: int, bhi: int,
    out: list[tuple[int, int]],
) -> None:  # fmt: skip
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        out.append((alo, blo))
        alo += 1
        blo += 1
    tail: list[tuple[int, int]] = []
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
        ahi -= 1
        bhi -= 1
        tail.append((ahi, bhi))
    if alo < ahi and blo < bhi:
        found = _myers(a, alo, ahi, b, blo, bhi, MYERS_MAX_EDITS)
        if found is not None:
            out.extend(found)
        else:
            _patience(a, alo, ahi, b, blo, bhi, out)
    out.extend(reversed(tail))


def _myers(
    a: Sequence[Hashable], alo: int, ahi: int, b: Sequence[Hashable], blo: int, bhi: int, max_d: int
) -> list[tuple[int, int]] | None:
    n, m = ahi - alo, bhi - blo
    max_d = min(max_d, n + m)
    offset = max_d + 1
    v = [0] * (2 * max_d + 3)
    trace: list[list[int]] = []
    for d in range(max_d + 1):
        trace.append(v[offset - d - 1 : offset + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, d, n, m, alo, blo)
    return None


def _backtrack(
    trace: list[list[int]], dist: int, n: int, m: int, alo: int, blo: int
) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(dist, 0, -1):
        snap = trace[d]  # v after step d-1, stored for k in [-d-1, d+1]
        base = d + 1
        k = x - y
        down = k == -d or (k != d and snap[base + k - 1] < snap[base + k + 1])
        prev_k = k + 1 if down else k - 1
        prev_x = snap[base + prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            pairs.append((alo + x, blo + y))
        x, y = prev_x, prev_y
    while x > 0 and y > 0:
        x -= 1
        y -= 1
        pairs.append((alo + x, blo + y))
    pairs.reverse()
    return pairs


def _patience(
    a: Sequence[Hashable], alo: int, ahi: int, b: Sequence[Hashable], blo: int, bhi: int,
    out: list[tuple[int, int]],
) -> None:  # fmt: skip
    """Anchor on keys unique on both sides (longest increasing run), diff the gaps; greedy if none."""
    count_a, count_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    pos_a = {a[i]: i for i in range(alo, ahi)}
    pos_b = {b[j]: j for j in range(blo, bhi)}
    candidates = sorted(
        (pos_a[key], pos_b[key]) for key, c in count_a.items() if c == 1 and count_b.get(key) == 1
    )
    anchors = _longest_increasing(candidates)
    if not anchors:
        _greedy(a, alo, ahi, b, blo, bhi, out)
        return
    pa, pb = alo, blo
    for ia, ib in anchors:
        _diff(a, pa, ia, b, pb, ib, out)
        out.append((ia, ib))
        pa, pb = ia + 1, ib + 1
    _diff(a, pa, ahi, b, pb, bhi, out)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest subsequence of ``pairs`` (sorted by first) increasing in the second element."""
    tails: list[int] = []
    tail_idx: list[int] = []
    back: list[int] = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_idx.append(n)
        else:
            tails[pos] = j
            tail_idx[pos] = n
        back[n] = tail_idx[pos - 1] if pos > 0 else -1
    result: list[tuple[int, int]] = []
    n = tail_idx[-1] if tail_idx else -1
    while n >= 0:
        result.append(pairs[n])
        n = back[n]
    result.reverse()
    return result


def _greedy(
    a: Sequence[Hashable], alo: int, ahi: int, b: Sequence[Hashable], blo: int, bhi: int,
    out: list[tuple[int, int]],
) -> None:  # fmt: skip
    """Two-sided greedy common subsequence, O(n log n): at a mismatch skip the side whose next match
    is nearer. Only used when the histories differ by far more edits than ``MYERS_MAX_EDITS``."""
    pos_a: dict[Hashable, list[int]] = defaultdict(list)
    pos_b: dict[Hashable, list[int]] = defaultdict(list)
    for i in range(alo, ahi):
        pos_a[a[i]].append(i)
    for j in range(blo, bhi):
        pos_b[b[j]].append(j)
    far = ahi + bhi
    i, j = alo, blo
    while i < ahi and j < bhi:
        if a[i] == b[j]:
            out.append((i, j))
            i += 1
            j += 1
            continue
        cands_b = pos_b.get(a[i], [])
        k = bisect.bisect_left(cands_b, j)
        skip_b = cands_b[k] - j if k < len(cands_b) else far
        cands_a = pos_a.get(b[j], [])
        k = bisect.bisect_left(cands_a, i)
        skip_a = cands_a[k] - i if k < len(cands_a) else far
        if skip_a == far and skip_b == far:
            i += 1
            j += 1
        elif skip_b <= skip_a:
            j += skip_b
        else:
            i += skip_a
