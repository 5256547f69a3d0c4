"""The error for a replay whose cassette is not where the test looks.

Usually the test was never recorded: record it. But pytest run from a subdirectory without an ini file
takes that subdirectory as its rootdir, and every cassette path moves with it: re-recording there would
start a second cassette tree beside the real one. So when the test's own cassette exists under a
directory above the rootdir (:func:`~pytest_agentreplay.core.paths.cassette_elsewhere`), the error names
it and leads with making that directory the rootdir; recording comes last.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from ..core.commands import quote, record_command
from ..core.paths import cassette_elsewhere
from ..exceptions import CassetteElsewhereError, CassetteNotFoundError


def missing_cassette_error(
    nodeid: str,
    cassette: Path,
    *,
    record: str,
    mode: str,
    rootdir: Path | None = None,
    cassette_dir: Path | None = None,
) -> CassetteNotFoundError:
    """The error for ``cassette`` (the test's path from this rootdir) being absent in replay."""
    if rootdir is not None and cassette_dir is not None:
        elsewhere = cassette_elsewhere_error(
            nodeid, cassette, mode=mode, rootdir=rootdir, cassette_dir=cassette_dir
        )
        if elsewhere is not None:
            return elsewhere
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

    Recording (``--agentreplay-record=missing``) meets it too: the cassette is not missing, only looked
    for from the wrong root, so its last fix re-records with ``all``, which records wherever it is run.
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
