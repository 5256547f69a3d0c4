"""Upgrades of older cassette formats, applied in memory on load and on disk only by `agentreplay migrate`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.canonical import hash_value
from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_VERSION
from ..core.documents import Document
from ..exceptions import CassetteIntegrityError, CassetteSchemaError
from .chain import integrity_problems, seal_document
from .document import build_document

Migration = Callable[[Document, str], Document]

# Top-level fields of version 2 and later: a version-1 file holds none of them.
_V2_ONLY_TOP = ("event_count", "head_hash", "event_digests")


def _recorded_test(doc: Document) -> str | None:
    run = doc.get("run") if isinstance(doc, dict) else None
    test = run.get("test") if isinstance(run, dict) else None
    return test if isinstance(test, str) else None


def _check_shape(
    doc: Document, source: str, version: int, newer_fields: list[str], fixes: list[str]
) -> tuple[Document, list[object]]:
    """The ``run`` and ``events`` of a version-``version`` document, refusing fields of a newer version.

    A newer file relabelled as older would be migrated afresh and so hide an edit.
    """
    present = [key for key in newer_fields if key in doc]
    if present:
        raise CassetteSchemaError(
            f"version-{version} cassette has the version-{version + 1} field"
            + ("s " if len(present) > 1 else " ")
            + ", ".join(present),
            evidence=["the version number was probably edited"],
            cassette=source,
            place="version",
            fixes=fixes,
        )
    run, events = doc.get("run"), doc.get("events")
    if not isinstance(run, dict) or not isinstance(events, list):
        raise CassetteSchemaError(
            f"version-{version} cassette needs a `run` object and an `events` list",
            cassette=source,
            place="run" if not isinstance(run, dict) else "events",
            fixes=fixes,
        )
    return run, events


def _event_objects(
    run: Document, events: list[object], source: str, fixes: list[str]
) -> tuple[Document, list[Document]]:
    """``run`` and ``events`` once every event is a JSON object (else: the first that is not, named)."""
    objects: list[Document] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise CassetteSchemaError(
                f"events[{index}] is not an object", cassette=source, place=f"events[{index}]", fixes=fixes
            )
        objects.append(event)
    return run, objects


def _v1_to_v2(doc: Document, source: str) -> Document:
    """Version 1 had no hash chain; the chain is computed from the content as it is now."""
    fixes = ["restore the cassette from git", rerecord_fix(_recorded_test(doc), source)]
    run, events = _check_shape(doc, source, 1, list(_V2_ONLY_TOP), fixes)
    prev = hash_value(run)
    chained: list[Document] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise CassetteSchemaError(
                f"events[{index}] is not an object", cassette=source, place=f"events[{index}]", fixes=fixes
            )
        if "prev_hash" in event:
            raise CassetteSchemaError(
                "version-1 cassette has a version-2 field prev_hash",
                cassette=source,
                place=f"events[{index}].prev_hash",
                fixes=fixes,
            )
        linked = {**event, "prev_hash": prev}
        prev = hash_value(linked)
        chained.append(linked)
    return {**doc, "version": 2, "events": chained, "event_count": len(chained), "head_hash": prev}


def _v2_chain_problems(run: object, events: list[Document], doc: Document) -> list[tuple[int | None, str]]:
    """The version-2 hash chain check (``prev_hash`` per event, ``head_hash`` over the last event)."""
    problems: list[tuple[int | None, str]] = []
    for index, event in enumerate(events):
        if event.get("seq") != index:
            problems.append(
                (
                    index,
                    f"events[{index}] has seq {event.get('seq')!r} where seq {index} belongs: "
                    "events were reordered, removed or inserted",
                )
            )
            break
    expected = hash_value(run)
    for index, event in enumerate(events):
        if index:
            expected = hash_value(events[index - 1])
        if event.get("prev_hash") != expected:
            if index == 0:
                problems.append((0, "seq 0 does not chain to the run header: the run metadata was edited"))
            else:
                problems.append(
                    (
                        index - 1,
                        f"hash chain broken at seq {index}: seq {index - 1} was edited, or events between "
                        "them were removed or reordered",
                    )
                )
    if doc.get("event_count") != len(events):
        problems.append(
            (
                None,
                f"event_count is {doc.get('event_count')!r} but the file holds {len(events)} events: "
                "events were removed or added",
            )
        )
    head = hash_value(events[-1]) if events else hash_value(run)
    if doc.get("head_hash") != head:
        problems.append(
            (
                len(events) - 1 if events else None,
                "head_hash does not match the last event: it was edited, or events were removed from the end",
            )
        )
    return problems


def _v2_to_v3(doc: Document, source: str) -> Document:
    """Version 2 chained each event to its predecessor (``prev_hash``): one accepted change rewrote every
    later event's line. The chain is checked as version 2 defines it, then replaced by one digest per event
    (without its ``seq``) and a head digest over the run, the count and the ordered digests."""
    fixes = ["restore the cassette from git", rerecord_fix(_recorded_test(doc), source)]
    run, events = _event_objects(*_check_shape(doc, source, 2, ["event_digests"], fixes), source, fixes)
    problems = _v2_chain_problems(run, events, doc)
    if problems:
        first = problems[0][0]
        raise CassetteIntegrityError(
            f"version-2 cassette {Path(source).name} fails its hash-chain check: it was edited, reordered "
            "or truncated, so it is not migrated",
            evidence=[message for _, message in problems[:5]],
            cassette=source,
            place=f"event seq {first} (events[{first}])" if first is not None else "header",
            fixes=fixes,
        )
    unchained = [{k: v for k, v in event.items() if k != "prev_hash"} for event in events]
    upgraded = seal_document(run, unchained, version=3)
    return {**{k: v for k, v in doc.items() if k not in upgraded}, **upgraded}


def _v3_to_v4(doc: Document, source: str) -> Document:
    """Version 3 stored every event whole: a conversation's history again in every request. Its digests are
    checked as version 3 defines them, then the events are written in the version-4 stored form (requests
    as deltas over earlier ones, defaults left out) and sealed again. Requests kept in the blob store stay
    there (and end delta encoding from there on: the migration reads no blobs)."""
    fixes = ["restore the cassette from git", rerecord_fix(_recorded_test(doc), source)]
    run, events = _event_objects(*_check_shape(doc, source, 3, [], fixes), source, fixes)
    problems = integrity_problems(doc, version=3)
    if problems:
        first = problems[0].index
        raise CassetteIntegrityError(
            f"version-3 cassette {Path(source).name} fails its integrity check: it was edited, reordered "
            "or truncated, so it is not migrated",
            evidence=[problem.message for problem in problems[:5]],
            cassette=source,
            place=f"event seq {first} (events[{first}])" if first is not None else "header",
            fixes=fixes,
        )
    upgraded = build_document(run, events)
    return {**{k: v for k, v in doc.items() if k not in upgraded}, **upgraded}


# From-version -> function producing the next version.
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


def migrate_document(doc: Document, source: str = "<memory>") -> Document:
    """Apply every migration from ``doc["version"]`` up to the current format version."""
    version = doc["version"]
    while version < FORMAT_VERSION:
        doc = MIGRATIONS[version](doc, source)
        version = doc["version"]
    return doc
