"""Loading a cassette: its bytes parsed (:mod:`.parsing`), the header checked, an older format version
migrated when asked, the events decoded from their stored form and validated (a problem named with its
event seq and field path), the integrity chain checked; it gives a :class:`~.loaded.LoadedCassette`."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_NAME, FORMAT_VERSION, OLDEST_SUPPORTED_VERSION
from ..core.documents import Document
from ..core.events import CassetteDoc
from ..exceptions import (
    CassetteCorruptError,
    CassetteError,
    CassetteIntegrityError,
    CassetteSchemaError,
    CassetteVersionError,
)
from .blobs import BlobStore, default_blob_dir
from .chain import ChainProblem, blob_resolver, integrity_problems
from .loaded import LoadedCassette as LoadedCassette  # what a load gives, imported from here
from .migrations import MIGRATIONS, migrate_document
from .parsing import edit_fixes, parse_document, read_cassette_bytes, rerecord_fixes, test_hint
from .stored_decode import decode_events
from .validation import capped, relocate, short


def _read_checked(
    path: Path, root: Path, mode: str | None, *, migrate: bool, store: BlobStore, check_integrity: bool
) -> tuple[Document, int, CassetteDoc, bytes, dict[int, Document]]:
    """(the document as stored, the file's version, the validated model, the file's bytes, the inline
    response payloads whose JSON the decoding parsed from ``raw``). Without ``check_integrity`` a broken
    chain is let through, unless the events could not be decoded."""
    data = read_cassette_bytes(path, mode, root=root)
    raw, version = check_header(parse_document(data, path, mode), path, mode)
    problems: list[ChainProblem] = []
    doc: CassetteDoc | None = None
    restored: dict[int, Document] = {}
    try:
        if version != FORMAT_VERSION:
            raw = migrate_document(raw, str(path))
        try:
            decoded = decoded_document(raw, path, store, restored)
        except CassetteError:
            # A damaged delta: say it was edited when the digests say so.
            problems = integrity_problems(raw) if checkable(raw) else []
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
    return raw, version, doc, data, restored


def checkable(raw: Document) -> bool:
    """Whether ``raw`` has a run header and a list of event objects: what the integrity check reads."""
    return (
        isinstance(raw.get("run"), dict)
        and isinstance(raw.get("events"), list)
        and all(isinstance(event, dict) for event in raw["events"])
    )


def decoded_document(
    raw: Document, path: Path, store: BlobStore, restored: dict[int, Document] | None = None
) -> Document:
    """The stored document with its in-memory events, for the schema check (as stored without an events list
    or a run header: the schema check names it). ``restored``: see :func:`.stored_decode.decode_events`."""
    events, run = raw.get("events"), raw.get("run")
    if not isinstance(events, list) or not isinstance(run, dict):
        return raw
    run_id = run.get("run_id")
    decoded = decode_events(
        events,
        run_id if isinstance(run_id, str) else "",
        source=str(path),
        resolve=blob_resolver(store),
        restored=restored,
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
    """Read a cassette; every failure is a ``CassetteError``. An older format version is refused unless
    ``migrate`` (``--agentreplay-update``): then it is checked against its own version's integrity fields
    and upgraded in memory. Payloads are resolved and shape-checked lazily (:meth:`LoadedCassette.payload`).
    """
    path = path if isinstance(path, Path) else Path(path)
    default = default_blob_dir(path)  # its folder is the one the cassette must stay in
    store = BlobStore(blob_dir if blob_dir is not None else default)
    # The cyclic garbage collector is off while reading: every container made survives (it is the cassette),
    # yet each pass walks the heap pydantic's import makes large (bench_load's 6 MB cassette: 104 ms with it
    # on, 37 ms off). Left off if it was off; another thread loading meanwhile only shortens the pause.
    # A plain ``try``: a context manager costs ~14 k instructions.
    enabled = gc.isenabled()
    gc.disable()
    try:
        raw, version, doc, data, restored = _read_checked(
            path, default.parent, mode, migrate=migrate, store=store, check_integrity=check_integrity
        )
    finally:
        if enabled:
            gc.enable()
    # The stored form is only read again by `verify`: kept as the file's bytes, one object, not as thousands
    # of containers every garbage collection walks (a migrated document has no such bytes).
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
        restored=restored,
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
    """A cassette failing its integrity check, loaded for ``verify`` and ``show`` (None: not even so)."""
    try:
        return load_cassette(path, migrate=True, check_integrity=False)
    except CassetteError:
        return None


def check_header(raw: object, path: Path, mode: str | None) -> tuple[Document, int]:
    """The document and its format version, once its top level is a cassette header this package reads."""
    test = test_hint(raw)
    if not isinstance(raw, dict):
        raise CassetteCorruptError(
            f"cassette {path.name} is not a cassette: its top level is a JSON {type(raw).__name__}",
            cassette=path,
            mode=mode,
            place="line 1, column 1",
            fixes=rerecord_fixes(path, test),
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
                *rerecord_fixes(path, test),
            ],
        )
    version = raw.get("version")
    if type(version) is int and version > FORMAT_VERSION:  # not a bool: JSON's true is no version
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
    if type(version) is not int or (
        version != FORMAT_VERSION and (version < OLDEST_SUPPORTED_VERSION or version not in MIGRATIONS)
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
    return raw, version


def schema_error(exc: ValidationError, raw: Document, path: Path, mode: str | None) -> CassetteSchemaError:
    details = exc.errors(include_url=False)
    places = [_describe_loc(err["loc"], raw) for err in details]
    evidence = []
    # Only the shown problems are described: a broken cassette can hold thousands.
    for err, place in zip(details[:8], places, strict=False):
        what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        evidence.append(f"{place}: {what} (found {short(err.get('input'), 80)})")
    test = test_hint(raw)
    return CassetteSchemaError(
        f"cassette {path.name} does not match the cassette schema ({len(details)} problem(s))",
        evidence=capped(evidence, 8, total=len(details)),
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
        seq: object = index
        if isinstance(events, list) and index < len(events) and isinstance(events[index], dict):
            seq = events[index].get("seq", index)
        field_path = ".".join(str(part) for part in loc[2:]) or "(the event)"
        return f"event seq {seq} (events[{index}]), field {field_path}"
    return "field " + ".".join(str(part) for part in loc)


def check_event_keys(raw: Document, path: Path) -> None:
    """The event fields replay reads (below), checked on load: a re-sealed edit is refused with the event's
    seq and field before replay trips over it."""
    found = event_field_problem(raw["events"])
    if found is not None:
        index, problem = found
        raise CassetteSchemaError(
            f"cassette {path.name} does not match the cassette schema: event seq {index}: {problem}",
            cassette=path,
            place=f"event seq {index} (events[{index}])",
            fixes=edit_fixes(path, test_hint(raw))[:2],  # not `verify`: this error names the problem
        )


# The model leaves ``data`` free-form. Replay's matching and the diff's alignment use some of its fields as
# keys, which an object or list cannot be; the tool index (``replay/tools.py``) reads the tool events' fields.
_TOOL_EVENTS: Final = ("tool.call", "tool.result")

Field = tuple[str, str, Callable[[object], bool]]  # name under ``data``, what it must be, its check


_CONTAINERS: Final = (dict, list)


def _key(name: str) -> Field:
    return name, "a string, number or null", lambda value: not isinstance(value, _CONTAINERS)


def _is_exception(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and isinstance(value.get("class"), str)
        and isinstance(value.get("args"), list)
    )


_ATTEMPT: Final[Field] = ("attempt", "an integer", lambda value: value is None or type(value) is int)
_EVERY_EVENT: Final = (_key("group"),)
# By event type; each check sees the value of a field present in ``data``.
_DATA_FIELDS: Final[dict[str, tuple[Field, ...]]] = {
    "model.call": (_key("provider"), _key("endpoint")),
    "policy.decision": (_key("policy"),),
    "approval": (_key("subject"),),
    "http": (_key("method"),),
    "tool.call": (
        _ATTEMPT,
        ("arguments", "an object (the arguments by name)", lambda v: isinstance(v, dict)),
    ),
    "tool.result": (
        _ATTEMPT,
        ("error", "a string", lambda value: isinstance(value, str | None)),
        ("exception", '{"class": "module:qualname", "args": [...]}', _is_exception),
    ),
}


# Per event type, every check its ``data`` gets (those of every event first), built once.
_CHECKS: Final[dict[str, tuple[Field, ...]]] = {
    kind: (*_EVERY_EVENT, *fields) for kind, fields in _DATA_FIELDS.items()
}


def event_field_problem(events: Sequence[object]) -> tuple[int, str] | None:
    """The first event (its index) with a field that is not what replay reads, and the problem."""
    for index, event in enumerate(events):
        if type(event) is dict and (problem := _problem(event)) is not None:
            return index, problem
    return None


def _problem(event: Document) -> str | None:
    kind, data = event.get("type"), event.get("data")
    if kind in _TOOL_EVENTS:
        tool = event.get("tool")
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tool must be an object naming the tool (tool.name), found {short(tool)}"
    if type(data) is not dict:  # the schema check, run first, refuses it
        return None
    for name, what, check in _CHECKS.get(kind, _EVERY_EVENT) if isinstance(kind, str) else _EVERY_EVENT:
        if name in data and not check(data[name]):
            return f"data.{name} must be {what}, found {short(data[name])}"
    return None
