"""``agentreplay git-setup``: git's diff driver for cassettes, with a command that works from any shell.

git runs a textconv driver through the shell of whoever runs ``git diff``: a bare ``agentreplay`` is
found only where the virtualenv is activated. The driver is written with this interpreter's absolute
path (``/path/to/venv/bin/python -m pytest_agentreplay.cli textconv``), and ``.gitattributes`` gets the
line that routes cassettes to it. Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from .common import EXIT_OK, UsageError, out

DRIVER = "agentreplay"


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


def run(args: argparse.Namespace) -> int:
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
