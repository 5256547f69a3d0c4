"""SIGKILL at random moments while a cassette is being saved: the target is absent or fully valid."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.atomic import TEMP_PREFIX
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta, ToolInfo

KILLS = 40
TIME_BUDGET_S = 35.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs fork and SIGKILL")


def variant(tag: int) -> list[Event]:
    return [
        Event.model_validate(
            {
                "run_id": f"run-{tag}",
                "seq": seq,
                "ts": "2025-01-01T00:00:00Z",
                "type": "tool.result",
                "actor": "tool",
                "class": "input",
                "tool": ToolInfo(name="rows"),
                "data": {"variant": tag, "row": seq, "text": f"variant {tag} " * 100},
                # Every tenth payload goes to the blob store, so blob writes get killed too.
                "output_ref": PayloadRef(inline={"rows": [tag, seq] * (600 if seq % 10 == 0 else 20)}),
            }
        )
        for seq in range(250)
    ]


def writer(path: str, started: Any) -> None:
    histories = [variant(0), variant(1)]
    started.set()
    tag = 0
    while True:
        save_cassette(Path(path), RunMeta(run_id=f"run-{tag}"), histories[tag])
        tag = 1 - tag


def wait_for_temp_file(folder: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(name.startswith(TEMP_PREFIX) for name in os.listdir(folder)):
            return
        time.sleep(0.0002)


def test_sigkill_never_leaves_a_partial_cassette(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    path = folder / "test_kill.json"
    context = multiprocessing.get_context("fork")
    rng = random.Random(20250101)
    # Kill times scale with what one save costs on this machine (redaction and scans make it slower under
    # load): some kills must land after a save completed, or the test would prove nothing about "valid".
    probe = tmp_path / "probe" / "timing.json"
    probe.parent.mkdir()
    timed = time.monotonic()
    save_cassette(probe, RunMeta(run_id="run-0"), variant(0))
    save_s = max(0.05, time.monotonic() - timed)
    start = time.monotonic()
    outcomes = {"absent": 0, "valid": 0}
    for kill in range(KILLS):
        budget = TIME_BUDGET_S + KILLS * 3 * save_s
        assert time.monotonic() - start < budget, f"only {kill} kills within the time budget"
        started = context.Event()
        child = context.Process(target=writer, args=(str(path), started), daemon=True)
        child.start()
        # A forked child can take seconds to be scheduled on a loaded 2-core machine.
        assert started.wait(60), "writer did not start"
        if kill % 2:
            # Half the kills aim at the write itself: right after a temp file shows up.
            wait_for_temp_file(folder, rng.uniform(0.02, 2 * save_s))
            time.sleep(rng.uniform(0, 0.0005))
        else:
            time.sleep(rng.uniform(0, 3 * save_s))
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        assert child.exitcode == -signal.SIGKILL

        if not path.exists():
            outcomes["absent"] += 1
            continue
        loaded = load_cassette(path, verify_blobs=True)
        tags = {event.data["variant"] for event in loaded.events}
        assert len(loaded.events) == 250 and len(tags) == 1
        assert loaded.run.run_id == f"run-{tags.pop()}"
        outcomes["valid"] += 1

    assert outcomes["valid"] > 0, outcomes
    strays = [p.name for p in folder.rglob("*") if p.is_file() and p.name.startswith(TEMP_PREFIX)]
    # Only temp files can be left over, and the blob store never lists them.
    others = [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(TEMP_PREFIX)]
    assert all(p == path or p.suffix == ".json" for p in others)
    print(f"kills: {KILLS}, outcomes: {outcomes}, stray temp files: {len(strays)}")


def test_next_write_removes_part_files_of_killed_writers(tmp_path: Path) -> None:
    """A SIGKILLed writer's temp file goes at the next write; a live writer's file is left alone."""
    from pytest_agentreplay.cassette.atomic import STALE_PART_AGE_S, remove_stale_parts

    folder = tmp_path / "cassettes"
    folder.mkdir()
    path = folder / "test_kill.json"
    context = multiprocessing.get_context("fork")
    leftovers: set[str] = set()
    for _ in range(20):
        if len(leftovers) >= 2:
            break
        started = context.Event()
        child = context.Process(target=writer, args=(str(path), started), daemon=True)
        child.start()
        assert started.wait(10)
        wait_for_temp_file(folder, 5.0)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        leftovers |= {n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)}
    assert leftovers, "no kill landed during a write"

    # A live writer's temp file (this process's child, still running), a stale old-style name, a fresh one.
    sleeper = context.Process(target=time.sleep, args=(30,), daemon=True)
    sleeper.start()
    from pytest_agentreplay.cassette import atomic

    live = folder / f"{TEMP_PREFIX}{atomic._HOST_TAG}-{sleeper.pid}-live.part"
    live.write_bytes(b"partial")
    old = folder / f"{TEMP_PREFIX}legacy-old.part"
    old.write_bytes(b"partial")
    os.utime(old, (time.time() - STALE_PART_AGE_S - 10,) * 2)
    fresh = folder / f"{TEMP_PREFIX}legacy-fresh.part"
    fresh.write_bytes(b"partial")
    try:
        save_cassette(path, RunMeta(run_id="run-0"), variant(0)[:5])
        remaining = {n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)}
        assert not (leftovers & remaining), f"killed writers' files survived the next write: {remaining}"
        assert live.name in remaining and fresh.name in remaining and old.name not in remaining
        assert remove_stale_parts(folder) == []
    finally:
        sleeper.kill()
        sleeper.join(10)
    assert remove_stale_parts(folder) == [live.name]
    load_cassette(path, verify_blobs=True)
