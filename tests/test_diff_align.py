"""Alignment of recorded and replayed histories (pytest_agentreplay.diff.align)."""

from __future__ import annotations

import copy
import itertools
import random
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentreplay.diff import RuleSet, compare_histories
from pytest_agentreplay.diff.align import _same_identity, align_histories, coarse_identity, identity
from pytest_agentreplay.diff.sequence import lcs_pairs


def ev(etype: str, **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": etype, "actor": "runtime", "class": "decision", "data": {}}
    event.update(fields)
    return event


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return ev("tool.call", tool={"name": name}, data={"arguments": args, "attempt": 1})


def model_call(text: str) -> dict[str, Any]:
    return ev(
        "model.call",
        actor="model",
        data={
            "provider": "openai",
            "endpoint": "/v1/chat/completions",
            "model": "gpt-4o",
            "decision": {"text": text, "tool_calls": [], "stop_reason": "stop"},
        },
    )


def numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(events)
    for n, event in enumerate(out):
        event["seq"] = n
        event["ts"] = f"2025-01-01T00:00:{n % 60:02d}Z"
    return out


def history() -> list[dict[str, Any]]:
    return numbered(
        [
            ev("run.start"),
            model_call("look up the order"),
            tool_call("get_order", id=1),
            ev("tool.result", tool={"name": "get_order"}, data={"result": {"status": "shipped"}}),
            ev("policy.decision", data={"policy": "refund", "verdict": "allow", "reason": "ok"}),
            ev(
                "effect",
                tool={"name": "refund", "idempotency_key": "k1"},
                effect={"kind": "payment.refund", "target": "order-1", "committed": True},
            ),
            model_call("done"),
            ev("run.end"),
        ]
    )


# ------------------------------------------------------------------------------------------ identity


def test_identity_names_the_step() -> None:
    h = history()
    assert identity(h[1]) == ("model.call", "openai", "/v1/chat/completions")
    assert identity(h[2]) == ("tool.call", "get_order")
    assert identity(h[4]) == ("policy.decision", "refund")
    assert identity(h[5]) == ("effect", "payment.refund", "order-1", "k1")
    assert coarse_identity(h[5]) == ("effect", "payment.refund")
    http = ev("http", data={"method": "GET", "url": "https://x.test/a/b?t=1"})
    assert identity(http) == ("http", "GET", "https://x.test/a/b")


# ------------------------------------------------------------------------------------ sequence diff


def _lcs_length(a: list[int], b: list[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=30), st.lists(st.integers(0, 4), max_size=30))
def test_lcs_pairs_is_a_longest_common_subsequence(a: list[int], b: list[int]) -> None:
    pairs = lcs_pairs(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(pairs))
    assert len(pairs) == _lcs_length(a, b)


def test_lcs_pairs_stays_fast_and_valid_when_sequences_differ_wildly() -> None:
    rng = random.Random(1)
    a = [rng.randrange(50) for _ in range(5000)]
    b = [rng.randrange(50) for _ in range(5000)]
    start = time.process_time()
    pairs = lcs_pairs(a, b)
    assert time.process_time() - start < 5.0
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(pairs))
    assert len(pairs) > 300


def test_lcs_pairs_with_many_edits_uses_unique_anchors() -> None:
    # 3,000 steps, 600 dropped and 600 new ones: far beyond the Myers edit budget, still exact.
    rng = random.Random(2)
    a = list(range(3000))
    dropped = set(rng.sample(a, 600))
    b: list[int] = []
    for x in a:
        if rng.random() < 0.2:
            b.append(10_000 + len(b))
        if x not in dropped:
            b.append(x)
    start = time.process_time()
    pairs = lcs_pairs(a, b)
    assert time.process_time() - start < 2.0
    assert len(pairs) == 2400


# ----------------------------------------------------------------------------------------- alignment


def test_identical_histories_pair_everything() -> None:
    h = history()
    alignment = align_histories(h, copy.deepcopy(h))
    assert alignment.pairs == tuple((i, i) for i in range(len(h)))
    assert alignment.missing == alignment.inserted == alignment.moved == ()


def test_one_inserted_event_is_exactly_one_inserted_and_nothing_shifts() -> None:
    recorded = history()
    replayed = numbered([*history()[:3], tool_call("audit_log", id=1), *history()[3:]])
    alignment = align_histories(recorded, replayed)
    assert alignment.inserted == (3,)
    assert alignment.missing == () and alignment.moved == ()
    assert alignment.pairs == tuple((i, i if i < 3 else i + 1) for i in range(len(recorded)))

    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.seq_recorded, d.seq_replayed, d.label) for d in result.differences] == [
        ("inserted", None, 3, "audit_log")
    ]
    assert [d for d in result.differences if d.kind == "changed"] == []
    assert result.has_regressions


def test_one_inserted_event_in_a_10k_history_is_one_difference() -> None:
    base = [tool_call(f"t{n % 7}", n=n) for n in range(10_000)]
    recorded = numbered(base)
    replayed = numbered([*base[:10], tool_call("extra"), *base[10:]])
    start = time.process_time()
    result = compare_histories(recorded, replayed)
    assert time.process_time() - start < 2.0
    assert [(d.kind, d.seq_replayed) for d in result.differences] == [("inserted", 10)]
    assert result.pairs_equal == 10_000


def test_missing_event() -> None:
    recorded = history()
    replayed = numbered([e for n, e in enumerate(history()) if n != 4])
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.event_type, d.seq_recorded, d.verdict) for d in result.differences] == [
        ("missing", "policy.decision", 4, "regression")
    ]


def test_duplicated_event_is_detected_as_inserted() -> None:
    recorded = history()
    h = history()
    replayed = numbered([*h[:6], h[5], *h[6:]])  # the refund effect sent twice
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.event_type, d.seq_replayed, d.verdict) for d in result.differences] == [
        ("inserted", "effect", 6, "regression")
    ]


def test_changed_idempotency_key_pairs_the_effect_and_reports_the_field() -> None:
    recorded = history()
    replayed = history()
    replayed[5]["tool"]["idempotency_key"] = "k2"
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.path, d.recorded, d.replayed) for d in result.differences] == [
        ("changed", "tool.idempotency_key", "k1", "k2")
    ]


def test_renamed_tool_is_missing_plus_inserted() -> None:
    recorded = history()
    replayed = history()
    replayed[2]["tool"]["name"] = "fetch_order"
    result = compare_histories(recorded, replayed)
    assert sorted((d.kind, d.label) for d in result.differences) == [
        ("inserted", "fetch_order"),
        ("missing", "get_order"),
    ]


def test_reordered_dependent_steps_are_a_regression() -> None:
    recorded = history()
    h = history()
    # The refund effect now happens before the policy decided.
    replayed = numbered([*h[:4], h[5], h[4], *h[6:]])
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.path, d.verdict) for d in result.differences] == [("moved", "@order", "regression")]
    moved = result.differences[0]
    assert moved.event_type in ("effect", "policy.decision")
    assert (moved.seq_recorded, moved.seq_replayed) in ((5, 4), (4, 5))


def test_reorder_inside_a_data_group_is_no_drift() -> None:
    calls = [tool_call("a", x=1), tool_call("b", x=2), tool_call("c", x=3)]
    for call in calls:
        call["data"]["group"] = "batch-1"
    recorded = numbered([model_call("go"), *calls, model_call("done")])
    shuffled = [copy.deepcopy(calls[n]) for n in (2, 0, 1)]
    for call in shuffled:
        call["data"]["group"] = "batch-9"  # group ids are volatile
    replayed = numbered([model_call("go"), *shuffled, model_call("done")])
    alignment = align_histories(recorded, replayed)
    assert sorted(alignment.pairs) == [(0, 0), (1, 2), (2, 3), (3, 1), (4, 4)]
    result = compare_histories(recorded, replayed)
    assert result.differences == ()


def test_rule_configured_order_insensitive_types() -> None:
    calls = [tool_call("a", x=1), tool_call("b", x=2), tool_call("c", x=3)]
    recorded = numbered([model_call("go"), *calls, model_call("done")])
    replayed = numbered([model_call("go"), calls[1], calls[2], calls[0], model_call("done")])

    strict = compare_histories(recorded, replayed)
    assert [d.kind for d in strict.differences] == ["moved"]
    assert strict.has_regressions

    rules = RuleSet.from_layers("regression", project={"tool.call:@order": {"order_insensitive": True}})
    assert rules.order_insensitive_types() == frozenset({"tool.call"})
    assert compare_histories(recorded, replayed, rules=rules).differences == ()


def test_group_members_are_matched_most_alike_first() -> None:
    calls = [tool_call("search", q="red", page=1), tool_call("search", q="blue", page=1)]
    for call in calls:
        call["data"]["group"] = "g"
    recorded = numbered(calls)
    replayed = numbered([copy.deepcopy(calls[1]), copy.deepcopy(calls[0])])
    replayed[1]["data"]["arguments"]["page"] = 2  # the "red" search changed page
    result = compare_histories(recorded, replayed)
    assert [(d.path, d.recorded, d.replayed, d.seq_recorded, d.seq_replayed) for d in result.differences] == [
        ("data.arguments.page", 1, 2, 0, 1)
    ]


def test_extra_member_of_a_group_is_inserted() -> None:
    calls = [tool_call("a"), tool_call("b")]
    for call in calls:
        call["data"]["group"] = "g"
    extra = tool_call("c")
    extra["data"]["group"] = "g"
    recorded = numbered([*calls, model_call("x")])
    replayed = numbered([calls[1], extra, calls[0], model_call("x")])
    result = compare_histories(recorded, replayed)
    assert [(d.kind, d.label, d.seq_replayed) for d in result.differences] == [("inserted", "c", 1)]


_URL_PIECES = [
    "http",
    "HTTPS",
    "h2+x.y-z",
    "://",
    ":",
    "/",
    "//",
    "?",
    "#",
    "[",
    "]",
    "@",
    "a",
    "Host.Example",
    ":8080",
    "path",
    "q=1&b=2",
    " ",
    "\t",
    "\n",
    "é",
    "%20",
    ";p",
    "\x7f",
    "1ab",
    "",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_URL_PIECES), max_size=9).map("".join))
def test_url_identity_fast_path_agrees_with_urlsplit(url: str) -> None:
    """An HTTP event's identity takes scheme://authority/path from a URL with string operations when it is
    plain; whatever the URL, the result is urlsplit's (or urlsplit's refusal)."""
    from urllib.parse import urlsplit

    from pytest_agentreplay.diff.align import _url_identity

    try:
        parts = urlsplit(url)
    except ValueError:
        try:
            _url_identity(url)
        except ValueError:
            return
        raise AssertionError(f"urlsplit refuses {url!r}, the identity did not") from None
    assert _url_identity(url) == f"{parts.scheme}://{parts.netloc}{parts.path}"


def test_url_identity_of_plain_urls() -> None:
    from pytest_agentreplay.diff.align import _url_identity

    assert (
        _url_identity("HTTP://Api.Example.com:8443/v1/items/3?page=2#top")
        == "http://Api.Example.com:8443/v1/items/3"
    )
    assert _url_identity("http://[::1]:80/x?y") == "http://[::1]:80/x"  # brackets: urlsplit decides
    assert _url_identity("mailto:someone") == "mailto://someone"  # not scheme://: urlsplit decides


_STEPS = [
    tool_call("a"),
    tool_call("b"),
    model_call("x"),
    ev("http", data={"method": "GET", "url": "http://h/items/1?page=2"}),
    ev("http", data={"method": "GET", "url": "http://h/items/2"}),
    ev("effect", tool={"name": "pay", "idempotency_key": "k"}, effect={"kind": "pay", "target": "o1"}),
    ev("policy.decision", data={"policy": "p", "group": "g"}),
    ev("retrieval", data={"query": "q"}),
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, len(_STEPS) - 1), max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, len(_STEPS) - 1)), max_size=2),
    st.booleans(),
)
def test_alignment_of_same_steps_equals_the_general_diff(
    steps: list[int], edits: list[tuple[int, int]], unordered: bool
) -> None:
    """Histories of the same steps in the same order are paired one to one without the diff; the answer is
    the diff's, whatever the histories (edited ones, groups, order-insensitive types take the diff)."""
    from pytest_agentreplay.diff import align

    recorded = numbered([_STEPS[n] for n in steps])
    replay_steps = list(steps)
    for position, step in edits:
        if position < len(replay_steps):
            replay_steps[position] = step
    replayed = numbered([_STEPS[n] for n in replay_steps])
    for event in replayed:
        event["data"] = {**event["data"], "latency_ms": 1.5}  # content differs, steps do not
    oi = ("retrieval",) if unordered else ()
    fast = align.align_histories(recorded, replayed, order_insensitive_types=oi)
    original = align._same_steps
    align._same_steps = lambda *args: False
    try:
        general = align.align_histories(recorded, replayed, order_insensitive_types=oi)
    finally:
        align._same_steps = original
    assert fast == general


def test_same_identity_at_once_is_what_the_identities_say() -> None:
    """``align._same_identity`` answers at once when what an identity is made of is the same objects on
    both sides, else by the identities: the two answers agree, the tricky cases included."""
    url = "http://svc/items/1?page=2"

    def get(**data: Any) -> dict[str, Any]:
        return ev("http", data={"method": "GET", "url": url, **data})

    def call(**data: Any) -> dict[str, Any]:
        return ev("model.call", data={"provider": "openai", "endpoint": "chat", **data})

    cases = [
        (get(), get()),
        # Another query, another case of the scheme: one identity; another path: not.
        (get(), get(url=url + "x")),
        (get(), get(url="HTTP" + url[4:])),
        (get(), get(url=url[:-7])),
        (get(), get(method="POST")),
        (get(), get(method=None)),
        (get(url=[1]), get(url=[True])),
        (call(), call()),
        (call(), call(endpoint=None)),
        (call(provider=1), call(provider=True)),
        (ev("effect", effect={"kind": "post", "target": "a"}), ev("effect", effect={"kind": "post"})),
    ]
    shared = {"method": "GET", "url": url}
    keyed = [
        ev("http", data=shared, tool={"name": "t", "idempotency_key": "k1"}),
        ev("http", data=shared, tool={"name": "t", "idempotency_key": "k2"}),
        ev("http", data=shared, tool={"name": "t"}),
    ]
    cases += [(a, b) for a in keyed for b in keyed]
    cases += [(ev("http", data=shared), ev("http", data=dict(shared)))]
    # One tool object on both sides (a replayed event holds its twin's), its data the same or not.
    tool = {"name": "t", "idempotency_key": "k1"}
    cases += [(ev("http", data=shared, tool=tool), ev("http", data=d, tool=tool)) for d in (shared, {})]
    for a, b in cases:
        want = identity(a) == identity(b)
        assert _same_identity(a["type"], a, b) is want, (a, b)
        assert _same_identity(a["type"], b, a) is want, (b, a)


def test_same_steps_asks_for_groups_as_the_general_diff_does() -> None:
    """``align._same_steps`` asks what an event's group is only when its data holds one: a group that is a
    bool is none, one that is 0 or an object is one; on either side, beside data that is no object."""
    from pytest_agentreplay.diff import align

    def step(group: Any) -> dict[str, Any]:
        data = {"arguments": {}} if group is None else {"arguments": {}, "group": group}
        return ev("tool.call", tool={"name": "a"}, data=data)

    values: list[Any] = [None, False, True, 0, "", "g", {"x": 1}, [1]]
    for left, right in itertools.product(values, repeat=2):
        recorded = [step(left), ev("run.end", data=None)]
        replayed = [step(right), ev("run.end", data=[1])]
        fast = align.align_histories(recorded, replayed)
        original = align._same_steps
        align._same_steps = lambda *args: False
        try:
            general = align.align_histories(recorded, replayed)
        finally:
            align._same_steps = original
        assert fast == general, (left, right)


def test_a_name_that_is_a_list_or_an_object_aligns_instead_of_crashing() -> None:
    # What names a step is free-form data in a cassette: a hand-edited one may hold a list or an object there.
    steps = [
        ev("policy.decision", data={"policy": ["refunds", "eu"]}),
        ev("approval", data={"subject": {"order": 7}}),
        ev("http", data={"method": ["GET"], "url": "http://api.test/a"}),
        ev("model.call", data={"provider": ["openai"], "endpoint": {"path": "/v1/chat"}}),
        ev("effect", effect={"kind": ["email"], "target": ["a@b.test"]}),
        ev("tool.call", tool={"name": ["lookup"]}),
    ]
    everything = RuleSet.from_layers("regression", project={"*:**": "regression"})
    for step in steps:
        changed = copy.deepcopy(step)
        changed["data"] = {**changed["data"], "note": "changed"}
        # A step before it only in the replay: the general alignment, not the same-steps shortcut.
        result = compare_histories([step], [ev("run.start"), changed], rules=everything)
        kinds = sorted(d.kind for d in result.differences)
        assert kinds == ["changed", "inserted"], (step, kinds)
        assert identity(step) == identity(changed) and hash(identity(step))
