"""unused_cassettes resolves each cassette folder once: the same answer as resolving every known path."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

from pytest_agentreplay.cassette.unused import unused_cassettes
from pytest_agentreplay.core.constants import FORMAT_NAME

_CASSETTE = json.dumps({"format": FORMAT_NAME})


def _write(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(_CASSETTE)


def test_one_resolution_per_folder_same_answer(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _write(real, "a.json", "b.json", "c.json", "gone.json")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    # Known through the symlinked folder and through the real one: neither is unused.
    known = [link / "a.json", link / "b.json", real / "c.json"]
    calls: list[Path] = []
    original = Path.resolve

    def counting(self: Path, strict: bool = False) -> Path:
        calls.append(self)
        return original(self, strict=strict)

    with mock.patch.object(Path, "resolve", counting):
        found = unused_cassettes([link], known)
    assert found.cassettes == [real / "gone.json"]
    assert found.not_cassettes == []
    # One per folder of the known paths and per module folder (and the known files only when asked).
    assert calls.count(link) == 2
    expected = {p.resolve() for p in known}
    assert {(p.parent.resolve() / p.name) for p in known} == expected
