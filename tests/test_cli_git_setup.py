"""`agentreplay git-setup`: cassette diffs through textconv from any shell, set up idempotently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_support import build_run, read, write_rechained

from pytest_agentreplay.cli import main


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.invalid")
    git(tmp_path, "config", "user.name", "t")
    return tmp_path


def test_a_cassette_diff_works_from_a_shell_without_the_virtualenv(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = repo / "cassettes" / "tests" / "test_agent" / "test_refund.json"
    build_run(cassette)
    assert main(["git-setup", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert f"diff.agentreplay.textconv = {sys.executable} -m pytest_agentreplay.cli textconv" in out
    assert (repo / ".gitattributes").read_text() == "cassettes/**/*.json diff=agentreplay\n"
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "recorded")
    doc = read(cassette)
    doc["events"][8]["data"]["arguments"]["amount"] = 4000
    write_rechained(cassette, doc)
    # A shell whose PATH has git and nothing of this interpreter's virtualenv.
    git_dir = os.path.dirname(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip())
    env = {"PATH": git_dir, "HOME": str(repo)}
    diff = git(repo, "diff", env=env)  # check=True: a driver git cannot run fails the diff
    assert any(line.startswith("+") and '"amount": 4000' in line for line in diff.splitlines()), diff
    # The driver as it was documented before (a bare command name) fails in that shell.
    git(repo, "config", "diff.agentreplay.textconv", "agentreplay textconv")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        git(repo, "diff", env=env)
    assert "unable to read files to diff" in failed.value.stderr


def test_running_it_again_changes_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".gitattributes").write_text("*.png binary")
    assert main(["git-setup", "--repo", str(repo), "--cassette-dir", "tests/cassettes/"]) == 0
    first = (repo / ".gitattributes").read_text()
    assert first == "*.png binary\ntests/cassettes/**/*.json diff=agentreplay\n"
    capsys.readouterr()
    assert main(["git-setup", "--repo", str(repo), "--cassette-dir", "tests/cassettes"]) == 0
    out = capsys.readouterr().out
    assert "already set" in out and "already there" in out
    assert (repo / ".gitattributes").read_text() == first
    assert git(repo, "config", "--get-all", "diff.agentreplay.textconv").count("\n") == 1


def test_outside_a_repository_it_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["git-setup", "--repo", str(tmp_path)])
    assert code == 2
    assert "is not inside a git repository" in capsys.readouterr().err
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == "[]"
