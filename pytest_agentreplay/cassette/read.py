"""Loading a cassette: its bytes parsed (:mod:`.parsing`), the header checked (:mod:`.document_checks`), an
older format version migrated when asked, the events decoded from their stored form and validated as the
records, the integrity chain checked. What a load gives is a :class:`~.loaded.LoadedCassette`."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_VERSION
from ..core.documents import Document
from ..core.events import CassetteDoc
from ..exceptions import CassetteCorruptError, CassetteError, CassetteIntegrityError, CassetteVersionError
from .blobs import BlobStore, default_blob_dir
from .chain import ChainProblem, integrity_problems
from .document import blob_resolver
from .document_checks import check_event_keys, check_header, schema_error
from .loaded import LoadedCassette as LoadedCassette  # what a load gives, imported from here
from .migrations import migrate_document
from .parsing import edit_fixes, parse_document, read_cassette_bytes, rerecord_fixes, test_hint
from .stored_decode import decode_events
from .validation import relocate


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:  # a decorator too: each call of the function is one pause
    """The cyclic garbage collector off while a cassette is parsed, decoded and validated: every container
    made there survives (it is the cassette), so a collection finds nothing, yet each full pass walks the
    whole heap, which pydantic's import makes large (bench_load's 6 MB cassette: its parse 38 ms before
    the records were pydantic's, 104 ms after with the collector on, 37 ms with it off). Left off if it was
    off (the caller's choice); another thread loading meanwhile only shortens the pause."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_collector_paused()
def _load(
    path: Path, root: Path, mode: str | None, *, migrate: bool, store: BlobStore, check_integrity: bool
) -> tuple[Document, int, CassetteDoc, bytes]:
    """(the document as stored, the version the file had, the validated model with in-memory events, the
    file's bytes).

    Without ``check_integrity`` a broken chain is let through, unless the events could not be decoded."""
    data = read_cassette_bytes(path, mode, root=root)
    raw, version = check_header(parse_document(data, path, mode), path, mode)
    problems: list[ChainProblem] = []
    doc: CassetteDoc | None = None
    try:
        if version != FORMAT_VERSION:
            raw = migrate_document(raw, str(path))
        try:
            decoded = decoded_document(raw, path, store)
        except CassetteError:
            # A damaged delta: say it was edited when the digests say so.
            problems = integrity_problems(raw) if _checkable(raw) else []
            if not problems:
                raise
        else:
            doc = CassetteDoc.model_validate(decoded)
            problems = integrity_problems(raw)
            check_event_keys(raw, path)
    except CassetteError as exc:
        exc.mode = mode
        raise
    except ValidationError as exc:
        raise schema_error(exc, raw, path, mode) from None
    except (ValueError, UnicodeError, RecursionError) as exc:
        # Only reachable through damage: an infinite number or a lone surrogate escape cannot be hashed.
        raise CassetteCorruptError(
            f"cassette {path.name} holds a value JSON cannot round-trip: {exc}",
            cassette=path,
            mode=mode,
            fixes=rerecord_fixes(path, test_hint(raw)),
        ) from None
    if problems and (check_integrity or doc is None):
        first = problems[0]
        raise CassetteIntegrityError(
            f"cassette {path.name} fails its integrity check: it was edited, reordered or truncated",
            evidence=[p.message for p in problems[:5]],
            cassette=path,
            mode=mode,
            place=f"event seq {first.index} (events[{first.index}])" if first.index is not None else "header",
            fixes=edit_fixes(path, test_hint(raw)),
        )
    if version != FORMAT_VERSION and not migrate:
        # An older version has no (or another) integrity layout: only an explicit `agentreplay migrate` (or a
        # run with --agentreplay-update, which rewrites the file) upgrades it, so relabelling an edited file
        # as old cannot get it past the checks on load.
        raise CassetteVersionError(
            f"cassette {path.name} has the old format version {version}: an intact version-{version} "
            "cassette is upgraded only by `agentreplay migrate` (or by --agentreplay-update when it rewrites "
            "the cassette); it is not replayed before that",
            evidence=[f"this pytest-agentreplay replays version {FORMAT_VERSION} only"],
            cassette=path,
            mode=mode,
            place="version",
            fixes=[
                f"upgrade it (review the diff before committing): `agentreplay migrate {path}`",
                "or " + rerecord_fix(test_hint(raw), path),
            ],
        )
    assert doc is not None  # validated above whenever the events could be decoded
    return raw, version, doc, data


def _checkable(raw: Document) -> bool:
    return (
        isinstance(raw.get("run"), dict)
        and isinstance(raw.get("events"), list)
        and all(isinstance(event, dict) for event in raw["events"])
    )


def decoded_document(raw: Document, path: Path, store: BlobStore) -> Document:
    """The stored document with its in-memory events (request deltas applied, defaults restored), for the
    schema check. Without an events list (or a run header) it is the document as stored: the schema check
    then names the missing or mistyped field."""
    events, run = raw.get("events"), raw.get("run")
    if not isinstance(events, list) or not isinstance(run, dict):
        return raw
    run_id = run.get("run_id")
    decoded = decode_events(
        events, run_id if isinstance(run_id, str) else "", source=str(path), resolve=blob_resolver(store)
    )
    return {**raw, "events": decoded}


def load_cassette(
    path: Path,
    *,
    blob_dir: Path | None = None,
    mode: str | None = None,
    verify_blobs: bool = False,
    migrate: bool = False,
    check_integrity: bool = True,
) -> LoadedCassette:
    """Read a cassette; every failure is a ``CassetteError``.

    Only a regular file inside its cassette folder is read (no FIFO, device, or symlink leading out), of
    bounded size and nesting; an older format version is refused (``agentreplay migrate`` upgrades it)
    unless ``migrate`` (``--agentreplay-update``, which rewrites it): then it is checked against its own
    version's integrity fields and upgraded in memory (``LoadedCassette.version`` says the file's).
    Payloads are resolved and shape-checked lazily, by :meth:`LoadedCassette.payload`.
    """
    path = path if isinstance(path, Path) else Path(path)
    default = default_blob_dir(path)  # its folder is the one the cassette must stay in
    store = BlobStore(blob_dir if blob_dir is not None else default)
    raw, version, doc, data = _load(
        path, default.parent, mode, migrate=migrate, store=store, check_integrity=check_integrity
    )
    # The stored form is only read again by `verify`: kept as the file's bytes, one object, rather than as
    # the parsed document, thousands of containers every garbage collection of the run walks. A migrated
    # document has no such bytes.
    current = version == FORMAT_VERSION
    loaded = LoadedCassette(
        path,
        doc.run,
        doc.events,
        store,
        document={} if current else raw,
        mode=mode,
        source=data if current else None,
        version=version,
    )
    if verify_blobs:
        for index, name, ref in loaded.iter_refs():
            if ref.sha256 is not None:
                try:
                    store.referenced(ref.sha256)
                except CassetteError as exc:
                    raise relocate(
                        exc, path, mode, f"event seq {index} (events[{index}]), field {name}"
                    ) from None
    return loaded


def load_unchecked(path: Path) -> LoadedCassette | None:
    """A cassette whose integrity check fails, loaded so the other checks can still run on it: the load
    of :func:`load_cassette` without the chain check (any supported version, upgraded in memory).

    For ``agentreplay verify`` and ``show``, which report the broken chain as a problem and audit the rest;
    replay never uses it. ``None`` when the cassette cannot be loaded even so.
    """
    try:
        return load_cassette(path, migrate=True, check_integrity=False)
    except CassetteError:
        return None
