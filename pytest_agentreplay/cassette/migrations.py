"""Upgrades of older cassette formats, applied in memory on load and on disk only by `agentreplay migrate`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..core.canonical import hash_value
from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_VERSION
from ..core.documents import Document
from ..exceptions import CassetteIntegrityError, CassetteSchemaError
from .chain import ChainProblem, build_document, integrity_problems, order_problems, seal_document
from .parsing import test_hint


def _fixes(doc: Document, source: str) -> list[str]:
    return ["restore the cassette from git", rerecord_fix(test_hint(doc), source)]


def _checked_shape(
    doc: Document, source: str, version: int, newer: tuple[str, ...], newer_in_events: tuple[str, ...] = ()
) -> tuple[Document, list[Document]]:
    """The ``run`` and ``events`` of a version-``version`` document, refusing fields of a newer version: a
    newer file relabelled as older would be migrated afresh and so hide an edit."""

    def refused(headline: str, place: str, evidence: Sequence[str] = ()) -> CassetteSchemaError:
        return CassetteSchemaError(
            headline, evidence=evidence, cassette=source, place=place, fixes=_fixes(doc, source)
        )

    present = [key for key in newer if key in doc]
    if present:
        s = "s " if len(present) > 1 else " "
        raise refused(
            f"version-{version} cassette has the version-{version + 1} field{s}" + ", ".join(present),
            "version",
            ["the version number was probably edited"],
        )
    run, events = doc.get("run"), doc.get("events")
    if not isinstance(run, dict) or not isinstance(events, list):
        raise refused(
            f"version-{version} cassette needs a `run` object and an `events` list",
            "run" if not isinstance(run, dict) else "events",
        )
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise refused(f"events[{index}] is not an object", f"events[{index}]")
        for key in newer_in_events:
            if key in event:
                raise refused(
                    f"version-{version} cassette has a version-{version + 1} field {key}",
                    f"events[{index}].{key}",
                )
    return run, events


def _refuse_broken(
    doc: Document, source: str, version: int, check: str, problems: list[ChainProblem]
) -> None:
    """Nothing is migrated that fails its own version's check: an upgrade would seal the edit."""
    if not problems:
        return
    first = problems[0].index
    raise CassetteIntegrityError(
        f"version-{version} cassette {Path(source).name} fails its {check}: it was edited, reordered "
        "or truncated, so it is not migrated",
        evidence=[problem.message for problem in problems[:5]],
        cassette=source,
        place=f"event seq {first} (events[{first}])" if first is not None else "header",
        fixes=_fixes(doc, source),
    )


def _v1_to_v2(doc: Document, source: str) -> Document:
    """Version 1 had no hash chain; the chain is computed from the content as it is now."""
    run, events = _checked_shape(
        doc, source, 1, ("event_count", "head_hash", "event_digests"), ("prev_hash",)
    )
    prev = hash_value(run)
    chained: list[Document] = []
    for event in events:
        linked = {**event, "prev_hash": prev}
        prev = hash_value(linked)
        chained.append(linked)
    return {**doc, "version": 2, "events": chained, "event_count": len(chained), "head_hash": prev}


def _v2_chain_problems(run: object, events: list[Document], doc: Document) -> list[ChainProblem]:
    order = order_problems(events, doc.get("event_count"), None)
    problems = [problem for problem in order if problem.index is not None]
    for index, event in enumerate(events):
        if event.get("prev_hash") != hash_value(events[index - 1] if index else run):
            problems.append(
                ChainProblem(0, "seq 0 does not chain to the run header: the run metadata was edited")
                if index == 0
                else ChainProblem(
                    index - 1,
                    f"hash chain broken at seq {index}: seq {index - 1} was edited, or events between "
                    "them were removed or reordered",
                )
            )
    problems.extend(problem for problem in order if problem.index is None)
    if doc.get("head_hash") != (hash_value(events[-1]) if events else hash_value(run)):
        problems.append(
            ChainProblem(
                len(events) - 1 if events else None,
                "head_hash does not match the last event: it was edited, or events were removed from the end",
            )
        )
    return problems


def _v2_to_v3(doc: Document, source: str) -> Document:
    """Version 2 chained each event to its predecessor (``prev_hash``): one change rewrote every later line.
    Checked as version 2 defines it, then sealed per event."""
    run, events = _checked_shape(doc, source, 2, ("event_digests",))
    _refuse_broken(doc, source, 2, "hash-chain check", _v2_chain_problems(run, events, doc))
    unchained = [{k: v for k, v in event.items() if k != "prev_hash"} for event in events]
    upgraded = seal_document(run, unchained, version=3)
    return {**{k: v for k, v in doc.items() if k not in upgraded}, **upgraded}


def _v3_to_v4(doc: Document, source: str) -> Document:
    """Version 3 stored every event whole (a conversation's history in every request). Checked as version 3
    defines it, then written in the stored form (blob-stored requests stay there, ending delta encoding)."""
    run, events = _checked_shape(doc, source, 3, ())
    _refuse_broken(doc, source, 3, "integrity check", integrity_problems(doc, version=3))
    upgraded = build_document(run, events)
    return {**{k: v for k, v in doc.items() if k not in upgraded}, **upgraded}


# From-version -> function producing the next version.
MIGRATIONS: dict[int, Callable[[Document, str], Document]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


def migrate_document(doc: Document, source: str = "<memory>") -> Document:
    version = doc["version"]
    while version < FORMAT_VERSION:
        doc = MIGRATIONS[version](doc, source)
        version = doc["version"]
    return doc
