"""`agentreplay prune` on one folder of a blob store shared with other folders: it reads every cassette of
the store (old formats too), refuses when one cannot be read, never removes a blob another folder uses,
and the other folder still replays afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_support import put_blob

from pytest_agentreplay.cassette.blobs import BlobStore
from pytest_agentreplay.cli import main

V1_FIXTURE = Path(__file__).parent / "data" / "v1_cassette.json"

AGENT = """
from pytest_agentreplay import tool

@tool(name="fetch_docs")
def fetch_docs(topic):
    # Large enough for the blob store (2 KiB), each paragraph (over 256 bytes) a blob of its own.
    paragraphs = [{"n": i, "text": f"{topic} paragraph {i}. " * 16} for i in range(12)]
    return {"topic": topic, "paragraphs": paragraphs}
"""


def _test_module(own_topic: str) -> str:
    return f"""
import agentlib

def test_docs(agent_replay):
    assert agentlib.fetch_docs("shared policy")["topic"] == "shared policy"
    assert agentlib.fetch_docs({own_topic!r})["paragraphs"][3]["text"].startswith({own_topic!r})
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/sub1 and tests/sub2 recorded once, by a real pytest run, into one store: cassettes/.blobs."""
    root = tmp_path_factory.mktemp("shared-store")
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n", encoding="utf-8")
    (root / "agentlib.py").write_text(AGENT, encoding="utf-8")
    for sub, topic in (("sub1", "sub1 returns"), ("sub2", "sub2 shipping")):
        folder = root / "tests" / sub
        folder.mkdir(parents=True)
        (folder / f"test_{sub}.py").write_text(_test_module(topic), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "--agentreplay-record=all", "tests", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture
def project(recorded: Path, pytester: pytest.Pytester) -> Path:
    """A fresh copy of the recorded project as the inner pytest session's folder; its cassettes folder."""
    shutil.copytree(recorded, pytester.path, dirs_exist_ok=True)
    return pytester.path / "cassettes"


def _age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def _orphan(store: Path) -> Path:
    sha = put_blob(store, {"left over by": "a re-recorded test"})
    path = store / sha[:2] / f"{sha}.json"
    _age(path, 100)
    return path


def _blobs(store: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(store.rglob("*.json"))}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _sub_blobs(cassettes: Path, sub: str) -> set[Path]:
    """Every blob (transitively) one folder's cassettes reference."""
    store = BlobStore(cassettes / ".blobs")
    shas: set[str] = set()
    for cassette in (cassettes / "tests" / sub).rglob("*.json"):
        for event in json.loads(cassette.read_text(encoding="utf-8"))["events"]:
            for name in ("input_ref", "output_ref"):
                sha = (event.get(name) or {}).get("sha256")
                if sha:
                    shas |= store.referenced(sha)
    return {store.path_for(sha) for sha in shas}


def test_prune_of_one_folder_keeps_the_blobs_its_sibling_uses(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    store = project / ".blobs"
    sub1, sub2 = project / "tests" / "sub1", project / "tests" / "sub2"
    sub1_only = _sub_blobs(project, "sub1") - _sub_blobs(project, "sub2")
    sub2_uses = _sub_blobs(project, "sub2")
    assert sub1_only and sub2_uses and not (sub1_only & sub2_uses)
    orphan = _orphan(store)
    before = _blobs(store)

    code, out, _ = _cli(capsys, "prune", "--cassette-dir", str(sub1), "--dry-run")
    assert code == 0
    size = orphan.stat().st_size
    assert f"would remove {orphan} (unreferenced, 100 day(s) old, {size} bytes)" in out
    assert "prune: 1 blob(s) would remove" in out
    assert f"blob store {store.resolve()}: read the 2 cassette file(s) under {project.resolve()}" in out
    assert _blobs(store) == before, "--dry-run deletes nothing"

    code, out, _ = _cli(capsys, "prune", "--cassette-dir", str(sub1))
    assert code == 0
    assert not orphan.exists()
    assert all(blob.exists() for blob in sub2_uses | sub1_only)

    # Even told to remove referenced blobs, it removes only what sub1 alone uses.
    code, out, _ = _cli(capsys, "prune", "--cassette-dir", str(sub1), "--include-referenced")
    assert code == 0
    assert not any(blob.exists() for blob in sub1_only)
    assert all(blob.read_bytes() == before[blob] for blob in sub2_uses)
    assert f"kept {len(sub2_uses)} blob(s) that cassettes outside {sub1} reference" in out
    assert str(sub2.resolve()) not in out.split("re-record them or remove them):")[1]

    result = pytester.runpytest("tests/sub2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 replayed*"])


def test_an_old_format_cassette_of_the_sibling_keeps_its_blobs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = project / ".blobs"
    doc = json.loads(V1_FIXTURE.read_text(encoding="utf-8"))
    payload = {"tool_use": {"name": "refund", "input": {"order": 42, "note": "x" * 3000}}}
    sha = put_blob(store, payload)
    doc["events"][1]["output_ref"] = {"data_class": "internal", "sha256": sha, "size": 3100}
    old = project / "tests" / "sub2" / "test_legacy" / "test_refund.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    blob = store / sha[:2] / f"{sha}.json"
    _age(blob, 100)

    code, out, _ = _cli(capsys, "prune", "--cassette-dir", str(project / "tests" / "sub1"))
    assert code == 0, out
    assert blob.exists()
    code, out, _ = _cli(capsys, "migrate", str(old))
    assert code == 0 and "migrated" in out
    code, out, _ = _cli(capsys, "verify", str(old))
    assert code == 0, out


def test_an_unreadable_cassette_of_the_sibling_makes_prune_refuse(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = project / ".blobs"
    orphan = _orphan(store)
    broken = project / "tests" / "sub2" / "test_sub2" / "half_written.json"
    broken.write_text('{"format": "pytest-agentreplay", "version": 4, "events": [{"output_ref": {"', "utf-8")
    before = _blobs(store)
    for args in ((), ("--include-referenced",), ("--dry-run",)):
        code, out, err = _cli(capsys, "prune", "--cassette-dir", str(project / "tests" / "sub1"), *args)
        assert code == 2
        assert "prune removed nothing" in err
        assert "cannot tell which blobs half_written.json references: it is not readable JSON" in err
        assert str(broken.resolve()) in err
        assert "How to fix:" in err and "1. restore" in err
        assert "would remove" not in out and "removed" not in out
        assert _blobs(store) == before and orphan.exists()


def test_a_missing_blob_of_the_sibling_makes_prune_refuse(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a missing blob references in turn is unknown: its children are not called unreferenced."""
    store = project / ".blobs"
    cassette = next((project / "tests" / "sub2").rglob("*.json"))
    refs = [
        event["output_ref"]["sha256"]
        for event in json.loads(cassette.read_text(encoding="utf-8"))["events"]
        if (event.get("output_ref") or {}).get("sha256")
    ]
    sha = max(refs, key=lambda ref: len(BlobStore(store).referenced(ref)))
    assert len(BlobStore(store).referenced(sha)) > 1, "the payload's paragraphs are blobs of their own"
    top = store / sha[:2] / f"{sha}.json"
    moved = project.parent / "kept-aside.json"
    shutil.move(top, moved)
    before = _blobs(store)
    code, _, err = _cli(capsys, "prune", "--cassette-dir", str(project / "tests" / "sub1"))
    assert code == 2
    assert f"references blob {sha}, which is missing from the store" in err
    assert _blobs(store) == before
