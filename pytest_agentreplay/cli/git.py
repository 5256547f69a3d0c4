"""The git integration: ``agentreplay textconv`` (git's diff driver) and ``agentreplay git-setup``.

git runs a textconv driver through the shell of whoever runs ``git diff``, where a bare ``agentreplay`` may
not be found: the driver is written with this interpreter's absolute path. git runs textconv once per
changed cassette: this module loads neither the diff, the viewer nor replay.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from ..cassette.blobs import BlobStore, default_blob_dir
from ..cassette.parsing import read_cassette_bytes
from ..cassette.stored_form import stored_refs
from ..core.canonical import dumps_pretty
from ..core.constants import BLOB_DIR_NAME, DEFAULT_CASSETTE_DIR
from ..exceptions import AgentReplayError, CassetteError
from .common import EXIT_OK, EXIT_USAGE, UsageError, err, out

DRIVER = "agentreplay"


def _textconv_blob_dir(path: Path, explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    found = default_blob_dir(path)
    if found.is_dir():
        return found
    # git hands textconv a temporary copy of an older revision: look from where git runs (the repository).
    for ancestor in (Path.cwd(), *Path.cwd().parents):
        for candidate in (ancestor / DEFAULT_CASSETTE_DIR / BLOB_DIR_NAME, ancestor / BLOB_DIR_NAME):
            if candidate.is_dir():
                return candidate
    return found


def textconv(args: argparse.Namespace) -> int:
    path = Path(args.cassette)
    try:
        data = read_cassette_bytes(path)
    except (CassetteError, OSError) as exc:
        err(f"textconv: {getattr(exc, 'headline', exc)}")
        return EXIT_USAGE
    # Every blob-stored payload inlined next to its sha256; a damaged file never fails the diff: what
    # cannot be resolved is named in place.
    try:
        raw = json.loads(data)
        store = BlobStore(_textconv_blob_dir(path, args.blob_dir))
        for _, _, ref in stored_refs(raw.get("events") if isinstance(raw, dict) else None):
            if not isinstance(ref["sha256"], str):
                continue
            try:
                ref["inline"] = store.load(ref["sha256"])
            except (AgentReplayError, OSError, ValueError, RecursionError) as exc:
                ref["inline"] = f"<payload not resolved: {getattr(exc, 'headline', exc)}>"
        text = dumps_pretty(raw)
    except (ValueError, RecursionError):
        sys.stdout.buffer.write(data)  # not a cassette git can render: the bytes as they are
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def _toplevel(start: Path) -> Path:
    try:
        found = _git(start, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        raise UsageError(
            "git-setup needs git on PATH", fixes=["install git, then run agentreplay git-setup again"]
        ) from None
    if found.returncode != 0:
        raise UsageError(
            f"{start} is not inside a git repository",
            evidence=[found.stderr.strip()],
            fixes=["run it from the repository's folder, or pass --repo PATH"],
        )
    return Path(found.stdout.strip())


def git_setup(args: argparse.Namespace) -> int:
    repo = _toplevel(Path(args.repo).resolve())
    command = shlex.join([sys.executable, "-m", "pytest_agentreplay.cli", "textconv"])
    key = f"diff.{DRIVER}.textconv"
    current = _git(repo, "config", "--local", "--get", key).stdout.strip()
    if current == command:
        out(f"git config {key} already set: {command}")
    else:
        done = _git(repo, "config", "--local", key, command)
        if done.returncode != 0:
            raise UsageError(f"git config {key} failed", evidence=[done.stderr.strip()])
        out(f"git config {key} = {command}" + (f" (was: {current})" if current else ""))
    folder = args.cassette_dir.strip("/").replace("\\", "/") or "cassettes"
    line = f"{folder}/**/*.json diff={DRIVER}"
    attributes = repo / ".gitattributes"
    text = attributes.read_text(encoding="utf-8") if attributes.exists() else ""
    if line in (existing.strip() for existing in text.splitlines()):
        out(f"{attributes}: `{line}` already there")
    else:
        separator = "\n" if text and not text.endswith("\n") else ""
        attributes.write_text(f"{text}{separator}{line}\n", encoding="utf-8")
        out(f"{attributes}: added `{line}` (commit it, so that every clone routes cassettes to the driver)")
    return EXIT_OK
