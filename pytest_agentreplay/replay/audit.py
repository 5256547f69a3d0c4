"""Audit mode: verify a recorded run without executing anything, and render it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cassette.read import LoadedCassette


def audit_advice(cassette: LoadedCassette) -> list[str]:
    """What the record could prove better (``verify`` warns; ``--strict`` and audit mode fail on it): advice,
    not damage. A committed effect without an idempotency key or a receipt (a plain POST is the common case):
    replay still refuses to send it twice; a key and a receipt make the record prove what happened."""
    advice = []
    for event in cassette.events:
        if event.type != "effect" or event.effect is None or not event.effect.committed:
            continue
        label = f"seq {event.seq} effect {event.effect.kind}"
        if event.tool is None or not event.tool.idempotency_key:
            advice.append(f"{label}: committed without an idempotency key")
        if event.effect.receipt in (None, "", {}, []):
            advice.append(f"{label}: committed without a receipt")
    return advice
