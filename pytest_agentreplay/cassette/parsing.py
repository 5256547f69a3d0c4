"""A cassette file's bytes and their parse: only a regular file inside its cassette folder, of bounded size
and nesting; a missing, unreadable, empty, truncated or non-UTF-8 file named with its place and fixes."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from ..core.commands import quote, record_command, rerecord_fix
from ..core.paths import cassette_elsewhere
from ..exceptions import (
    CassetteCorruptError,
    CassetteElsewhereError,
    CassetteError,
    CassetteLimitError,
    CassetteNotFoundError,
)
from .blobs import default_blob_dir
from .validation import (
    MAX_CASSETTE_BYTES,
    UNPARSED,
    NestingTooDeep,
    parse_fast,
    read_regular_file,
    reject_constant,
)


def test_hint(raw: object) -> str | None:
    """The node id the cassette records, when it can be read (None when it cannot)."""
    if isinstance(raw, dict) and isinstance(raw.get("run"), dict) and isinstance(raw["run"].get("test"), str):
        return str(raw["run"]["test"])
    return None


def rerecord_fixes(path: Path, test: str | None = None) -> list[str]:
    return [f"restore the file from git: `git checkout -- {path}`", rerecord_fix(test, path)]


def edit_fixes(path: Path, test: str | None) -> list[str]:
    return [
        f"undo the edit or restore it: `git checkout -- {path}`",
        rerecord_fix(test, path),
        f"list every problem: `agentreplay verify {path}`",
    ]


def parse_document(data: bytes, path: Path, mode: str | None) -> object:
    try:
        value = parse_fast(data)
    except NestingTooDeep as exc:
        raise CassetteLimitError(
            f"cassette {path.name} is nested too deeply to be a cassette",
            evidence=[str(exc)],
            cassette=path,
            mode=mode,
            fixes=rerecord_fixes(path),
        ) from None
    return _parse_slow(data, path, mode) if value is UNPARSED else value


def _parse_slow(data: bytes, path: Path, mode: str | None) -> object:
    def corrupt(
        what: str, *evidence: str, place: str | None = None, fixes: Sequence[str] = ()
    ) -> CassetteCorruptError:
        fixes = fixes or rerecord_fixes(path)
        return CassetteCorruptError(
            f"cassette {path.name} {what}",
            evidence=evidence,
            cassette=path,
            mode=mode,
            place=place,
            fixes=fixes,
        )

    if not data.strip():
        raise corrupt("is empty", f"{len(data)} bytes, no JSON document", place="line 1, column 1")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise corrupt("is not valid UTF-8", str(exc), place=f"byte {exc.start} (line {line})") from None
    conflict = _conflict_marker_line(text)
    if conflict is not None:
        raise corrupt(
            "holds git merge-conflict markers",
            f"line {conflict}: {text.splitlines()[conflict - 1][:60]}",
            place=f"line {conflict}",
            fixes=[
                # `git checkout -- path` refuses an unmerged path: these work during the merge.
                f"keep one side whole: `git checkout --theirs -- {path}` (the branch merged in) or "
                f"`git checkout --ours -- {path}`, then `git add {path}` (the blobs of both sides are in the "
                "store)",
                f"or, after the merge, {rerecord_fix(_recorded_test(text), path)}, then `git add {path}`",
            ],
        )
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or not text.rstrip().endswith("}")
        what = "is not valid JSON" + (" (the file looks truncated)" if truncated else "")
        raise corrupt(what, exc.msg, place=f"line {exc.lineno}, column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise corrupt(f"cannot be parsed: {exc}") from None


_CONFLICT_MARKERS = ("<<<<<<< ", "=======", ">>>>>>> ", "||||||| ")


def _conflict_marker_line(text: str) -> int | None:
    """The first line (1-based) that is a git conflict marker; canonical JSON never starts a line so."""
    if "\n<<<<<<< " not in text and not text.startswith("<<<<<<< "):
        return None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(_CONFLICT_MARKERS):
            return number
    return None


def _recorded_test(text: str) -> str | None:
    """The node id in the run header of a file that does not parse (both sides of a conflict name it)."""
    found = re.search(r'"test": "((?:[^"\\]|\\.)*)"', text)
    return json.loads(f'"{found.group(1)}"') if found else None


def read_cassette_bytes(path: Path, mode: str | None = None, *, root: Path | None = None) -> bytes:
    """The bytes of a cassette file: a regular file inside its cassette folder (``root``), of bounded size."""
    try:
        return read_regular_file(
            path,
            limit=MAX_CASSETTE_BYTES,
            label=f"cassette {path.name}",
            root=root or default_blob_dir(path).parent,
            cassette=path,
            fixes=rerecord_fixes(path),
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
            fixes=["check the path and its permissions", *rerecord_fixes(path)],
        ) from None


def missing_cassette_error(nodeid: str, cassette: Path, *, record: str, mode: str) -> CassetteNotFoundError:
    """The error for ``cassette`` being absent in replay (and not above the rootdir either)."""
    return CassetteNotFoundError(
        f"no cassette for {nodeid}",
        evidence=[f"record mode is {record!r}: an absent cassette is not recorded"],
        cassette=cassette,
        mode=mode,
        fixes=[
            f"record it against the real services: {record_command(nodeid)}",
            "commit the new cassette with the change that needs it",
        ],
    )


def cassette_elsewhere_error(
    nodeid: str, cassette: Path, *, mode: str, rootdir: Path, cassette_dir: Path
) -> CassetteElsewhereError | None:
    """The error naming the test's cassette under a directory above the rootdir, if it has one there.

    pytest run from a subdirectory without an ini file takes it as its rootdir, and every cassette path
    moves with it: re-recording there would start a second cassette tree. So the error leads with making
    that directory the rootdir; recording (with ``all`` in record mode, which records anywhere) comes last.
    """
    found = cassette_elsewhere(rootdir, cassette_dir, cassette, nodeid)
    if found is None:
        return None
    root, path = found
    record = "all" if mode == "record" else "missing"
    there = f"{rootdir.resolve().relative_to(root).as_posix()}/{nodeid}"
    # The test as an argument from where pytest was started (with arguments, pytest would otherwise take
    # their common directory as the rootdir, so the rootdir is named on that command line).
    module, _, rest = nodeid.partition("::")
    target = rootdir.resolve() / module
    with suppress(ValueError):
        target = target.relative_to(Path.cwd().resolve())
    argument = f"{target.as_posix()}::{rest}" if rest else target.as_posix()
    pyproject = root / "pyproject.toml"
    ini = (
        f"add a [tool.pytest.ini_options] table (an empty one will do) to {pyproject}"
        if pyproject.is_file()
        else f'create {root / "pytest.ini"} holding the line "[pytest]"'
    )
    return CassetteElsewhereError(
        f"no cassette for {nodeid} under the rootdir {rootdir}, but the test has one under {root}",
        evidence=[
            f"looked for: {cassette}",
            f"found:      {path} (recorded for {there})",
            f"cassette paths start at pytest's rootdir: here {rootdir}, there {root} "
            "(without an ini file, pytest takes the directory of its test arguments, or the one it starts "
            "in, as its rootdir)",
        ],
        cassette=cassette,
        mode=mode,
        fixes=[
            f"{ini}: pytest then takes {root} as its rootdir wherever it starts, and finds the cassettes",
            f"or name the rootdir on the command line: pytest --rootdir={quote(str(root))} {quote(argument)}",
            f"only if this test's cassettes belong under {rootdir} (a second cassette tree beside the one "
            f"under {root}): record it here: {record_command(nodeid, record)}",
        ],
        found=path,
        root=root,
    )
