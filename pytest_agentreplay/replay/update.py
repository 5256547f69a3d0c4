"""Accepting drift: the new expected history, written so that the cassette diff shows only the change.

Replayed events take the place of the recorded ones, but each keeps the volatile values (timestamp, trace
ids, latency, provider response ids) of the recorded event it is aligned with, so unchanged events are
written byte for byte as before and a reviewer sees the real change (plus one digest line per changed
event and ``head_hash``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.events import Event, event_to_dict
from ..diff.align import align_histories

_ENVELOPE_KEEP = ("ts", "trace_id", "span_id")
_DATA_KEEP = ("latency_ms", "response_id", "duration_ms")


def merge_for_update(recorded: Sequence[Event], replayed: Sequence[Event], run_id: str) -> list[Event]:
    alignment = align_histories([event_to_dict(e) for e in recorded], [event_to_dict(e) for e in replayed])
    partner: dict[int, int] = {j: i for i, j in (*alignment.pairs, *alignment.moved)}
    merged: list[Event] = []
    for index, event in enumerate(replayed):
        update: dict[str, Any] = {"run_id": run_id, "seq": index}
        i = partner.get(index)
        if i is not None:
            old = recorded[i]
            for name in _ENVELOPE_KEEP:
                update[name] = getattr(old, name)
            data = dict(event.data)
            for key in _DATA_KEEP:
                if key in old.data and key in data:
                    data[key] = old.data[key]
            update["data"] = data
        merged.append(event.model_copy(update=update))
    return merged
