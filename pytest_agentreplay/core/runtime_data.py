"""Runtime values as settings name them and as the ``runtime.values`` event stores them: the sources a
setting chooses, the event's data read back per stream (key order restored), and its line in a timeline.
The recording and serving itself is :mod:`.runtime_values`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..exceptions import ConfigError
from .canonical import in_key_order, key_order

if TYPE_CHECKING:
    from .capture import RunContext

EVENT_TYPE: Final = "runtime.values"
SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES
_OFF_WORDS: Final = ("none", "off", "false", "0")


# ------------------------------------------------------------------------------------------- settings


def parse_sources(value: Any, where: str) -> tuple[str, ...] | None:
    """The sources a setting names, ``()`` when it turns runtime values off, ``None`` when not given.

    Accepts ``"clock uuid random"`` (spaces or commas), a list, ``true`` (all), ``false``/``""``/``[]``/
    ``"none"``/``"off"`` (off). Raises ``ConfigError`` listing the valid values.
    """
    if value is None:
        return None
    if value is True:
        return DEFAULT_SOURCES
    if value is False:
        return ()
    if isinstance(value, str):
        parts = [p for p in value.replace(",", " ").split() if p]
    elif isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        parts = []
        for item in value:
            if not isinstance(item, str):
                raise _config_error(repr(value), where)
            parts.extend(p for p in item.replace(",", " ").split() if p)
    else:
        raise _config_error(repr(value), where)
    if len(parts) == 1 and parts[0].lower() in _OFF_WORDS:
        return ()
    unknown = [p for p in parts if p not in SOURCES]
    if unknown:
        raise _config_error(", ".join(map(repr, unknown)), where)
    return tuple(s for s in SOURCES if s in parts)


def _config_error(got: str, where: str) -> ConfigError:
    return ConfigError(
        f"invalid runtime_values {got} in {where}",
        evidence=[f"valid values: {', '.join(SOURCES)} (any of them, space-separated; empty turns it off)"],
        fixes=['use e.g. runtime_values = "clock uuid random", "clock", or "" to turn it off'],
    )


# ------------------------------------------------------------------------------------- the event


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


def iso_us(us: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def deltas(values: list[int], start: int) -> list[int]:
    out: list[int] = []
    prev = start
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def recorded_streams(recorded: Mapping[str, Any]) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """Per stream name, per source (``clock`` in absolute us, ``uuid``, ``values``), per module or value
    name: the recorded values."""
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    clock = recorded.get("clock") or {}
    start = int(clock.get("start_us", 0))
    for name, by_module in (clock.get("streams") or {}).items():
        for module, deltas in by_module.items():
            absolute: list[int] = []
            prev = start
            for d in deltas.split() if isinstance(deltas, str) else deltas:
                prev += int(d)
                absolute.append(prev)
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


def recorded_data(ctx: RunContext) -> dict[str, Any] | None:
    """The data of the recorded run's ``runtime.values`` event (replay), if it has one."""
    if ctx.recorded is None:
        return None
    for event in reversed(ctx.recorded.events):
        if event.type == EVENT_TYPE:
            return dict(event.data)
    return None
