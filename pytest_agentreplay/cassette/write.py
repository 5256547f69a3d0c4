"""Writing a cassette file: the redaction pass (the project's hook included), large payloads moved to the
blob store, the integrity chain, the secret scan that refuses a leak, then an atomic locked write."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TypedDict, Unpack

from pydantic import ValidationError

from ..core.canonical import dumps_cassette, dumps_pretty, is_cassette_text
from ..core.commands import rerecord_fix
from ..core.constants import DEFAULT_TRANSPORT_HEADERS, INLINE_PAYLOAD_LIMIT, TRANSPORT_HEADER_CHOICES
from ..core.documents import Document
from ..core.events import CassetteDoc, Event, RunMeta, event_to_shared_dict
from ..core.json_copy import copy_json
from ..exceptions import BlobMissingError, CassetteSchemaError, SecretLeakError
from ..http.recording import share_parts
from ..redaction import RedactedEvent, Redactor, default_redactor, redact_event
from .blobs import BlobStore, PendingBlobs, default_blob_dir, plan_payload
from .chain import blob_resolver, event_secrets, redact_run, run_to_dict, scan_document, seal_document
from .loaded import LoadedCassette
from .read import decoded_document, schema_error
from .stored_form import (
    REF_FIELDS,
    encode_events,
    holds_transport_headers,
    request_parts,
    without_transport_headers,
)


def _place_payloads(
    event: Document,
    index: int,
    inline_limit: int,
    store: BlobStore,
    source: BlobStore | None,
    pending: PendingBlobs,
    path: Path,
) -> None:
    for name in REF_FIELDS:
        ref = event.get(name)
        if not isinstance(ref, dict):
            continue
        if "inline" in ref:
            placed, blobs = plan_payload(ref["inline"], inline_limit)
            rest = {k: v for k, v in ref.items() if k not in ("inline", "sha256", "size")}
            if "inline" in placed and "size" in ref:
                rest["size"] = ref["size"]
            event[name] = {**rest, **placed}
            pending.update(blobs)
        elif isinstance(ref.get("sha256"), str) and not store.exists(ref["sha256"]):
            sha = ref["sha256"]
            if source is None or not source.exists(sha):
                raise BlobMissingError(
                    f"cannot save {path.name}: event seq {index} references blob {sha}, "
                    f"which is not in {store.root}",
                    cassette=path,
                    place=f"event seq {index} (events[{index}]), field {name}",
                    fixes=[
                        "pass source_blob_store= the store the cassette was loaded from",
                        rerecord_fix(None, path),
                    ],
                )
            for needed in source.referenced(sha):
                pending[needed] = (source.get(needed), source.path_for(needed).read_bytes())


def _apply_hook(hook: Callable[[Document], Document], event: Document, index: int, path: Path) -> Document:
    try:
        # The hook changes a copy of its own: the redacted events share the messages a conversation resends.
        # Round-trip through the model so a hook's None values or defaults cannot break byte identity.
        return event_to_shared_dict(Event.model_validate(hook(copy_json(event))))
    except ValidationError as exc:
        raise CassetteSchemaError(
            f"cannot save {path.name}: the redaction hook returned an invalid event",
            evidence=[
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:8]
            ],
            cassette=path,
            place=f"event seq {index} (events[{index}])",
            fixes=["make the hook return the event dict it was given, modified in place of values only"],
        ) from None


def _share_with_previous(event: Document, sent: dict[tuple[str, str], Mapping[str, object]]) -> None:
    """Share the parts of a request body equal to the previous one to the same endpoint (what a hook's copy
    lost), so the scans and the encoding see each message of a conversation once."""
    ref = event.get("input_ref")
    parts = request_parts(ref.get("inline") if isinstance(ref, dict) else None)
    if parts is None:
        return
    endpoint, _, value = parts
    previous = sent.get(endpoint)
    sent[endpoint] = value
    if previous is not None:
        share_parts(previous, value)


def _on_disk(path: Path, store: BlobStore, kept: frozenset[str]) -> tuple[Callable[[object], str], bool]:
    """How to write over the file a save replaces: in the layout it has (an older one too), and whether it
    holds transport headers, so that an accepted change stays the few lines it is."""
    try:
        text = path.read_bytes()
    except OSError:
        return dumps_cassette, False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None  # damaged: the save writes the current form
    transport_headers = isinstance(value, dict) and holds_transport_headers(
        value.get("events"), blob_resolver(store), kept
    )
    if text.startswith(b'{\n  "'):
        return dumps_pretty, transport_headers
    if value is not None and text.startswith(b'{\n "'):
        # A damaged file raises: the save writes the current layout.
        with suppress(ValueError, TypeError, RecursionError):
            if is_cassette_text(text.decode("utf-8"), value, inline_objects=False):
                return partial(dumps_cassette, inline_objects=False), transport_headers
    return dumps_cassette, transport_headers


def _as_dict(event: Event | RedactedEvent) -> Document:
    return event.doc if isinstance(event, RedactedEvent) else event_to_shared_dict(event)


class RenderedCassette:
    """A cassette file as a save would write it, not written yet: its bytes and the blobs it adds."""

    __slots__ = ("blobs", "doc", "path", "store", "text")

    def __init__(self, path: Path, text: bytes, blobs: PendingBlobs, store: BlobStore, doc: Document) -> None:
        self.path, self.text, self.blobs, self.store, self.doc = path, text, blobs, store, doc

    def new_blobs(self) -> dict[str, bytes]:
        """The blobs the file references that its store does not hold yet, by digest."""
        return {sha: data for sha, (_, data) in self.blobs.items() if not self.store.exists(sha)}

    def write(self) -> LoadedCassette:
        """Write the blobs, then the file (atomically, locked); the cassette a later load gives."""
        path, store = self.path, self.store
        store.write_with(path, self.text, ((sha, data) for sha, (_, data) in self.blobs.items()))
        # What a later load of the file gives (blob-stored payloads stay references).
        try:
            validated = CassetteDoc.model_validate(decoded_document(self.doc, path, store))
        except ValidationError as exc:
            raise schema_error(exc, self.doc, path, None) from None
        return LoadedCassette(path, validated.run, validated.events, store, document=self.doc)


class SaveOptions(TypedDict, total=False):
    blob_dir: Path | None
    redactor: Redactor | None
    inline_limit: int
    extra_redact: Callable[[Document], Document] | None
    source_blob_store: BlobStore | None
    transport_headers: str
    keep_headers: Collection[str]


def save_cassette(
    path: Path, run: RunMeta, events: Sequence[Event | RedactedEvent], **options: Unpack[SaveOptions]
) -> LoadedCassette:
    """:func:`render_cassette`, then :meth:`RenderedCassette.write`."""
    return render_cassette(path, run, events, **options).write()


def render_cassette(
    path: Path,
    run: RunMeta,
    events: Sequence[Event | RedactedEvent],
    *,
    blob_dir: Path | None = None,
    redactor: Redactor | None = None,
    inline_limit: int = INLINE_PAYLOAD_LIMIT,
    extra_redact: Callable[[Document], Document] | None = None,
    source_blob_store: BlobStore | None = None,
    transport_headers: str = DEFAULT_TRANSPORT_HEADERS,
    keep_headers: Collection[str] = (),
) -> RenderedCassette:
    """Redact, externalize large payloads, chain and scan for secrets: the file a save writes.

    ``events``: as recorded, or redacted by ``redactor``. ``extra_redact``: the project's redaction hook.
    ``transport_headers``: ``auto``, ``drop`` or ``keep``; ``keep_headers``: request header names written
    even when they are transport headers (the idempotency header).
    """
    path = Path(path)
    if transport_headers not in TRANSPORT_HEADER_CHOICES:
        raise ValueError(
            f"transport_headers: one of {', '.join(TRANSPORT_HEADER_CHOICES)}, not {transport_headers!r}"
        )
    for index, event in enumerate(events):
        if (seq := event.doc.get("seq") if isinstance(event, RedactedEvent) else event.seq) != index:
            raise ValueError(f"event at index {index} has seq {seq}: seq must be dense 0..{len(events) - 1}")
    redactor = redactor or default_redactor()
    store = BlobStore(blob_dir if blob_dir is not None else default_blob_dir(path))
    kept = frozenset(name.lower() for name in keep_headers)
    dumps, had_transport_headers = _on_disk(path, store, kept)
    keep_all = transport_headers == "keep" or (transport_headers == "auto" and had_transport_headers)
    try:
        run_dict = redact_run(run_to_dict(run), redactor)
        pending: PendingBlobs = {}
        event_dicts: list[Document] = []
        whole: list[str] = []
        sent: dict[tuple[str, str], Mapping[str, object]] = {}
        # Not copied first: the messages a conversation's requests share (http.recording.share_repeats) stay
        # shared objects, each redacted once.
        views = [e if isinstance(e, RedactedEvent) else redact_event(_as_dict(e), redactor) for e in events]
        for index, view in enumerate(views):
            # Redone if the run learnt a secret since (a later event taught it): an earlier note may hold it.
            current = view.current(redactor).doc
            if extra_redact is not None:
                current = _apply_hook(extra_redact, current, index, path)
                _share_with_previous(current, sent)
            if not keep_all:
                current = without_transport_headers(current, kept)
            # Scanned whole, before payloads are split into blobs: a stream or a body cut across blobs
            # is seen through the same decoded view redaction used.
            whole.extend(event_secrets(current, redactor, f"events[{index}]"))
            event_dicts.append(current)
        stored = encode_events(event_dicts, run.run_id, resolve=blob_resolver(store, source_blob_store))
        for index, current in enumerate(stored):
            _place_payloads(current, index, inline_limit, store, source_blob_store, pending, path)
        doc = seal_document(run_dict, stored)
        text = dumps(doc).encode("utf-8")
    except (ValueError, UnicodeError) as exc:
        from ..core.unencodable import surrogate_field  # only on this error

        for index, event in enumerate(events):
            found = surrogate_field(_as_dict(event))
            if found is not None:
                raise CassetteSchemaError(
                    f"cannot save {path.name}: event {index} ({_as_dict(event)['type']}) holds text that is "
                    "not valid UTF-8",
                    evidence=[f"events[{index}] at {found[0]}: {found[1]}, a lone UTF-16 surrogate"],
                    cassette=path,
                    place=f"events[{index}]{found[0]}",
                    fixes=[
                        "repair the text before the agent passes it on: "
                        "text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')",
                        "or keep that value out of the run",
                    ],
                ) from None
        raise CassetteSchemaError(
            f"cannot save {path.name}: a value has no canonical JSON form ({exc})",
            evidence=["NaN/Infinity floats and lone surrogate characters cannot be stored"],
            cassette=path,
            fixes=["convert the value before recording it (e.g. str() it or drop it)"],
        ) from None
    leaks = list(dict.fromkeys([*scan_document(doc, redactor), *whole]))
    for sha, (value, _) in pending.items():
        leaks.extend(f"blob {sha}: {p}" for p in redactor.find_secrets(value))
    if (shown := redactor.redact_string(path.name, keys=False)) != path.name:
        leaks.append(f"the file name ({shown})")
    if leaks:
        raise SecretLeakError(
            f"refusing to write {path.name}: {len(leaks)} secret-shaped value(s) survived redaction",
            evidence=leaks[:20],
            cassette=path,
            place=leaks[0],
            fixes=[
                "make the redaction hook (pytest_agentreplay_redact_event) stop re-adding the value",
                "if it is not a secret, exclude it from the project's redact_patterns/redact_keys",
                "add the name to [tool.agentreplay] redact_keys / redact_headers if a new field carries it",
            ],
        )
    return RenderedCassette(path, text, pending, store, doc)
