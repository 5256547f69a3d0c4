"""Checks of a parsed cassette document before and after its records are built: the header (format and
version), the schema failures and the event fields replay reads, each named with its place (event seq,
index, field path) and fixes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from ..core.commands import rerecord_fix
from ..core.constants import FORMAT_NAME, FORMAT_VERSION, OLDEST_SUPPORTED_VERSION
from ..core.documents import Document
from ..exceptions import CassetteCorruptError, CassetteSchemaError, CassetteVersionError
from .migrations import MIGRATIONS
from .parsing import rerecord_fixes, test_hint
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
    """The event fields replay reads (below), checked when a cassette is loaded (replay and ``agentreplay
    verify``): an edit that keeps the digests sealed (a re-sealed cassette) is refused with the event's seq
    and the field, as a ``CassetteSchemaError``, before replay trips over it."""
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


# The cassette model leaves ``data`` free-form per event type. Replay's matching and the diff's alignment
# use some of its fields as keys, which a JSON object or list cannot be. The tool events' fields are read by
# the tool index (``replay/tools.py``) and the diff as: ``tool.call``: ``data.arguments`` an object (matched
# by name and arguments), ``data.attempt`` an integer; ``tool.result``: ``data.error`` a string,
# ``data.exception`` the recorded exception's ``{"class": "module:qualname", "args": [...]}``. Both name
# their tool (``tool.name``).
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
    """The first event (its index: its seq in a cassette whose seqs are dense, as the load checks) with a
    field that is not what replay reads, and the problem."""
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
