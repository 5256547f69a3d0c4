"""Audit mode: verify a recorded run without executing anything, and render it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.events import Event

if TYPE_CHECKING:
    from ..cassette.read import LoadedCassette


def effect_problems(events: list[Event]) -> list[str]:
    """Every committed effect must carry an idempotency key and a receipt."""
    problems = []
    for event in events:
        if event.type != "effect" or event.effect is None or not event.effect.committed:
            continue
        label = f"seq {event.seq} effect {event.effect.kind}"
        if event.tool is None or not event.tool.idempotency_key:
            problems.append(f"{label}: committed without an idempotency key")
        if event.effect.receipt in (None, "", {}, []):
            problems.append(f"{label}: committed without a receipt")
    return problems


def audit_problems(cassette: LoadedCassette) -> list[str]:
    return [*cassette.verify(), *effect_problems(cassette.events)]
