"""``@tool`` values round-trip with their type (core/tool_values.py, tool_encode.py, tool_decode.py,
tool_calls.py).

Unit tests of the codec (every kind stored and rebuilt, plain JSON stored as before, a user's dict holding
the reserved key escaped, refusals naming the place and type, damaged tags, hostile class paths, the codec
registry, exceptions), then inner pytest sessions (pytester) recording ``@tool`` functions with
``--agentreplay-record=all`` and replaying them with plain pytest: every value comes back equal and of its
own type, generator and async generator tools replay item by item (an exception mid-iteration at the same
point), a ``KeyError`` is caught by ``except KeyError``, a value replay could not rebuild is refused while
recording, and a re-sealed cassette whose tool call's arguments became a list is refused by ``verify`` and by
the replay with the cassette error naming the event's seq and the field.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import enum
import importlib
import json
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pydantic
import pytest

import pytest_agentreplay
from pytest_agentreplay.cassette.chain import seal_document
from pytest_agentreplay.cassette.read import event_field_problem
from pytest_agentreplay.core.canonical import dumps_cassette
from pytest_agentreplay.core.tool_calls import tool_arguments
from pytest_agentreplay.core.tool_decode import decode, rebuild_exception, stream_parts
from pytest_agentreplay.core.tool_encode import Encoder, exception_doc
from pytest_agentreplay.core.tool_values import TAG, NotRebuilt, Unstorable, register_tool_codec
from pytest_agentreplay.exceptions import RecordedToolError


def _preload() -> None:
    """The whole package imported in this (outer) process before any inner session: pytester restores
    ``sys.modules`` after each, and a module first imported inside one would come back as a second copy."""
    import pkgutil

    for info in pkgutil.walk_packages(pytest_agentreplay.__path__, "pytest_agentreplay."):
        with contextlib.suppress(ImportError):
            importlib.import_module(info.name)


_preload()


# -- the codec ---------------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Perm(enum.IntFlag):
    READ = 1
    WRITE = 2


class Order(pydantic.BaseModel):
    id: str
    placed: dt.datetime
    lines: tuple[str, ...] = ()
    note: str | None = pydantic.Field(default=None, alias="x-note")


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    when: dt.date
    tags: frozenset[str] = frozenset()


@dataclasses.dataclass
class Counted:
    name: str
    total: int = dataclasses.field(init=False, default=0)


class Point(NamedTuple):
    x: int
    y: int


class Name(str):
    pass


class Money:
    """A type of one's own (not a dataclass): stored through a registered codec."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents = cents
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (other.cents, other.currency)

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))


class NeedsTwo(Exception):
    def __init__(self, sku: str, count: int) -> None:
        super().__init__(f"{sku} x{count}")


WHEN = dt.datetime(2025, 1, 31, 12, 0, tzinfo=dt.UTC)
counted = Counted("a")
counted.total = 3

ROUND_TRIPS: list[object] = [
    (1, "a", (2, 3)),
    (),
    {3, 1, 2},
    frozenset({"x", "y"}),
    {1: "one", 2: "two"},
    {(1, 2): "pair", None: "none"},
    {TAG: "not a tag", "n": 1},
    b"\x00\xffbytes",
    bytearray(b"mutable"),
    float("inf"),
    float("-inf"),
    WHEN,
    dt.datetime(2025, 3, 30, 2, 30),
    dt.datetime(2025, 10, 26, 2, 30, tzinfo=ZoneInfo("Europe/Paris"), fold=1),
    dt.date(2025, 1, 31),
    dt.time(8, 30, 15, 250),
    dt.timedelta(days=-2, seconds=5, microseconds=7),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    Decimal("10.50"),
    Decimal("-0"),
    Color.BLUE,
    Perm.READ | Perm.WRITE,
    Order(id="A1", placed=WHEN, lines=("x", "y"), **{"x-note": "gift"}),
    Line("A1", 2, dt.date(2025, 1, 31), frozenset({"a", "b"})),
    counted,
    Point(1, 2),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.Counter("hello"),
    Name("ada"),
    PurePosixPath("/srv/data.csv"),
    Path("/tmp"),
    [{"orders": [Order(id="B", placed=WHEN)], "at": (WHEN, b"x")}, {1: {2: (3,)}}],
]


def _stored(value: object) -> object:
    """Stored and read back as a cassette holds it (JSON text, no NaN)."""
    return json.loads(json.dumps(Encoder().store(value), allow_nan=False))


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=lambda v: type(v).__name__)
def test_each_kind_comes_back_equal_and_of_its_type(value: object) -> None:
    back = decode(_stored(value))
    assert type(back) is type(value)
    assert back == value
    if isinstance(value, dict):
        assert list(back) == list(value)  # type: ignore[arg-type]
    if isinstance(value, dt.datetime | dt.time):
        assert back.tzinfo == value.tzinfo and back.fold == value.fold  # type: ignore[attr-defined]


def test_nested_values_keep_their_types_all_the_way_down() -> None:
    value = ROUND_TRIPS[-1]
    back: Any = decode(_stored(value))
    assert type(back[0]["orders"][0]) is Order
    assert type(back[0]["at"]) is tuple and type(back[0]["at"][1]) is bytes
    assert type(back[1][1][2]) is tuple


def test_nan_comes_back_as_nan() -> None:
    back = decode(_stored(float("nan")))
    assert type(back) is float and back != back


@pytest.mark.parametrize(
    "value",
    [{"b": 1, "a": [1, 2.5, None, True, "s", {"z": {}}]}, [1, "x"], "text", 3, 2.5, None, True, {}],
)
def test_plain_json_is_stored_as_it_is(value: object) -> None:
    encoder = Encoder()
    stored = encoder.store(value)
    assert stored == value and json.dumps(stored) == json.dumps(value)  # key order too
    assert not encoder.tagged
    assert decode(stored) is stored  # nothing to rebuild: given back as it is


def test_a_users_dict_holding_the_reserved_key_is_escaped() -> None:
    value = {TAG: "tuple", "items": [1, 2]}  # looks like a tag: must not read as one
    stored: Any = Encoder().store(value)
    assert stored == {TAG: "dict", "items": [[TAG, "tuple"], ["items", [1, 2]]]}
    back = decode(json.loads(json.dumps(stored)))
    assert back == value and type(back) is dict


def test_sets_are_stored_in_one_order() -> None:
    assert (
        Encoder().store({"b", "a", "c"})
        == Encoder().store({"c", "a", "b"})
        == {
            TAG: "set",
            "items": ["a", "b", "c"],
        }
    )


def test_tagged_objects_are_written_with_sorted_keys() -> None:
    stored: Any = Encoder().store(Order(id="A", placed=WHEN))
    assert list(stored) == sorted(stored) == [TAG, "class", "value"]
    assert stored["class"] == f"{__name__}:Order"


class Opaque:
    pass


def _local_instance() -> object:
    @dataclasses.dataclass
    class Row:
        a: int

    return Row(1)


@pytest.mark.parametrize(
    ("value", "where", "type_name", "reason"),
    [
        ({"rows": [Opaque()]}, "result['rows'][0]", f"{__name__}.Opaque", "not a JSON value"),
        (_local_instance(), "result", "<locals>.Row", "defined inside a function"),
        ((1, lambda: 2), "result[1]", "function", "not a JSON value"),
        (Line("A", 1, dt.date(2025, 1, 1), frozenset({Opaque()})), "result.tags[0]", "Opaque", "not a JSON"),
        ([iter([1])], "result[0]", "list_iterator", "not a JSON value"),
        ((x for x in [1]), "result", "generator", "only as a @tool's own result"),
    ],
)
def test_what_cannot_be_rebuilt_is_refused_naming_its_place_and_type(
    value: object, where: str, type_name: str, reason: str
) -> None:
    with pytest.raises(Unstorable) as info:
        Encoder().store(value)
    assert info.value.where == where
    assert type_name in info.value.type_name
    assert reason in info.value.reason


def test_an_open_file_is_refused() -> None:
    with open(__file__) as handle, pytest.raises(Unstorable, match="TextIOWrapper"):
        Encoder().store({"file": handle})


def test_a_model_that_does_not_validate_its_own_dump_is_refused() -> None:
    class_ = pydantic.create_model("Loose", value=(Any, ...), __module__=__name__)
    globals()["Loose"] = class_
    try:
        with pytest.raises(Unstorable, match="does not give an equal model back"):
            Encoder().store(class_(value=b"raw"))  # bytes in an Any field come back as str
    finally:
        del globals()["Loose"]


def test_arguments_fall_back_to_the_conversion_they_always_had() -> None:
    stored, legacy = tool_arguments({"when": WHEN, "span": (1, 2), "client": Opaque(), "n": 1})
    assert stored["when"] == {TAG: "datetime", "value": "2025-01-31T12:00:00+00:00"}
    assert stored["span"] == {TAG: "tuple", "items": [1, 2]}
    assert stored["client"] == {}  # vars() of the object, as before: arguments are matched, not rebuilt
    assert legacy is not None and legacy["span"] == [1, 2] and legacy["n"] == 1
    assert tool_arguments({"q": "x", "k": [1]}) == ({"q": "x", "k": [1]}, None)


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        ({TAG: "nope"}, "unknown $agentreplay kind 'nope'"),
        ({TAG: "tuple"}, "no 'items'"),
        ({TAG: "tuple", "items": "ab"}, "'items' is 'ab'"),
        ({TAG: "datetime", "value": "yesterday"}, "does not parse"),
        ({TAG: "bytes", "base64": "not base64!"}, "base64"),
        ({TAG: "float", "value": "1.5"}, "nan, inf or -inf"),
        ({TAG: "dict", "items": [[1]]}, "[key, value] pair"),
        ({TAG: "timedelta", "value": [1, 2]}, "days, seconds, microseconds"),
        ({"x": [{TAG: "generator", "items": [], "complete": True}]}, "whole result"),
    ],
)
def test_a_damaged_tag_is_a_cassette_problem(stored: object, reason: str) -> None:
    with pytest.raises(NotRebuilt) as info:
        decode(stored)
    assert info.value.damaged
    assert reason in str(info.value)


def test_a_damaged_tag_names_its_place() -> None:
    with pytest.raises(NotRebuilt) as info:
        decode({"orders": [1, {TAG: "uuid", "value": "x"}]}, "item 2")
    assert info.value.where == "item 2['orders'][1]"


@pytest.mark.parametrize(
    ("path", "kind", "reason"),
    [
        ("os:system", "instance", "is not a class"),
        ("subprocess:Popen", "instance", "not a class of this kind"),
        ("antigravity:Anything", "enum", "is not imported"),
        (f"{__name__}:Gone", "pydantic", "has no Gone"),
        (f"{__name__}:Order", "enum", "not a class of this kind"),
    ],
)
def test_a_class_path_names_only_an_imported_class_of_its_kind(path: str, kind: str, reason: str) -> None:
    with pytest.raises(NotRebuilt) as info:
        decode({TAG: kind, "class": path, "value": "ls"})
    assert reason in str(info.value)
    assert "antigravity" not in sys.modules


def test_a_model_that_changed_is_not_a_damaged_cassette() -> None:
    stored: Any = _stored(Order(id="A", placed=WHEN))
    stored["value"]["placed"] = "not a time"
    with pytest.raises(NotRebuilt) as info:
        decode(stored)
    assert not info.value.damaged and "ValidationError" in str(info.value)


def test_a_registered_codec_stores_a_type_of_ones_own() -> None:
    value = {"price": Money(1050, "EUR")}
    with pytest.raises(Unstorable, match="none of the kinds"):
        Encoder().store(value)
    register_tool_codec(Money, lambda m: (m.cents, m.currency), lambda v: Money(*v))
    try:
        stored: Any = _stored(value)
        assert stored["price"] == {
            TAG: "codec",
            "class": f"{__name__}:Money",
            "value": {TAG: "tuple", "items": [1050, "EUR"]},
        }
        back: Any = decode(stored)
        assert type(back["price"]) is Money and back == value
    finally:
        from pytest_agentreplay.core import tool_values

        tool_values._CODECS.pop(Money, None)
        tool_values._CODECS_BY_PATH.pop(f"{__name__}:Money", None)
    with pytest.raises(NotRebuilt, match="no codec is registered") as info:
        decode(stored)
    assert not info.value.damaged


def test_register_tool_codec_refuses_plain_json_types_and_non_classes() -> None:
    with pytest.raises(ValueError, match="plain JSON"):
        register_tool_codec(dict, lambda v: v, lambda v: v)
    with pytest.raises(TypeError, match="needs a class"):
        register_tool_codec("Money", lambda v: v, lambda v: v)  # type: ignore[arg-type]


def test_the_facade_exports_register_tool_codec() -> None:
    assert pytest_agentreplay.register_tool_codec is register_tool_codec
    assert "register_tool_codec" in pytest_agentreplay.__all__


@pytest.mark.parametrize(
    "exc",
    [KeyError("sku"), ValueError("bad", 2), FileNotFoundError(2, "No such file"), TimeoutError()],
    ids=lambda e: type(e).__name__,
)
def test_an_exception_whose_arguments_rebuild_it_comes_back_as_itself(exc: Exception) -> None:
    doc = json.loads(json.dumps(exception_doc(exc)))
    back = rebuild_exception(doc)
    assert type(back) is type(exc)
    assert back.args == exc.args and str(back) == str(exc)


@pytest.mark.parametrize(
    "exc",
    [NeedsTwo("A1", 2), OSError(2, "No such file", "/x"), ValueError(Opaque())],
    ids=["signature", "lost-filename", "opaque-arg"],
)
def test_an_exception_that_does_not_rebuild_is_not_stored_as_itself(exc: Exception) -> None:
    assert exception_doc(exc) is None


def test_an_exception_class_that_is_gone_is_not_rebuilt() -> None:
    assert rebuild_exception({"class": f"{__name__}:Gone", "args": []}) is None
    assert rebuild_exception({"class": "os:system", "args": ["ls"]}) is None
    assert rebuild_exception({"class": "builtins:int", "args": ["1"]}) is None


def test_recorded_tool_error_keeps_the_recorded_type_name() -> None:
    assert RecordedToolError("t", "KeyError: 'sku'").error_type == "KeyError"
    assert RecordedToolError("t", "boom", error_type="shop.Err").error_type == "shop.Err"
    assert RecordedToolError("t", "no type here").error_type is None


def test_stream_parts_checks_the_shape() -> None:
    assert stream_parts([1]) is None
    stream = stream_parts({TAG: "generator", "items": [1], "complete": True})
    assert stream is not None and stream.items == [1] and stream.complete
    with pytest.raises(NotRebuilt, match="'complete'"):
        stream_parts({TAG: "generator", "items": [1], "complete": 1})


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"type": "tool.call", "tool": {"name": "t"}, "data": {"arguments": [1, 2]}}, "data.arguments"),
        ({"type": "tool.call", "tool": None, "data": {"arguments": {}}}, "tool must be an object"),
        ({"type": "tool.call", "tool": {"name": "t"}, "data": {"attempt": "1"}}, "data.attempt"),
        ({"type": "tool.result", "tool": {"name": "t"}, "data": {"error": ["x"]}}, "data.error"),
        (
            {"type": "tool.result", "tool": {"name": "t"}, "data": {"exception": {"class": 1}}},
            "data.exception",
        ),
        # The checks of every event type come first, then the type's own (built once per type).
        ({"type": "model.call", "data": {"provider": {"x": 1}}}, "data.provider must be a string"),
        ({"type": "model.call", "data": {"group": [1], "provider": {}}}, "data.group"),
        ({"type": "some.new.type", "data": {"group": {}}}, "data.group"),
        ({"type": ["not", "a", "type"], "data": {"group": [], "provider": {}}}, "data.group"),
    ],
)
def test_tool_event_fields_are_checked(event: dict[str, Any], problem: str) -> None:
    ok = {"type": "tool.call", "tool": {"name": "t"}, "data": {"arguments": {"a": 1}, "attempt": 1}}
    found = event_field_problem([ok, {"type": "http"}, event])
    assert found is not None and found[0] == 2 and problem in found[1]
    assert event_field_problem([ok]) is None


def test_capture_run_never_breaks_the_code_it_watches(tmp_path: Path) -> None:
    """In production capture a value replay could not rebuild keeps the plain conversion: no error."""
    from pytest_agentreplay import capture_run, tool

    @tool
    def opaque() -> object:
        return Opaque()

    @tool
    def span() -> tuple[int, int]:
        return (1, 2)

    with capture_run(tmp_path / "run.json", intercept_http=False):
        assert type(opaque()) is Opaque
        assert span() == (1, 2)
    events = json.loads((tmp_path / "run.json").read_text())["events"]
    outputs = [e["output_ref"]["inline"] for e in events if e["type"] == "tool.result"]
    assert outputs == [{}, {TAG: "tuple", "items": [1, 2]}]


# -- recorded and replayed in inner sessions ----------------------------------------------------------

SHOP = r"""
import asyncio
import dataclasses
import datetime as dt
import enum
import os
import uuid
from decimal import Decimal
from typing import NamedTuple

import pydantic

from pytest_agentreplay import tool

CALLED = []
WHEN = dt.datetime(2025, 1, 31, 12, 0, tzinfo=dt.timezone.utc)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Order(pydantic.BaseModel):
    id: str
    placed: dt.datetime
    lines: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    when: dt.date
    tags: frozenset = frozenset()


class Point(NamedTuple):
    x: int
    y: int


class OutOfStock(Exception):
    pass


class NeedsTwo(Exception):
    def __init__(self, sku, count):
        super().__init__(f"{sku} x{count}")


class Opaque:
    pass


VALUES = {
    "model": Order(id="A1", placed=WHEN, lines=("x", "y")),
    "dataclass": Line("A1", 2, dt.date(2025, 1, 31), frozenset({"a", "b"})),
    "datetime": WHEN,
    "naive": dt.datetime(2025, 1, 31, 12, 30),
    "date": dt.date(2025, 1, 31),
    "time": dt.time(8, 30),
    "timedelta": dt.timedelta(hours=36),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": Decimal("10.50"),
    "bytes": b"%PDF-\x00\xff",
    "tuple": (1, "a", (2, 3)),
    "set": {3, 1, 2},
    "frozenset": frozenset({"x"}),
    "int_keys": {2: "two", 1: "one"},
    "enum": Color.BLUE,
    "namedtuple": Point(1, 2),
    "nested": {
        "orders": [Order(id="B2", placed=WHEN)],
        "at": (WHEN, b"x"),
        "by_day": {dt.date(2025, 1, 1): 3},
    },
    "tagged_key": {"$agentreplay": "not a tag", "n": 1},
    "plain": {"b": 1, "a": [1, 2.5, None, True, "s"]},
}


@tool
def fetch(kind):
    CALLED.append(kind)
    return VALUES[kind]


@tool
async def afetch(kind):
    CALLED.append("a" + kind)
    return VALUES[kind]


@tool
def window(start, span, days=frozenset({1})):
    CALLED.append("window")
    return [start + dt.timedelta(days=d) for d in span]


@tool
def pages(n):
    for i in range(n):
        CALLED.append(f"page {i}")
        yield (i, Order(id=f"P{i}", placed=WHEN))
    return "done"


@tool
def flaky_pages():
    CALLED.append("flaky")
    yield 1
    yield (2, 3)
    raise KeyError("page 3")


@tool
async def apages(n):
    for i in range(n):
        await asyncio.sleep(0)
        CALLED.append(f"apage {i}")
        yield {"i": i, "at": WHEN + dt.timedelta(days=i)}


@tool
def lookup(sku):
    CALLED.append("lookup")
    raise KeyError(sku)


@tool
def reserve(sku):
    CALLED.append("reserve")
    raise OutOfStock(sku, 3)


@tool
def reserve_two(sku):
    CALLED.append("reserve_two")
    raise NeedsTwo(sku, 2)


@tool
def opaque():
    return Opaque()


@tool
def local_row():
    @dataclasses.dataclass
    class Row:
        a: int

    return Row(1)


@tool
def handle():
    return open(__file__)


@tool
def gen_of_opaque():
    yield 1
    yield Opaque()
"""

TYPED_TEST = r"""
import asyncio
import datetime as dt

from shop import CALLED, VALUES, WHEN, afetch, fetch, window

KINDS = sorted(VALUES)


def test_typed(agent_replay):
    for kind in KINDS:
        got, want = fetch(kind), VALUES[kind]
        assert type(got) is type(want), (kind, type(got))
        assert got == want, kind
        if isinstance(want, dict):
            assert list(got) == list(want), kind
    nested = fetch("nested")
    assert type(nested["orders"][0]).__name__ == "Order" and type(nested["at"]) is tuple
    assert type(next(iter(nested["by_day"]))) is dt.date
    got = asyncio.run(afetch("model"))
    assert type(got) is type(VALUES["model"]) and got == VALUES["model"]
    days = window(WHEN, (0, 2))
    assert days == [WHEN, WHEN + dt.timedelta(days=2)] and type(days[1]) is dt.datetime
    expected = [*KINDS, "nested", "amodel", "window"] if agent_replay.recording else []
    assert CALLED == expected
"""


def _start(pytester: pytest.Pytester, test: str, name: str = "test_typed") -> Path:
    pytester.makepyfile(shop=SHOP)
    pytester.makepyfile(**{name: test})
    pytester.syspathinsert()
    return pytester.path / "cassettes" / name


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def _record_and_replay(pytester: pytest.Pytester, **outcomes: int) -> None:
    recorded = _run(pytester, "--agentreplay-record=all")
    recorded.assert_outcomes(**outcomes)
    _run(pytester).assert_outcomes(**outcomes)


def _events(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["events"])


def _tool_results(path: Path, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in _events(path)
        if e["type"] in ("tool.result", "effect") and (e.get("tool") or {}).get("name") == name
    ]


def test_tool_results_of_every_kind_replay_with_their_type(pytester: pytest.Pytester) -> None:
    folder = _start(pytester, TYPED_TEST)
    _record_and_replay(pytester, passed=1)
    cassette = folder / "test_typed.json"
    results = _tool_results(cassette, "fetch")
    by_kind = {}
    calls = [e for e in _events(cassette) if e["type"] == "tool.call" and e["tool"]["name"] == "fetch"]
    for call, result in zip(calls, results, strict=True):
        by_kind[call["data"]["arguments"]["kind"]] = result["output_ref"]
    # Plain JSON is stored as it always was (sorted keys, the tool's order beside them); typed values tagged.
    assert by_kind["plain"]["inline"] == {"a": [1, 2.5, None, True, "s"], "b": 1}
    assert by_kind["plain"]["key_order"] == {"": ["b", "a"]}
    assert by_kind["tuple"]["inline"][TAG] == "tuple"
    assert by_kind["model"]["inline"]["class"] == "shop:Order"
    assert by_kind["tagged_key"]["inline"][TAG] == "dict"
    window = next(e for e in _events(cassette) if e["type"] == "tool.call" and e["tool"]["name"] == "window")
    assert window["data"]["arguments"]["span"] == {TAG: "tuple", "items": [0, 2]}
    assert window["data"]["arguments"]["days"] == {TAG: "frozenset", "items": [1]}


STREAMS_TEST = r"""
import asyncio
import inspect
import os

import pytest

from shop import CALLED, Order, WHEN, apages, flaky_pages, pages


def test_streams(agent_replay):
    gen = pages(3)
    assert inspect.isgenerator(gen)
    items = []
    with pytest.raises(StopIteration) as stop:
        while True:
            items.append(next(gen))
    assert stop.value.value == "done"
    assert [type(i) for i in items] == [tuple] * 3
    assert items == [(i, Order(id=f"P{i}", placed=WHEN)) for i in range(3)]

    seen = []
    with pytest.raises(KeyError) as info:
        for item in flaky_pages():
            seen.append(item)
    assert seen == [1, (2, 3)] and type(seen[1]) is tuple
    assert type(info.value) is KeyError and info.value.args == ("page 3",)

    early = pages(5)
    assert next(early) == (0, Order(id="P0", placed=WHEN))
    if os.environ.get("ASK_MORE"):
        next(early)
    early.close()

    async def collect():
        agen = apages(2)
        assert inspect.isasyncgen(agen)
        return [item async for item in agen]

    got = asyncio.run(collect())
    assert got == [{"i": 0, "at": WHEN}, {"i": 1, "at": WHEN + __import__("datetime").timedelta(days=1)}]
    assert type(got[1]["at"]) is type(WHEN)
    if agent_replay.recording:
        assert CALLED == ["page 0", "page 1", "page 2", "flaky", "page 0", "apage 0", "apage 1"]
    else:
        assert CALLED == []
"""


def test_generator_and_async_generator_tools_replay_item_by_item(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _start(pytester, STREAMS_TEST, "test_streams")
    _record_and_replay(pytester, passed=1)
    cassette = folder / "test_streams.json"
    flaky = _tool_results(cassette, "flaky_pages")[0]
    assert flaky["output_ref"]["inline"] == {
        TAG: "generator",
        "complete": True,
        "items": [1, {TAG: "tuple", "items": [2, 3]}],
    }
    assert flaky["data"]["error"] == "KeyError: 'page 3'"
    assert flaky["data"]["exception"] == {"class": "builtins:KeyError", "args": ["page 3"]}
    early = _tool_results(cassette, "pages")[1]["output_ref"]["inline"]
    assert early["complete"] is False and len(early["items"]) == 1
    # The consumer now asks for more than the recording's consumer took: a clear replay error.
    monkeypatch.setenv("ASK_MORE", "1")
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "generator tool 'pages' yielded 1 item(s) while recording" in out, out


ERRORS_TEST = r"""
import pytest

from pytest_agentreplay import RecordedToolError
from shop import CALLED, NeedsTwo, OutOfStock, lookup, reserve, reserve_two


def test_errors(agent_replay):
    try:
        lookup("A1")
    except KeyError as exc:
        fallback = ("handled", exc.args)
    assert fallback == ("handled", ("A1",))
    with pytest.raises(OutOfStock) as info:
        reserve("A1")
    assert type(info.value) is OutOfStock and info.value.args == ("A1", 3)
    if agent_replay.recording:
        with pytest.raises(NeedsTwo):
            reserve_two("A1")
    else:
        with pytest.raises(RecordedToolError) as recorded:
            reserve_two("A1")
        assert recorded.value.error_type == "NeedsTwo"
        assert recorded.value.message == "NeedsTwo: A1 x2"
    assert CALLED == (["lookup", "reserve", "reserve_two"] if agent_replay.recording else [])
"""


def test_a_tool_exception_comes_back_as_its_own_type(pytester: pytest.Pytester) -> None:
    folder = _start(pytester, ERRORS_TEST, "test_errors")
    _record_and_replay(pytester, passed=1)
    lookup = _tool_results(folder / "test_errors.json", "lookup")[0]
    assert lookup["data"]["exception"] == {"class": "builtins:KeyError", "args": ["A1"]}
    assert "exception" not in _tool_results(folder / "test_errors.json", "reserve_two")[0]["data"]


REFUSED_TEST = r"""
import pytest

import shop


@pytest.mark.parametrize("name", ["opaque", "local_row", "handle", "gen_of_opaque"])
def test_refused(agent_replay, name):
    try:
        result = getattr(shop, name)()
        if name == "gen_of_opaque":
            list(result)
    except Exception:
        pass  # an agent that swallows the error: the test fails all the same
"""


def test_a_value_replay_could_not_rebuild_is_refused_while_recording(pytester: pytest.Pytester) -> None:
    folder = _start(pytester, REFUSED_TEST, "test_refused")
    result = _run(pytester, "--agentreplay-record=all")
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert "@tool 'opaque' returned a value that cannot be recorded so that replay gives it back" in out, out
    assert "result is of type shop.Opaque" in out
    assert "result is of type shop.local_row.<locals>.Row" in out and "defined inside a function" in out
    assert "result is of type _io.TextIOWrapper" in out
    assert "item 1 is of type shop.Opaque" in out
    assert "register_tool_codec" in out and "a pydantic model or a dataclass" in out
    assert not list(folder.glob("*.json"))


CODEC_CONFTEST = r"""
from pytest_agentreplay import register_tool_codec

import money

register_tool_codec(money.Money, lambda m: [m.cents, m.currency], lambda v: money.Money(*v))
"""

MONEY = r"""
from pytest_agentreplay import tool


class Money:
    def __init__(self, cents, currency):
        self.cents, self.currency = cents, currency

    def __eq__(self, other):
        return type(other) is Money and (self.cents, self.currency) == (other.cents, other.currency)


@tool
def price(sku):
    return {"sku": sku, "price": Money(1050, "EUR")}
"""

CODEC_TEST = r"""
from money import Money, price


def test_price(agent_replay):
    got = price("A1")
    assert type(got["price"]) is Money and got == {"sku": "A1", "price": Money(1050, "EUR")}
"""


def test_a_registered_codec_round_trips_through_a_cassette(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(money=MONEY, test_price=CODEC_TEST)
    pytester.makeconftest(CODEC_CONFTEST)
    pytester.syspathinsert()
    _record_and_replay(pytester, passed=1)


SEALED_TEST = r"""
from shop import fetch


def test_sealed(agent_replay):
    assert fetch("tuple") == (1, "a", (2, 3))
"""


def _edit_and_reseal(cassette: Path, edit: Any) -> int:
    doc = json.loads(cassette.read_text())
    seq = edit(doc["events"])
    cassette.write_text(dumps_cassette(seal_document(doc["run"], doc["events"])))
    return int(seq)


def _set_arguments_to_a_list(events: list[dict[str, Any]]) -> int:
    for index, event in enumerate(events):
        if event["type"] == "tool.call":
            event["data"]["arguments"] = ["tuple"]
            return index
    raise AssertionError("no tool.call")


def test_a_resealed_list_of_arguments_is_refused_by_verify_and_replay(pytester: pytest.Pytester) -> None:
    folder = _start(pytester, SEALED_TEST, "test_sealed")
    _run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    cassette = folder / "test_sealed.json"
    seq = _edit_and_reseal(cassette, _set_arguments_to_a_list)
    verify = subprocess.run(
        [sys.executable, "-m", "pytest_agentreplay.cli", "verify", str(cassette)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert f"event seq {seq}: data.arguments must be an object" in verify.stdout, verify.stdout
    assert "test_sealed.json" in verify.stdout
    result = _run(pytester)
    assert result.ret != 0
    out = result.stdout.str()
    assert f"event seq {seq}: data.arguments must be an object" in out, out
    assert "failed (corrupted-cassette" in out and "does not match the cassette schema" in out
    assert "test_sealed.json" in out and "AttributeError" not in out


def test_a_cassette_recorded_before_typed_values_still_replays(pytester: pytest.Pytester) -> None:
    """A tool call whose arguments were stored in the earlier form (a tuple as a list) is matched by it."""
    test = SEALED_TEST.replace(
        'fetch("tuple") == (1, "a", (2, 3))', "window(WHEN, (0, 1))[1] == WHEN + dt.timedelta(days=1)"
    )
    test = "import datetime as dt\nfrom shop import WHEN, window\n" + test
    folder = _start(pytester, test, "test_sealed")
    _run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    cassette = folder / "test_sealed.json"

    def legacy(events: list[dict[str, Any]]) -> int:
        call = next(e for e in events if e["type"] == "tool.call")
        call["data"]["arguments"] = {
            "start": "datetime.datetime(2025, 1, 31, 12, 0, tzinfo=datetime.timezone.utc)",
            "span": [0, 1],
            "days": [1],
        }
        return int(call["seq"])

    _edit_and_reseal(cassette, legacy)
    _run(pytester).assert_outcomes(passed=1)


def test_a_resealed_damaged_tag_fails_the_replay_naming_the_event(pytester: pytest.Pytester) -> None:
    folder = _start(pytester, SEALED_TEST, "test_sealed")
    _run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)

    def damage(events: list[dict[str, Any]]) -> int:
        result = next(e for e in events if e["type"] == "tool.result")
        result["output_ref"]["inline"] = {TAG: "tuple", "items": "not a list"}
        return int(result["seq"])

    seq = _edit_and_reseal(folder / "test_sealed.json", damage)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the recorded result of tool 'fetch' is damaged at result" in out, out
    assert f"event seq {seq} (events[{seq}]), field output_ref" in out
