"""Runtime values as the ``runtime.values`` event stores them: the event's data read back per stream (key
order restored), and its line in a timeline. The sources a setting chooses are core's
(:mod:`..core.constants`: the settings read them); the recording and serving itself is
:mod:`.values`."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from typing import Any, Final

from ..core.canonical import in_key_order, key_order

EVENT_TYPE: Final = "runtime.values"


def describe_data(data: Mapping[str, Any]) -> str:
    """One line for the timeline: ``clock 3 reads from 2026-11-30T14:57:28Z, uuid 5, random, values: seq``."""
    parts: list[str] = []
    reads = data.get("reads") or {}

    def total(source: str) -> int:
        return sum(sum(m.values()) for m in (reads.get(source) or {}).values() if isinstance(m, dict))

    clock = data.get("clock") or {}
    if clock:
        parts.append(f"clock {total('clock')} read(s) from {str(clock.get('start', '?'))[:19]}Z")
    if data.get("uuid"):
        parts.append(f"uuid {total('uuid')}")
    if data.get("random"):
        parts.append(f"random seed {data['random'].get('seed')}")
    if data.get("values"):
        parts.append("values " + ", ".join(sorted(data["values"])))
    streams = sorted({s for src in ("clock", "uuid") for s in (reads.get(src) or {})})
    where = f" in {', '.join(streams)}" if len(streams) > 1 else ""
    return (", ".join(parts) or "nothing read") + where


def recorded_streams(recorded: Mapping[str, Any]) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """Per stream name, per source (``clock`` in absolute us, ``uuid``, ``values``), per module or value
    name: the recorded values."""
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    clock = recorded.get("clock") or {}
    start = int(clock.get("start_us", 0))
    for name, by_module in (clock.get("streams") or {}).items():
        for module, offsets in by_module.items():
            offsets = offsets.split() if isinstance(offsets, str) else offsets
            absolute = list(accumulate(map(int, offsets), initial=start))[1:]
            out.setdefault(name, {}).setdefault("clock", {})[module] = absolute
    for name, by_module in (recorded.get("uuid") or {}).items():
        for module, uuids in by_module.items():
            out.setdefault(name, {}).setdefault("uuid", {})[module] = [str(u) for u in uuids]
    orders = recorded.get("key_order") or {}
    for value_name, per_stream in (recorded.get("values") or {}).items():
        for name, drawn in per_stream.items():
            order = (orders.get(value_name) or {}).get(name) or {}
            served = [in_key_order(v, order.get(str(i))) for i, v in enumerate(drawn)]
            out.setdefault(name, {}).setdefault("values", {})[value_name] = served
    return out


def values_key_order(values: Mapping[str, Mapping[str, list[Any]]]) -> dict[str, Any]:
    """``key_order`` of the event: name -> stream -> index -> the recorded key order of that value (stored
    with sorted keys, served back in this order)."""
    out: dict[str, Any] = {}
    for name, per_stream in values.items():
        for stream, drawn in per_stream.items():
            for index, value in enumerate(drawn):
                if order := key_order(value):
                    out.setdefault(name, {}).setdefault(stream, {})[str(index)] = order
    return out
