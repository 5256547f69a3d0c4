"""Checks of a parsed cassette document before and after its records are built: the header (format and
version) and the schema failures, each named with its place (event seq, index, field path) and fixes."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_NAME, FORMAT_VERSION, OLDEST_SUPPORTED_VERSION
from ..core.documents import Document
from ..exceptions import CassetteCorruptError, CassetteSchemaError, CassetteVersionError
from .migrations import MIGRATIONS
from .parsing import rerecord_fixes, test_hint
from .tool_checks import event_field_problem
from .validation import short


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
    for err, place in zip(details[:8], places, strict=False):
        what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        evidence.append(f"{place}: {what} (found {short(err.get('input'), 80)})")
    if len(details) > 8:
        evidence.append(f"... and {len(details) - 8} more")
    test = test_hint(raw)
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
        seq: object = index
        if isinstance(events, list) and index < len(events) and isinstance(events[index], dict):
            seq = events[index].get("seq", index)
        field_path = ".".join(str(part) for part in loc[2:]) or "(the event)"
        return f"event seq {seq} (events[{index}]), field {field_path}"
    return "field " + ".".join(str(part) for part in loc)


def check_event_keys(raw: Document, path: Path) -> None:
    """The event fields replay reads (``tool_checks``): a re-sealed edit there is a schema error naming the
    event's seq and the field."""
    found = event_field_problem(raw["events"])
    if found is not None:
        index, problem = found
        raise CassetteSchemaError(
            f"cassette {path.name} does not match the cassette schema: event seq {index}: {problem}",
            cassette=path,
            place=f"event seq {index} (events[{index}])",
            fixes=[
                f"undo the edit or restore it: `git checkout -- {path}`",
                rerecord_fix(test_hint(raw), path),
            ],
        )
