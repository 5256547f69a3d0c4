"""Property tests: any history round-trips byte-identically; any damage is a CassetteError or invisible."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.constants import ACTORS, EVENT_CLASSES, EVENT_TYPES
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta, ToolInfo
from pytest_agentreplay.exceptions import CassetteError
from pytest_agentreplay.redaction import redact

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=40,
)
big_text = st.text(min_size=300, max_size=600)
payloads = st.one_of(
    st.none(),
    json_values,
    st.lists(
        st.dictionaries(
            st.sampled_from(["role", "content", "$blob", "$lit", "$chain", "api_key", "authorization"]),
            big_text | json_values,
            min_size=1,
            max_size=3,
        ),
        max_size=5,
    ),
)


@st.composite
def histories(draw: st.DrawFn) -> tuple[RunMeta, list[Event]]:
    run = RunMeta(
        run_id=draw(st.text(min_size=1, max_size=10)),
        agent=draw(st.none() | st.text(max_size=10)),
        decoding=draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
        labels=draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)),
    )
    events = []
    for seq in range(draw(st.integers(min_value=0, max_value=8))):
        fields: dict[str, Any] = {
            "run_id": run.run_id,
            "seq": seq,
            "ts": draw(st.text(max_size=25)),
            "type": draw(st.sampled_from(EVENT_TYPES)),
            "actor": draw(st.sampled_from(ACTORS)),
            "class": draw(st.sampled_from(EVENT_CLASSES)),
            "data": draw(st.dictionaries(st.text(max_size=10), json_values, max_size=4)),
            "trace_id": draw(st.none() | st.text(max_size=10)),
        }
        if fields["type"] in ("tool.call", "tool.result"):
            # Replay reads these fields of a tool event with their types (cassette/read.py): drawn
            # well-formed, the rest of the data as free as for any event.
            fields["tool"] = ToolInfo(name=draw(st.text(min_size=1, max_size=10)))
            typed = ("attempt", "arguments", "error", "exception")
            fields["data"] = {k: v for k, v in fields["data"].items() if k not in typed}
        for name in ("input_ref", "output_ref"):
            value = draw(payloads)
            if value is not None:
                fields[name] = PayloadRef(
                    inline=value, data_class=draw(st.sampled_from(["public", "internal"]))
                )
        events.append(Event.model_validate(fields))
    return run, events


@SETTINGS
@given(history=histories(), inline_limit=st.sampled_from([0, 64, 2048]))
def test_round_trip_is_byte_identical(history: tuple[RunMeta, list[Event]], inline_limit: int) -> None:
    # A fresh folder per example: hypothesis reruns the body, and function fixtures are not reset.
    with tempfile.TemporaryDirectory(prefix="agentreplay-prop-") as folder:
        check_round_trip(Path(folder) / "cassettes" / "c.json", history, inline_limit)


def check_round_trip(path: Path, history: tuple[RunMeta, list[Event]], inline_limit: int) -> None:
    run, events = history
    saved = save_cassette(path, run, events, inline_limit=inline_limit)
    first = path.read_bytes()
    loaded = load_cassette(path, verify_blobs=True)
    save_cassette(path, loaded.run, loaded.events, inline_limit=inline_limit)
    assert path.read_bytes() == first
    assert loaded.event_dicts() == saved.event_dicts()
    for original, event in zip(events, loaded.events, strict=True):
        for name in ("input_ref", "output_ref"):
            ref = getattr(original, name)
            expected = redact(ref.inline) if ref is not None else None
            assert loaded.payload(getattr(event, name)) == expected
    assert loaded.verify() == []


@pytest.fixture(scope="module")
def saved_cassette() -> Iterator[tuple[Path, bytes]]:
    folder = Path(tempfile.mkdtemp(prefix="agentreplay-corrupt-"))
    path = folder / "cassettes" / "c.json"
    events = [
        Event.model_validate(
            {
                "run_id": "r",
                "seq": i,
                "ts": "2025-01-01T00:00:00Z",
                "type": "tool.result",
                "actor": "tool",
                "class": "input",
                "data": {"n": i, "f": 0.5 + i, "s": "ünï\u2028\x1f", "l": [None, True, {"k": -1}]},
                "output_ref": PayloadRef(inline={"rows": list(range(i * 200))}),
            }
        )
        for i in range(4)
    ]
    save_cassette(path, RunMeta(run_id="r", decoding={"temperature": 0.2}), events)
    yield path, path.read_bytes()
    shutil.rmtree(folder, ignore_errors=True)


corruptions = st.one_of(
    st.tuples(st.just("flip"), st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
    st.tuples(st.just("truncate"), st.integers(min_value=0), st.just(0)),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.integers(min_value=1, max_value=40)),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
)


def corrupt(data: bytes, kind: str, where: int, arg: int) -> bytes:
    at = where % max(1, len(data))
    if kind == "flip":
        return data[:at] + bytes([arg]) + data[at + 1 :]
    if kind == "truncate":
        return data[:at]
    if kind == "delete":
        return data[:at] + data[at + arg :]
    return data[:at] + bytes([arg]) + data[at:]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(damage=st.lists(corruptions, min_size=1, max_size=3))
def test_corruption_raises_only_cassette_errors(
    saved_cassette: tuple[Path, bytes], damage: list[Any]
) -> None:
    path, original = saved_cassette
    data = original
    for kind, where, arg in damage:
        data = corrupt(data, kind, where, arg)
    path.write_bytes(data)
    try:
        loaded = load_cassette(path, verify_blobs=True)
    except CassetteError:
        return
    finally:
        path.write_bytes(original)
    # Loaded fine: the damage must have been invisible (whitespace, or bytes inside a no-op position).
    assert [e.model_dump() for e in loaded.events] == [e.model_dump() for e in load_cassette(path).events]
    assert json.loads(data) == json.loads(original)
