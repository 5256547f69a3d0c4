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


def textconv_command() -> str:
    return shlex.join([sys.executable, "-m", "pytest_agentreplay.cli", "textconv"])


def attributes_line(cassette_dir: str) -> str:
    folder = cassette_dir.strip("/").replace("\\", "/") or "cassettes"
    return f"{folder}/**/*.json diff={DRIVER}"


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


def add_attributes_line(path: Path, line: str) -> bool:
    """Append ``line`` to the ``.gitattributes`` at ``path`` unless it is there; whether it was added."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if line in (existing.strip() for existing in text.splitlines()):
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + line + "\n", encoding="utf-8")
    return True


def run(args: argparse.Namespace) -> int:
    repo = _toplevel(Path(args.repo).resolve())
    command = textconv_command()
    key = f"diff.{DRIVER}.textconv"
    current = _git(repo, "config", "--local", "--get", key).stdout.strip()
    if current == command:
        out(f"git config {key} already set: {command}")
    else:
        done = _git(repo, "config", "--local", key, command)
        if done.returncode != 0:
            raise UsageError(f"git config {key} failed", evidence=[done.stderr.strip()])
        out(f"git config {key} = {command}" + (f" (was: {current})" if current else ""))
    line = attributes_line(args.cassette_dir)
    attributes = repo / ".gitattributes"
    if add_attributes_line(attributes, line):
        out(f"{attributes}: added `{line}` (commit it, so that every clone routes cassettes to the driver)")
    else:
        out(f"{attributes}: `{line}` already there")
    return EXIT_OK
