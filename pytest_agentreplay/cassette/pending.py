"""Pending drift: ``<cassette stem>.pending.json`` beside a cassette a replay drifted from, holding the file
``--agentreplay-update`` would have written (with its new blobs), the drift, and the digest of the cassette it
drifted from. ``agentreplay review`` / ``accept`` / ``reject`` act on it (replay never reads it): accepting
writes exactly those bytes, only while the cassette is still that one.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.canonical import dumps_pretty, sha256_hex
from ..core.constants import FORMAT_NAME, FORMAT_VERSION
from ..core.paths import PENDING_SUFFIX as SUFFIX
from ..core.paths import pending_path
from ..exceptions import CassetteError, PendingDriftError
from .atomic import write_locked
from .blobs import BlobStore, default_blob_dir
from .chain import integrity_problems
from .parsing import parse_document
from .read import check_header, checkable

if TYPE_CHECKING:
    from .write import RenderedCassette

PENDING_FORMAT = "agentreplay-pending"
PENDING_VERSION = 1


@dataclass(slots=True)
class Pending:
    path: Path
    test: str
    mode: str
    cassette: Path
    relative: str
    base: str
    drift: str
    text: bytes
    blobs: dict[str, bytes]

    def current(self) -> bytes | None:
        try:
            return self.cassette.read_bytes()
        except OSError:
            return None

    def check_base(self) -> None:
        """Raise ``PendingDriftError`` unless the cassette is still the one the drift was found against."""
        now = self.current()
        if now is not None and sha256_hex(now) == self.base:
            return
        state = "is gone" if now is None else "changed since (re-recorded, updated or edited)"
        raise PendingDriftError(
            f"{self.path.name} is stale: its cassette {state}",
            evidence=[
                f"pending drift: {self.path}",
                f"cassette:      {self.cassette}",
                f"the drift was found against a cassette with sha256 {self.base[:12]}..."
                + ("" if now is None else f", the cassette now has {sha256_hex(now)[:12]}..."),
            ],
            cassette=self.cassette,
            mode=self.mode,
            fixes=[
                f"reject it (agentreplay reject {self.path}) and run the test again to see its drift now",
                "if the cassette was replaced by mistake, restore it (git checkout) and review again",
            ],
        )

    def changes(self) -> list[str]:
        old = (self.current() or b"").decode("utf-8", "replace").splitlines()
        new = self.text.decode("utf-8").splitlines()
        return list(
            difflib.unified_diff(old, new, f"a/{self.relative}", f"b/{self.relative}", n=2, lineterm="")
        )

    def accept(self) -> Path:
        """Write the cassette the update would have written (its new blobs first), then drop this file."""
        self.check_base()
        # Written by a drifting replay, sealed: one that is not was damaged, and must not replace a cassette.
        problem = _cassette_problem(self.text, self.cassette)
        if problem is not None:
            problem = f"the cassette it holds {problem}"
        for sha, data in self.blobs.items():
            if problem is None and sha256_hex(data) != sha:
                problem = f"blob {sha[:12]}... does not match its digest"
        if problem is not None:
            raise PendingDriftError(
                f"{self.path.name} is damaged: {problem}",
                cassette=self.cassette,
                mode=self.mode,
                fixes=[f"reject it (agentreplay reject {self.path}) and run the test again"],
            )
        BlobStore(default_blob_dir(self.cassette)).write_with(self.cassette, self.text, self.blobs.items())
        self.path.unlink(missing_ok=True)
        return self.cassette

    def reject(self) -> None:
        self.path.unlink(missing_ok=True)


def _cassette_problem(text: bytes, path: Path) -> str | None:
    """What keeps ``text`` (the cassette to write at ``path``) from being a sealed cassette, read as a
    cassette is read (None: nothing)."""
    try:
        parsed = parse_document(text, path, None)
    except CassetteError as exc:
        return f"is not JSON ({exc.headline})"
    try:
        raw, version = check_header(parsed, path, None)
    except CassetteError as exc:
        return f"is not a {FORMAT_NAME} cassette of version {FORMAT_VERSION} ({exc.headline})"
    if not checkable(raw):
        return "has no run header or no list of event objects"
    try:
        problems = integrity_problems(raw, version)
    except ValueError as exc:  # a value no digest can take (a lone surrogate escape)
        return f"cannot be digested ({exc})"
    return f"fails its integrity check: {problems[0].message}" if problems else None


def write_pending(
    rendered: RenderedCassette,
    *,
    test: str,
    mode: str,
    drift: str,
    rootdir: Path,
    redact: Callable[[str], str],
) -> Path:
    """Keep ``rendered`` (the file an update would write) as the pending drift of its cassette. ``redact``:
    the run's string redaction, for the node id and the drift text."""
    cassette = rendered.path
    try:
        relative = cassette.resolve().relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        relative = cassette.name
    doc = {
        "format": PENDING_FORMAT,
        "version": PENDING_VERSION,
        "test": redact(test),
        "mode": mode,
        "cassette": relative,
        "base_sha256": sha256_hex(cassette.read_bytes()),
        "drift": redact(drift),
        "blobs": {sha: base64.b64encode(data).decode("ascii") for sha, data in rendered.new_blobs().items()},
        "cassette_text": rendered.text.decode("utf-8"),
    }
    path = pending_path(cassette)
    write_locked(path, lambda: dumps_pretty(doc).encode("utf-8"))
    return path


def read_pending(path: Path, *, root: Path | None = None) -> Pending:
    """The pending drift file at ``path``; its cassette is beside it, or under ``root`` (a file from CI)."""

    def bad(why: str) -> PendingDriftError:
        return PendingDriftError(
            f"{path.name} is not a pending drift file this version can read: {why}",
            evidence=[f"file: {path}"],
            fixes=[
                "pending files are written by a drifting replay (pytest --agentreplay-pending); "
                "run the test again to write a fresh one",
                f"delete it if it is not one: rm {path}",
            ],
        )

    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise bad(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != PENDING_FORMAT:
        raise bad(f'no "format": "{PENDING_FORMAT}"')
    if doc.get("version") != PENDING_VERSION:
        raise bad(f"version {doc.get('version')!r}, this version reads {PENDING_VERSION}")
    try:
        relative = str(doc["cassette"])
        cassette = (root / relative) if root is not None else path.with_name(Path(relative).name)
        return Pending(
            path,
            test=str(doc["test"]),
            mode=str(doc["mode"]),
            cassette=cassette,
            relative=relative,
            base=str(doc["base_sha256"]),
            drift=str(doc["drift"]),
            text=str(doc["cassette_text"]).encode("utf-8"),
            blobs={sha: base64.b64decode(data) for sha, data in dict(doc["blobs"]).items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise bad(f"a field is missing or malformed ({exc})") from None


def find_pending(paths: Iterable[Path]) -> list[Path]:
    """The pending drift files at ``paths`` (files, or folders searched recursively), sorted, each once."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob("*" + SUFFIX) if p.is_file())
        elif path.name.endswith(SUFFIX) and path.is_file():
            found.add(path)
    return sorted(found)
