"""Cassettes recorded for a test module that no longer exists: a kept cassette is skipped by its string
alone (no Path made), which must find what comparing each file's Path finds, with an absolute or a relative
cassette folder, kept cassettes in nested folders, and one kept under a spelling that is not normalised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentreplay.core.config import build_settings
from pytest_agentreplay.core.constants import FORMAT_NAME
from pytest_agentreplay.shell.controller import SessionController


def _cassette(path: Path, nodeid: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": FORMAT_NAME, "run": {"test": nodeid}}), encoding="utf-8")
    return path


@pytest.mark.parametrize("relative", [False, True])
def test_kept_cassettes_are_never_orphans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = Path("cassettes") if relative else tmp_path / "cassettes"
    settings = build_settings(rootdir=tmp_path, cli={}, ini={}, project={})
    settings.cassette_dir = folder
    kept_top = _cassette(folder / "gone_a.json", "gone_a.py::t")
    kept_nested = _cassette(folder / "deep" / "er" / "gone_b.json", "gone_b.py::t")
    kept_odd = _cassette(folder / "odd" / "gone_c.json", "gone_c.py::t")
    orphan = _cassette(folder / "deep" / "gone_d.json", "gone_d.py::t")
    _cassette(folder / "here.json", "here.py::t")
    (tmp_path / "here.py").write_text("", encoding="utf-8")
    controller = SessionController(settings, tmp_path, is_worker=False)
    keep = {kept_top, kept_nested, Path(f"{folder}/odd/./gone_c.json")}
    assert str(kept_odd) in {str(p) for p in keep}  # pathlib's spelling of it
    assert controller._orphans(keep) == [orphan]
    # Kept by nothing: every cassette of a missing module is one.
    found = sorted(controller._orphans(set()))
    assert found == sorted([kept_top, kept_nested, kept_odd, orphan])
