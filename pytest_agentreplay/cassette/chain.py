"""The integrity chain of a cassette: one digest per stored event (without its ``seq``) and a head digest
over the run, the event count and the ordered digests, so an edit, a reordering or a truncation shows as a
named problem while an accepted change alters one event's line and the header. Also the sealed
current-format document of a run (saving, migrations), and its run redaction and secret scan."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import orjson

from ..core.canonical import hash_value, plain_compact, sha256_hex
from ..core.constants import FORMAT_NAME, FORMAT_VERSION
from ..core.documents import Document
from ..core.events import RunMeta
from ..redaction import Redactor, data_keys
from .blobs import BlobStore
from .stored_form import encode_events


class ChainProblem(NamedTuple):
    index: int | None  # type: ignore[assignment]  # the field, not tuple.index
    message: str


def integrity_problems(doc: Document, version: int = FORMAT_VERSION) -> list[ChainProblem]:
    """Every integrity problem of a document of ``version`` (3 or later), the first bad event first."""
    events: list[Document] = doc["events"]
    count = doc.get("event_count")
    claimed = doc.get("event_digests")
    digests: list[object] = claimed if isinstance(claimed, list) else []
    problems = order_problems(events, count, min(len(events), count) if isinstance(count, int) else None)
    if len(digests) != len(events):
        how = "removed from the end or from between others" if len(events) < len(digests) else "added"
        message = f"event_digests lists {len(digests)} digest(s) but the file holds {len(events)} events"
        problems.append(ChainProblem(min(len(events), len(digests)), f"{message}: events were {how}"))
    fasts = _fast_digests(events)
    # Every digest as claimed (one comparison of the lists): none of the events below is mismatched.
    pairs = () if fasts == digests else zip(events, fasts, digests, strict=False)
    for index, (event, fast, expected) in enumerate(pairs):
        if fast != expected and event_digest(event) != expected:
            problems.append(
                ChainProblem(
                    index,
                    f"event digest mismatch at seq {index}: seq {index} was edited, or events were reordered "
                    f"(it hashes to {event_digest(event)[:12]}..., event_digests[{index}] is "
                    f"{str(expected)[:12]}...)",
                )
            )
    if doc.get("head_hash") != head_digest(doc["run"], digests, count, version):
        problems.append(
            ChainProblem(
                None,
                "head_hash does not match the run header, event_count and event_digests: the run "
                "metadata was edited, or one of those header fields was, or events were removed from the end",
            )
        )
    return problems


def order_problems(events: list[Document], count: object, count_index: int | None) -> list[ChainProblem]:
    """The first event out of its place (``seq`` is its index) and a wrong ``event_count`` (named at
    ``count_index``): what every format version checks the same way."""
    problems: list[ChainProblem] = []
    first = next((index for index, event in enumerate(events) if event.get("seq") != index), None)
    if first is not None:
        seq = events[first].get("seq")
        message = f"events[{first}] has seq {seq!r} where seq {first} belongs: "
        problems.append(ChainProblem(first, message + "events were reordered, removed or inserted"))
    if count != len(events):
        message = f"event_count is {count!r} but the file holds {len(events)} events"
        problems.append(ChainProblem(count_index, message + ": events were removed or added"))
    return problems


def checked_integrity(version: int) -> str:
    """What loading a file of format ``version`` checked of its integrity (``show``, ``verify``)."""
    if version >= 3:
        sealed = "sealed: event digests and head_hash match"
        return sealed if version == FORMAT_VERSION else f"{sealed} (version {version})"
    if version == 2:
        return "hash chain intact (version 2: every prev_hash walked)"
    return f"version {version}: no integrity fields, nothing to check"


def event_digest(event: Mapping[str, object]) -> str:
    """sha256 of an event's canonical JSON without its ``seq`` (the order is bound by ``head_hash``)."""
    return hash_value({k: v for k, v in event.items() if k != "seq"})


def head_digest(run: object, digests: Sequence[object], count: object, version: int = FORMAT_VERSION) -> str:
    """sha256 of ``{version, run, event_count, event_digests}``: binds the header and the order of events."""
    head = {"version": version, "run": run, "event_count": count, "event_digests": list(digests)}
    return sha256_hex(plain_compact(head))  # hash_value's digest: plain_compact writes dumps_compact's text


def _fast_digests(events: list[Document]) -> list[str | None]:
    """Each event's digest serialized by orjson: for a parsed canonical file (keys sorted) the canonical
    JSON, 4x faster than json.dumps; None where it cannot. A disagreement with the stored digest (float
    spelling, 1e-07 vs 1e-7) is decided by ``event_digest``."""
    dumps = orjson.dumps
    sha256 = hashlib.sha256
    digests: list[str | None] = []
    for event in events:
        try:
            unsequenced = event.copy()
            unsequenced.pop("seq", None)
            digests.append(sha256(dumps(unsequenced)).hexdigest())
        except (TypeError, AttributeError):
            digests.append(None)
    return digests


def seal_document(run: Document, stored: list[Document], version: int = FORMAT_VERSION) -> Document:
    """A document of events in their stored form, sealed."""
    digests = [event_digest(event) for event in stored]
    return {
        "format": FORMAT_NAME,
        "version": version,
        "run": run,
        "events": stored,
        "event_count": len(stored),
        "event_digests": digests,
        "head_hash": head_digest(run, digests, len(stored), version),
    }


def run_to_dict(run: RunMeta) -> Document:
    return run.model_dump(mode="json", by_alias=True, exclude_none=True)


def build_document(
    run: Document, events: list[Document], *, resolve: Callable[[Mapping[str, object]], object] | None = None
) -> Document:
    """The sealed current-format document of in-memory events (``resolve`` reads blob-stored requests)."""
    run_id = run.get("run_id")
    return seal_document(
        run, encode_events(events, run_id if isinstance(run_id, str) else "", resolve=resolve)
    )


def blob_resolver(
    store: BlobStore, source: BlobStore | None = None
) -> Callable[[Mapping[str, object]], object]:
    """``resolve(ref)`` for :mod:`stored_form`: the payload a ref keeps in ``store`` (or in ``source``, the
    store a cassette being rewritten was loaded from)."""

    def resolve(ref: Mapping[str, object]) -> object:
        sha = ref.get("sha256")
        if not isinstance(sha, str):
            return None
        if source is not None and not store.exists(sha) and source.exists(sha):
            return source.load(sha)
        return store.load(sha)

    return resolve


# Tool and policy names are keys there: "reset_password" names a tool, it does not hold a password.
_NAME_KEYED_RUN_FIELDS = ("tool_schema_versions", "policy_versions")


def redact_run(run: Document, redactor: Redactor) -> Document:
    return {k: redactor.redact(v, keys=k not in _NAME_KEYED_RUN_FIELDS) for k, v in run.items()}


def event_secrets(event: Document, redactor: Redactor, path: str) -> list[str]:
    """What ``redaction.redact_event`` would still change in an event (the final scan)."""
    if data_keys(event.get("type")) or "data" not in event:
        return redactor.find_secrets(event, path)
    rest = {k: v for k, v in event.items() if k != "data"}
    data = redactor.find_secrets(event["data"], f"{path}.data", keys=False)
    return [*redactor.find_secrets(rest, path), *data]


def scan_document(doc: Document, redactor: Redactor) -> list[str]:
    found: list[str] = []
    for key, value in doc["run"].items():
        found.extend(redactor.find_secrets(value, f"run.{key}", keys=key not in _NAME_KEYED_RUN_FIELDS))
    for index, event in enumerate(doc["events"]):
        found.extend(event_secrets(event, redactor, f"events[{index}]"))
    return found
