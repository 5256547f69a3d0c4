"""Reading a cassette file: only a regular file inside its folder, of bounded size and nesting; parse
and schema failures named with their place and fixes; the header's format and version; the integrity
chain; in-memory events decoded from their stored form. :class:`LoadedCassette` is what a load gives:
payloads resolved and shape-checked lazily, and every problem listed for ``agentreplay verify``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_NAME, FORMAT_VERSION, OLDEST_SUPPORTED_VERSION
from ..core.documents import Document
from ..core.events import CassetteDoc, Event, PayloadRef, RunMeta, event_to_dict
from ..core.redaction import Redactor, default_redactor
from ..exceptions import (
    CassetteCorruptError,
    CassetteError,
    CassetteIntegrityError,
    CassetteLimitError,
    CassetteNotFoundError,
    CassetteSchemaError,
    CassetteVersionError,
    PayloadShapeError,
)
from .blobs import BlobStore, default_blob_dir
from .chain import ChainProblem, integrity_problems
from .document import blob_resolver, build_document, run_to_dict, scan_document
from .migrations import MIGRATIONS, migrate_document
from .stored_form import decode_events
from .validation import (
    MAX_CASSETTE_BYTES,
    MAX_DEPTH,
    UNPARSED,
    NestingTooDeep,
    depth_problem,
    event_key_problem,
    parse_fast,
    payload_problem,
    read_regular_file,
)

REF_FIELDS = ("input_ref", "output_ref")
_MAX_LISTED_PROBLEMS = 20


def _test_hint(raw: Any) -> str | None:
    """The node id the cassette records, when it can be read (None when it cannot)."""
    if isinstance(raw, dict) and isinstance(raw.get("run"), dict) and isinstance(raw["run"].get("test"), str):
        return str(raw["run"]["test"])
    return None


def _fixes_rerecord(path: Path, test: str | None = None) -> list[str]:
    return [f"restore the file from git: `git checkout -- {path}`", rerecord_fix(test, path)]


def _parse(data: bytes, path: Path, mode: str | None) -> Any:
    try:
        value = parse_fast(data)
    except NestingTooDeep as exc:
        raise CassetteLimitError(
            f"cassette {path.name} is nested too deeply to be a cassette",
            evidence=[str(exc)],
            cassette=path,
            mode=mode,
            fixes=_fixes_rerecord(path),
        ) from None
    return _parse_slow(data, path, mode) if value is UNPARSED else value


def _parse_slow(data: bytes, path: Path, mode: str | None) -> Any:
    if not data.strip():
        raise CassetteCorruptError(
            f"cassette {path.name} is empty",
            evidence=[f"{len(data)} bytes, no JSON document"],
            cassette=path,
            mode=mode,
            place="line 1, column 1",
            fixes=_fixes_rerecord(path),
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CassetteCorruptError(
            f"cassette {path.name} is not valid UTF-8",
            evidence=[str(exc)],
            cassette=path,
            mode=mode,
            place=f"byte {exc.start} (line {line})",
            fixes=_fixes_rerecord(path),
        ) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or not text.rstrip().endswith("}")
        raise CassetteCorruptError(
            f"cassette {path.name} is not valid JSON" + (" (the file looks truncated)" if truncated else ""),
            evidence=[exc.msg],
            cassette=path,
            mode=mode,
            place=f"line {exc.lineno}, column {exc.colno}",
            fixes=_fixes_rerecord(path),
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CassetteCorruptError(
            f"cassette {path.name} cannot be parsed: {exc}",
            cassette=path,
            mode=mode,
            fixes=_fixes_rerecord(path),
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_header(raw: Any, path: Path, mode: str | None) -> int:
    test = _test_hint(raw)
    if not isinstance(raw, dict):
        raise CassetteCorruptError(
            f"cassette {path.name} is not a cassette: its top level is a JSON {type(raw).__name__}",
            cassette=path,
            mode=mode,
            place="line 1, column 1",
            fixes=_fixes_rerecord(path, test),
        )
    if raw.get("format") != FORMAT_NAME:
        raise CassetteCorruptError(
            f"cassette {path.name} is not a {FORMAT_NAME} cassette",
            evidence=[f"format is {raw.get('format')!r}, expected {FORMAT_NAME!r}"],
            cassette=path,
            mode=mode,
            place="format",
            fixes=[
                "if it is a vcrpy / pytest-recording cassette: `agentreplay import-vcr <file>`",
                *_fixes_rerecord(path, test),
            ],
        )
    version = raw.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise CassetteVersionError(
            f"cassette {path.name} has format version {version}, newer than this pytest-agentreplay "
            f"(reads up to version {FORMAT_VERSION})",
            cassette=path,
            mode=mode,
            place="version",
            fixes=[
                "upgrade pytest-agentreplay (`pip install -U -e <checkout>`) to the version that wrote it",
                "or " + rerecord_fix(test, path),
            ],
        )
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or (version != FORMAT_VERSION and (version < OLDEST_SUPPORTED_VERSION or version not in MIGRATIONS))
    ):
        raise CassetteVersionError(
            f"cassette {path.name} has an unknown format version {version!r}",
            evidence=[f"known versions: {OLDEST_SUPPORTED_VERSION}..{FORMAT_VERSION}"],
            cassette=path,
            mode=mode,
            place="version",
            fixes=[
                f"restore the file from git: `git checkout -- {path}`",
                "upgrade pytest-agentreplay if a newer release wrote it",
                rerecord_fix(test, path),
            ],
        )
    return version


def schema_error(
    exc: ValidationError, raw: Document, path: Path, mode: str | None
) -> CassetteSchemaError:
    details = exc.errors(include_url=False)
    places = [_describe_loc(err["loc"], raw) for err in details]
    evidence = []
    for err, place in zip(details[:8], places, strict=False):
        what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        evidence.append(f"{place}: {what} (found {_short(err.get('input'))})")
    if len(details) > 8:
        evidence.append(f"... and {len(details) - 8} more")
    test = _test_hint(raw)
    return CassetteSchemaError(
        f"cassette {path.name} does not match the cassette schema ({len(details)} problem(s))",
        evidence=evidence,
        cassette=path,
        mode=mode,
        place=places[0] if places else None,
        fixes=[
            f"if an older pytest-agentreplay wrote it: `agentreplay migrate {path}`",
            "if it was edited by hand, undo the edit or restore it: `git checkout -- " + str(path) + "`",
            rerecord_fix(test, path),
            "see the format: `agentreplay schema`",
        ],
    )


def _describe_loc(loc: tuple[int | str, ...], raw: Document) -> str:
    if len(loc) >= 2 and loc[0] == "events" and isinstance(loc[1], int):
        index = loc[1]
        events = raw.get("events")
        seq: Any = index
        if isinstance(events, list) and index < len(events) and isinstance(events[index], dict):
            seq = events[index].get("seq", index)
        field_path = ".".join(str(part) for part in loc[2:]) or "(the event)"
        return f"event seq {seq} (events[{index}]), field {field_path}"
    return "field " + ".".join(str(part) for part in loc)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def verify_chain(doc: Mapping[str, Any] | CassetteDoc) -> list[str]:
    """Every integrity problem of a cassette document (raw dict or model); empty when intact."""
    raw = _doc_to_dict(doc) if isinstance(doc, CassetteDoc) else doc
    messages = [problem.message for problem in integrity_problems(raw)]
    if len(messages) > _MAX_LISTED_PROBLEMS:
        messages = [*messages[:_MAX_LISTED_PROBLEMS], f"... and {len(messages) - _MAX_LISTED_PROBLEMS} more"]
    return messages


def _doc_to_dict(doc: CassetteDoc) -> Document:
    return {
        "format": doc.format,
        "version": doc.version,
        "run": run_to_dict(doc.run),
        "events": [event_to_dict(event) for event in doc.events],
        "event_count": doc.event_count,
        "event_digests": list(doc.event_digests),
        "head_hash": doc.head_hash,
    }


def cassette_root(path: Path) -> Path:
    """The folder a cassette's files must stay in: the one holding its blob store."""
    return default_blob_dir(path).parent


def read_cassette_bytes(path: Path, mode: str | None = None) -> bytes:
    """The bytes of a cassette file: a regular file inside its cassette folder, of bounded size."""
    try:
        return read_regular_file(
            path,
            limit=MAX_CASSETTE_BYTES,
            label=f"cassette {path.name}",
            root=cassette_root(path),
            cassette=path,
            fixes=_fixes_rerecord(path),
        )
    except CassetteError as exc:
        exc.mode = mode
        raise
    except FileNotFoundError:
        raise CassetteNotFoundError(
            f"cassette {path.name} does not exist",
            evidence=[f"looked for: {path}"],
            cassette=path,
            mode=mode,
            fixes=[
                "record it: `pytest --agentreplay-record=missing` with the test's node id "
                "(the missing-cassette failure of the test prints the exact command)",
                "check --agentreplay-cassette-dir and the marker's cassette= argument",
                f"if it was committed, restore it: `git checkout -- {path}`",
            ],
        ) from None
    except OSError as exc:
        raise CassetteCorruptError(
            f"cassette {path.name} cannot be read: {exc.strerror or exc}",
            cassette=path,
            mode=mode,
            fixes=["check the path and its permissions", *_fixes_rerecord(path)],
        ) from None


def _load(
    path: Path,
    mode: str | None,
    *,
    migrate: bool = False,
    store: BlobStore | None = None,
    check_integrity: bool = True,
) -> tuple[Document, int, CassetteDoc, bytes]:
    """(the document as stored, the version the file had, the validated model with in-memory events, the
    file's bytes).

    Without ``check_integrity`` a broken chain is let through, unless the events could not be decoded."""
    data = read_cassette_bytes(path, mode)
    raw = _parse(data, path, mode)
    version = _check_header(raw, path, mode)
    store = store if store is not None else BlobStore(default_blob_dir(path))
    problems: list[ChainProblem] = []
    doc: CassetteDoc | None = None
    try:
        if version != FORMAT_VERSION:
            raw = migrate_document(raw, str(path))
        try:
            events = decode_stored_events(raw, path, store)
        except CassetteError:
            # A damaged delta: say it was edited when the digests say so.
            problems = integrity_problems(raw) if _checkable(raw) else []
            if not problems:
                raise
        else:
            doc = CassetteDoc.model_validate({**raw, "events": events})
            problems = integrity_problems(raw)
            _check_event_keys(raw, path)
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
            fixes=_fixes_rerecord(path, _test_hint(raw)),
        ) from None
    if problems and (check_integrity or doc is None):
        first = problems[0]
        raise CassetteIntegrityError(
            f"cassette {path.name} fails its integrity check: it was edited, reordered or truncated",
            evidence=[p.message for p in problems[:5]],
            cassette=path,
            mode=mode,
            place=f"event seq {first.index} (events[{first.index}])" if first.index is not None else "header",
            fixes=[
                f"undo the edit or restore it: `git checkout -- {path}`",
                rerecord_fix(_test_hint(raw), path),
                f"list every problem: `agentreplay verify {path}`",
            ],
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
                "or " + rerecord_fix(_test_hint(raw), path),
            ],
        )
    assert doc is not None  # validated above whenever the events could be decoded
    return raw, version, doc, data


def _checkable(raw: Any) -> bool:
    return (
        isinstance(raw.get("run"), dict)
        and isinstance(raw.get("events"), list)
        and all(isinstance(event, dict) for event in raw["events"])
    )


def decode_stored_events(raw: Document, path: Path, store: BlobStore) -> list[Any]:
    """The in-memory events of a stored document (request deltas applied, defaults restored)."""
    events, run = raw.get("events"), raw.get("run")
    if not isinstance(events, list) or not isinstance(run, dict):
        return events if isinstance(events, list) else []  # the schema check names what is wrong
    run_id = run.get("run_id")
    return decode_events(
        events, run_id if isinstance(run_id, str) else "", source=str(path), resolve=blob_resolver(store)
    )


def _check_event_keys(raw: Document, path: Path) -> None:
    found = event_key_problem(raw["events"])
    if found is not None:
        index, problem = found
        raise CassetteSchemaError(
            f"cassette {path.name} does not match the cassette schema: {problem}",
            cassette=path,
            place=f"event seq {index} (events[{index}])",
            fixes=[
                f"undo the edit or restore it: `git checkout -- {path}`",
                rerecord_fix(_test_hint(raw), path),
            ],
        )


def load_document(path: Path, *, mode: str | None = None, migrate: bool = False) -> tuple[Document, int]:
    """The validated, chain-checked cassette as a current-format dict, and the version the file had.

    An older format version is a ``CassetteVersionError`` unless ``migrate`` (``agentreplay migrate``).
    """
    raw, version, _, _ = _load(path, mode, migrate=migrate)
    return raw, version


def load_cassette(
    path: Path,
    *,
    blob_dir: Path | None = None,
    mode: str | None = None,
    verify_blobs: bool = False,
    migrate: bool = False,
) -> LoadedCassette:
    """Read a cassette; every failure is a ``CassetteError``.

    Only a regular file inside its cassette folder is read (no FIFO, device, or symlink leading out), of
    bounded size and nesting; an older format version is refused (``agentreplay migrate`` upgrades it)
    unless ``migrate`` (``--agentreplay-update``, which rewrites it): then it is checked against its own
    version's integrity fields and upgraded in memory.
    Payloads are resolved and shape-checked lazily, by :meth:`LoadedCassette.payload`.
    """
    return _load_cassette(path, blob_dir=blob_dir, mode=mode, verify_blobs=verify_blobs, migrate=migrate)[0]


def load_versioned(path: Path) -> tuple[LoadedCassette, int]:
    """A cassette of any supported version, upgraded in memory, and the version its file has."""
    return _load_cassette(Path(path), migrate=True)


def load_unchecked(path: Path) -> LoadedCassette | None:
    """A cassette whose integrity check fails, loaded so the other checks can still run on it: the load
    of :func:`load_cassette` without the chain check (any supported version, upgraded in memory).

    For ``agentreplay verify`` and ``show``, which report the broken chain as a problem and audit the rest;
    replay never uses it. ``None`` when the cassette cannot be loaded even so.
    """
    try:
        return _load_cassette(Path(path), migrate=True, check_integrity=False)[0]
    except CassetteError:
        return None


def _load_cassette(
    path: Path,
    *,
    blob_dir: Path | None = None,
    mode: str | None = None,
    verify_blobs: bool = False,
    migrate: bool = False,
    check_integrity: bool = True,
) -> tuple[LoadedCassette, int]:
    path = Path(path)
    store = BlobStore(blob_dir if blob_dir is not None else default_blob_dir(path))
    raw, version, doc, data = _load(path, mode, migrate=migrate, store=store, check_integrity=check_integrity)
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
    )
    if verify_blobs:
        for index, name, ref in loaded.iter_refs():
            if ref.sha256 is not None:
                try:
                    store.referenced(ref.sha256)
                except CassetteError as exc:
                    raise _relocate(
                        exc, path, mode, f"event seq {index} (events[{index}]), field {name}"
                    ) from None
    return loaded, version


def _relocate(exc: CassetteError, path: Path, mode: str | None, place: str) -> CassetteError:
    return type(exc)(
        exc.headline,
        evidence=[*exc.evidence, *([exc.place] if exc.place else [])],
        cassette=path,
        mode=mode,
        place=place,
        fixes=exc.fixes,
    )


@dataclass
class LoadedCassette:
    path: Path
    run: RunMeta
    events: list[Event]
    blob_store: BlobStore
    document: Document = field(repr=False, default_factory=dict)
    mode: str | None = None
    # The file's bytes, when ``document`` is left empty (the file is of the current version).
    source: bytes | None = field(repr=False, default=None)

    def payload(self, ref: PayloadRef | None) -> Any:
        """The payload value: inline as stored, or the blob with every ``$blob`` reference expanded."""
        if ref is None:
            return None
        if ref.sha256 is None:
            value = ref.inline
            problem = depth_problem(value, MAX_DEPTH) if isinstance(value, dict | list) else None
            stored = "stored inline"
        else:
            try:
                value = self.blob_store.load(ref.sha256)
            except CassetteError as exc:
                place = f"{self._ref_place(ref)}, payload {ref.sha256}"
                raise _relocate(exc, self.path, self.mode, place) from None
            problem = None
            stored = f"stored in blob {ref.sha256}"
        if problem is None and ref.media_type is not None:
            problem = payload_problem(ref.media_type, value)
        if problem is not None:
            raise PayloadShapeError(
                f"cassette {self.path.name}: a recorded payload has the wrong shape: {problem}",
                evidence=[f"media type: {ref.media_type}", stored],
                cassette=self.path,
                mode=self.mode,
                place=self._ref_place(ref),
                fixes=[
                    f"undo the edit or restore it: `git checkout -- {self.path}`",
                    rerecord_fix(self.run.test, self.path),
                    f"list every problem: `agentreplay verify {self.path}`",
                ],
            )
        return value

    def _ref_place(self, ref: PayloadRef) -> str:
        for index, name, candidate in self.iter_refs():
            if candidate is ref:
                return f"event seq {index} (events[{index}]), field {name}"
        return "referenced by an event"

    def event_dicts(self) -> list[Document]:
        return [event_to_dict(event) for event in self.events]

    def iter_refs(self) -> Iterator[tuple[int, str, PayloadRef]]:
        for index, event in enumerate(self.events):
            for name in REF_FIELDS:
                ref = getattr(event, name)
                if ref is not None:
                    yield index, name, ref

    def verify(self, redactor: Redactor | None = None) -> list[str]:
        """Every problem: event digests, missing or damaged blobs, secret-shaped values (doc and blobs)."""
        doc = self.document or self._stored_document() or self._current_document()
        problems = verify_chain(doc)
        redactor = redactor or default_redactor()
        problems.extend(f"secret-shaped value at {p}" for p in scan_document(doc, redactor))
        checked: set[str] = set()
        for index, name, ref in self.iter_refs():
            if ref.sha256 is None or ref.sha256 in checked:
                continue
            try:
                shas = self.blob_store.referenced(ref.sha256)
            except CassetteError as exc:
                problems.append(f"events[{index}].{name}: {exc.headline}")
                continue
            found = 0
            for sha in shas - checked:
                leaks = redactor.find_secrets(self.blob_store.get(sha))
                found += len(leaks)
                problems.extend(f"secret-shaped value in blob {sha} at {p}" for p in leaks)
            if not found:
                # The payload whole, as the write-time scan saw it: a stream or body cut across blobs.
                try:
                    leaks = redactor.find_secrets(self.payload(ref), f"events[{index}].{name}")
                except CassetteError:
                    leaks = []  # already reported by the blob checks
                problems.extend(f"secret-shaped value at {p}" for p in leaks)
            checked |= shas
        if (shown := redactor.redact_string(self.path.name, keys=False)) != self.path.name:
            problems.append(f"secret-shaped value in the file name ({shown})")
        return problems

    def _stored_document(self) -> Document | None:
        if self.source is None:
            return None
        value = _parse(self.source, self.path, self.mode)  # the bytes it was loaded from: they parsed then
        return value if isinstance(value, dict) else None

    def _current_document(self) -> Document:
        # Rebuilt from the models, so the chain is recomputed: only blobs and secrets are really checked.
        return build_document(run_to_dict(self.run), self.event_dicts())
