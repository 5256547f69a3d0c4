"""The progress bar: drawn on a TTY stderr only, cleared at the end, silent in pipes and CI logs."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from test_cli_support import build_run

from pytest_agentreplay.cli import main
from pytest_agentreplay.cli.common import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_tty() -> None:
    stream = io.StringIO()
    with Progress(10, "verify", stream=stream) as bar:
        for i in range(10):
            bar.advance(f"file{i}.json")
    assert stream.getvalue() == ""


def test_draws_and_clears_on_a_tty() -> None:
    stream = FakeTTY()
    with Progress(3, "migrate", stream=stream) as bar:
        for i in range(3):
            bar.advance(f"file{i}.json")
        assert bar.render("x") == "migrate [############################] 3/3 x"
    text = stream.getvalue()
    assert "migrate [" in text and "3/3" in text
    assert text.endswith("\r\x1b[2K")


def test_single_item_draws_nothing() -> None:
    stream = FakeTTY()
    with Progress(1, "verify", stream=stream) as bar:
        bar.advance("only")
    assert stream.getvalue() == ""


def test_cli_verify_draws_on_tty_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c"):
        build_run(tmp_path / "cassettes" / f"{name}.json")
    capsys.readouterr()
    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(["verify", str(tmp_path / "cassettes")]) == 0
    assert "verify [" in fake.getvalue()
    assert "verify [" not in capsys.readouterr().out
