"""Accepting drift: replayed events replace the recorded ones, each keeping the volatile values (timestamp,
trace ids, latency, response ids) of the recorded event it is aligned with, so unchanged events are
written byte for byte and the cassette diff shows only the change.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.documents import Document
from ..diff.align import align_histories
from ..redaction import RedactedEvent

_ENVELOPE_KEEP = ("ts", "trace_id", "span_id")
_DATA_KEEP = ("latency_ms", "response_id", "duration_ms")


def merge_for_update(
    recorded: Sequence[Document], replayed: Sequence[RedactedEvent], run_id: str
) -> list[RedactedEvent]:
    alignment = align_histories(recorded, [view.doc for view in replayed])
    partner: dict[int, int] = {j: i for i, j in (*alignment.pairs, *alignment.moved)}
    merged: list[RedactedEvent] = []
    for index, view in enumerate(replayed):
        values: dict[str, object] = {"run_id": run_id, "seq": index}
        data: dict[str, object] = {}
        i = partner.get(index)
        if i is not None:
            old = recorded[i]
            values.update((name, old.get(name)) for name in _ENVELOPE_KEEP)
            old_data, new_data = old.get("data") or {}, view.doc.get("data") or {}
            data = {key: old_data[key] for key in _DATA_KEEP if key in old_data and key in new_data}
        merged.append(view.restamped(values, data))
    return merged


def rerecorded_events(
    recorded: Sequence[Document], replayed: Sequence[RedactedEvent], at: int, run_id: str
) -> list[RedactedEvent]:
    """A re-recording from its first drift (``--agentreplay-record=drifted``): the events before ``at``
    as the cassette holds them (each keeps its recorded time, ids and timings, so its line and digest are
    unchanged), then the tail recorded live, as it happened."""
    events = merge_for_update(recorded, replayed[:at], run_id)
    events.extend(
        view.restamped({"run_id": run_id, "seq": seq}, {}) for seq, view in enumerate(replayed[at:], at)
    )
    return events
