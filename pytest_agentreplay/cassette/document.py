"""The current-format document of a run: events put in their stored form (requests as deltas over earlier
ones, defaults left out), then sealed by the integrity chain. Shared by saving and by migrations; the
redaction of its run header and its secret scan are shared by saving and by ``agentreplay verify``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.documents import Document
from ..core.events import RunMeta
from ..redaction import Redactor, data_keys
from .blobs import BlobStore
from .chain import seal_document
from .stored_form import encode_events


def run_to_dict(run: RunMeta) -> Document:
    return run.model_dump(mode="json", by_alias=True, exclude_none=True)


def build_document(
    run: Document, events: list[Document], *, resolve: Callable[[Mapping[str, object]], object] | None = None
) -> Document:
    """The current-format document of in-memory event dicts: stored form (request deltas, defaults left
    out; ``resolve`` reads blob-stored requests), one digest per stored event and the head digest."""
    run_id = run.get("run_id")
    return seal_document(
        run, encode_events(events, run_id if isinstance(run_id, str) else "", resolve=resolve)
    )


def blob_resolver(
    store: BlobStore, source: BlobStore | None = None
) -> Callable[[Mapping[str, object]], object]:
    """``resolve(ref)`` for :mod:`stored_form`: the payload a ref keeps in ``store`` (or in ``source``, the
    store a cassette being rewritten was loaded from); a missing or damaged blob is a ``CassetteError``."""

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
