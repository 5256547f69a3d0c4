"""Which blobs of a blob store may be removed (``agentreplay prune``).

A store (``<root>/.blobs``) is shared by every cassette below its root, so a plan is built from a scan of
the whole root (every format version, read without validation) that refuses when a cassette or a blob it
references cannot be read, and each removal is checked again against it: a blob a cassette outside the
folder given references is never removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.constants import BLOB_DIR_NAME, CASSETTE_SUFFIX, FORMAT_NAME
from ..exceptions import AgentReplayError, CassetteNotFoundError, PruneRefusedError
from .atomic import TEMP_PREFIX
from .blobs import BlobStore, default_blob_dir
from .parsing import read_cassette_bytes
from .stored_form import stored_refs
from .validation import SHA, capped

_DEFAULT_CLASS = "internal"


class _Unreadable(Exception):
    """A cassette whose blob references cannot be known."""


@dataclass
class Usage:
    classes: set[str] = field(default_factory=set)
    users: set[Path] = field(default_factory=set)


@dataclass
class StoreScan:
    blob_dir: Path
    root: Path
    cassettes: int
    usage: dict[str, Usage]


@dataclass(frozen=True)
class Removal:
    scan: StoreScan
    sha: str
    path: Path
    size: int
    age_days: float
    reason: str


@dataclass
class PrunePlan:
    scope: Path
    include_referenced: bool
    scans: list[StoreScan]
    removals: list[Removal] = field(default_factory=list)
    # Referenced blobs kept because --include-referenced was not given.
    kept_referenced: int = 0
    # Blobs cassettes outside ``scope`` reference: kept whatever the options.
    kept_elsewhere: int = 0

    def broken(self) -> list[Path]:
        """The cassettes that reference a blob this plan removes."""
        return sorted(
            {user for r in self.removals if r.sha in r.scan.usage for user in r.scan.usage[r.sha].users}
        )


def stores_for(folder: Path) -> list[Path]:
    """The blob stores cassettes in ``folder`` use: its own (often an ancestor's) and every store below it."""
    found = {default_blob_dir(folder / f"_{CASSETTE_SUFFIX}").resolve()}
    for dirpath, dirnames, _ in os.walk(folder):
        if BLOB_DIR_NAME in dirnames:
            found.add((Path(dirpath) / BLOB_DIR_NAME).resolve())
            dirnames.remove(BLOB_DIR_NAME)
    return sorted(d for d in found if d.is_dir())


def _cassette_files(root: Path, problems: list[str]) -> Iterator[Path]:
    """Every cassette-named file below ``root`` (symlinked folders too), real paths; a folder that cannot be
    listed is a problem."""
    seen: set[tuple[int, int]] = set()

    def unlisted(exc: OSError) -> None:
        problems.append(f"cannot list the folder {exc.filename}: {exc.strerror or exc}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted, followlinks=True):
        try:
            info = os.stat(dirpath)
        except OSError as exc:
            unlisted(exc)
            dirnames[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen:  # a symlink loop or a folder linked twice
            dirnames[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirnames[:] = sorted(d for d in dirnames if d != BLOB_DIR_NAME)
        real = Path(os.path.realpath(dirpath))
        for name in sorted(filenames):
            if name.lower().endswith(CASSETTE_SUFFIX) and not name.startswith(TEMP_PREFIX):
                yield real / name


def cassette_refs(path: Path) -> list[tuple[str, str]]:
    """(sha256, data class) of every blob reference of a cassette file of any version, read without
    validation (a damaged cassette still keeps its blobs; another JSON file has none). Raises
    ``_Unreadable``."""
    try:
        data = read_cassette_bytes(path)
    except CassetteNotFoundError:
        return []  # gone since the folder was listed (or a dangling symlink): it holds no reference
    except AgentReplayError as exc:
        raise _Unreadable(exc.headline) from None
    except OSError as exc:
        raise _Unreadable(f"it cannot be read ({exc.strerror or exc})") from None
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _Unreadable(f"it is not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or (raw.get("format") != FORMAT_NAME and "events" not in raw):
        return []
    events = raw.get("events")
    if not isinstance(events, list):
        raise _Unreadable("it has no `events` list")
    refs: list[tuple[str, str]] = []
    for index, name, ref in stored_refs(events):
        sha = ref["sha256"]
        if not (isinstance(sha, str) and SHA.fullmatch(sha)):
            raise _Unreadable(f"events[{index}].{name}.sha256 is not a blob address: {sha!r}")
        refs.append((sha, str(ref.get("data_class") or _DEFAULT_CLASS)))
    return refs


def scan_store(blob_dir: Path) -> StoreScan:
    """What every cassette below the store's root references in it, transitively; ``PruneRefusedError``
    when that cannot be known for certain."""
    blob_dir = blob_dir.resolve()
    root = blob_dir.parent
    store = BlobStore(blob_dir)
    problems: list[str] = []
    usage: dict[str, Usage] = {}
    reached: dict[str, set[str]] = {}
    count = 0
    for cassette in _cassette_files(root, problems):
        try:
            refs = cassette_refs(cassette)
        except _Unreadable as exc:
            problems.append(f"cannot tell which blobs {cassette.name} references: {exc} ({cassette})")
            continue
        count += 1
        for sha, data_class in refs:
            shas = reached.get(sha)
            if shas is None:
                if not store.exists(sha):
                    # Not here: kept in the store of a nested folder, or missing, and then what it
                    # references in turn is unknown.
                    if default_blob_dir(cassette).resolve() == blob_dir:
                        problems.append(f"{cassette} references blob {sha}, which is missing from the store")
                    continue
                try:
                    shas = store.referenced(sha)
                except AgentReplayError as exc:
                    problems.append(f"{cassette} references blob {sha}, unreadable: {exc.headline}")
                    continue
                reached[sha] = shas
            for one in shas:
                use = usage.setdefault(one, Usage())
                use.classes.add(data_class)
                use.users.add(cassette)
    if problems:
        raise PruneRefusedError(
            f"prune removed nothing: which blobs of {blob_dir} are in use cannot be told "
            f"({len(problems)} problem(s) in the cassettes that share it)",
            evidence=capped(problems, 20),
            place=f"blob store {blob_dir}, shared by every cassette under {root}",
            fixes=[
                "restore each file named from git (`git checkout -- <path>`), and a missing blob with the "
                f"store: `git checkout -- {blob_dir}`",
                "or remove each cassette named, or re-record it (a JSON file that is not a cassette: move it "
                f"out of {root}); then prune again",
                "list every problem of a cassette: `agentreplay verify <path>`",
            ],
        )
    return StoreScan(blob_dir, root, count, usage)


def plan_prune(
    folder: Path,
    *,
    data_classes: Sequence[str] = (),
    older_than: float | None = None,
    include_referenced: bool = False,
) -> PrunePlan:
    """The blobs to remove from the stores ``folder``'s cassettes use: unreferenced ones by age alone;
    referenced ones only with ``include_referenced``, a matching data class and no user outside ``folder``."""
    scope = folder.resolve()
    plan = PrunePlan(scope, include_referenced, [scan_store(d) for d in stores_for(folder)])
    wanted = set(data_classes)
    now = time.time()
    for scan in plan.scans:
        store = BlobStore(scan.blob_dir)
        for sha in store.iter_shas():
            file = store.path_for(sha)
            try:
                info = file.stat()
            except OSError:
                continue
            age_days = (now - info.st_mtime) / 86400.0
            if older_than is not None and age_days < older_than:
                continue
            use = scan.usage.get(sha)
            if use is None:
                reason = "unreferenced"
            elif wanted and not (use.classes & wanted):
                continue
            elif any(not user.is_relative_to(scope) for user in use.users):
                plan.kept_elsewhere += 1
                continue
            elif not include_referenced:
                plan.kept_referenced += 1
                continue
            else:
                reason = f"referenced, data class {'/'.join(sorted(use.classes))}"
            plan.removals.append(Removal(scan, sha, file, info.st_size, age_days, reason))
    return plan


def remove(plan: PrunePlan, removal: Removal) -> None:
    """Delete one planned blob, after checking it against the scan once more: the one place prune deletes."""
    use = removal.scan.usage.get(removal.sha)
    users = sorted(use.users) if use is not None else []
    outside = [str(u) for u in users if not u.is_relative_to(plan.scope)]
    if outside or (users and not plan.include_referenced):
        raise PruneRefusedError(
            f"refusing to remove blob {removal.sha}: cassettes still reference it",
            evidence=outside or [str(u) for u in users],
            place=str(removal.path),
            fixes=["report this as a bug of pytest-agentreplay: a prune plan must never list it"],
        )
    removal.path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        removal.path.parent.rmdir()
