"""Older formats are refused on load (never upgraded silently); `migrate_file` upgrades atomically."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.maintenance import migrate_file
from pytest_agentreplay.cassette.migrations import MIGRATIONS, migrate_document
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.stored_decode import decode_events
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import hash_value
from pytest_agentreplay.core.constants import FORMAT_VERSION
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta, ToolInfo
from pytest_agentreplay.exceptions import CassetteIntegrityError, CassetteSchemaError, CassetteVersionError

V1_FIXTURE = Path(__file__).parent / "data" / "v1_cassette.json"


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    path = tmp_path / "cassettes" / "test_support" / "test_refund.json"
    path.parent.mkdir(parents=True)
    shutil.copy(V1_FIXTURE, path)
    return path


def test_fixture_is_version_1() -> None:
    doc = json.loads(V1_FIXTURE.read_text())
    assert doc["version"] == 1 and "head_hash" not in doc
    assert all("prev_hash" not in event for event in doc["events"])


def test_every_old_version_has_a_migration() -> None:
    assert sorted(MIGRATIONS) == list(range(1, FORMAT_VERSION))


def test_v1_is_refused_on_load_until_migrated(v1: Path) -> None:
    # An old version has no chain: only `agentreplay migrate` upgrades it (issue 11), never a plain load,
    # so relabelling an edited file as version 1 cannot get it past the checks.
    before = v1.read_bytes()
    mtime = v1.stat().st_mtime_ns
    with pytest.raises(CassetteVersionError) as info:
        load_cassette(v1)
    assert f"agentreplay migrate {v1}" in str(info.value) and "How to fix:" in str(info.value)
    assert v1.read_bytes() == before and v1.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in v1.parent.iterdir()) == ["test_refund.json"]
    assert migrate_file(v1) is True
    loaded = load_cassette(v1)
    assert [e.type for e in loaded.events] == ["run.start", "model.call", "tool.call", "run.end"]
    assert loaded.events[2].tool is not None and loaded.events[2].tool.idempotency_key == "refund-42"
    assert loaded.payload(loaded.events[0].input_ref) == {"user": "I want a refund for order 42"}
    assert loaded.verify() == []


def test_migration_computes_the_digests(v1: Path) -> None:
    doc = migrate_document(json.loads(v1.read_text()))
    assert doc["version"] == FORMAT_VERSION and doc["event_count"] == 4
    assert all("prev_hash" not in event for event in doc["events"])
    assert doc["event_digests"] == [
        hash_value({k: v for k, v in event.items() if k != "seq"}) for event in doc["events"]
    ]
    digests = doc["event_digests"]
    assert doc["head_hash"] == hash_value(
        {"version": FORMAT_VERSION, "run": doc["run"], "event_count": 4, "event_digests": digests}
    )


# -- version 2 (the prev_hash chain) -> version 3 (per-event digests) --------------------------------


def _v2_doc() -> dict[str, Any]:
    """A version-2 cassette as version 2 wrote it: the v1 fixture with its prev_hash chain."""
    doc = MIGRATIONS[1](json.loads(V1_FIXTURE.read_text()), "fixture")
    assert doc["version"] == 2 and all("prev_hash" in event for event in doc["events"])
    return doc


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    path = tmp_path / "cassettes" / "test_support" / "test_refund.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_v2_doc(), indent=2, sort_keys=True) + "\n")
    return path


def test_intact_v2_is_refused_on_load_and_says_only_migrate_upgrades_it(v2: Path) -> None:
    with pytest.raises(CassetteVersionError) as info:
        load_cassette(v2)
    message = str(info.value)
    assert "old format version 2" in message
    assert "intact version-2 cassette is upgraded only by `agentreplay migrate`" in message


def test_v2_migrates_to_current_atomically(v2: Path) -> None:
    assert migrate_file(v2) is True
    doc = json.loads(v2.read_text())
    assert doc["version"] == FORMAT_VERSION and "event_digests" in doc
    assert all("prev_hash" not in event for event in doc["events"])
    assert not [p for p in v2.parent.iterdir() if p.name != v2.name]  # no temp file left behind
    loaded = load_cassette(v2)
    assert loaded.verify() == []
    assert [e.type for e in loaded.events] == ["run.start", "model.call", "tool.call", "run.end"]
    assert migrate_file(v2) is False


def test_v2_migration_keeps_every_event_but_the_chain(v2: Path) -> None:
    before = _v2_doc()
    migrate_file(v2)
    after = json.loads(v2.read_text())
    assert after["run"] == {**after["run"], **before["run"]}  # defaults filled in, nothing changed
    stored = decode_events(after["events"], after["run"]["run_id"])  # the version-4 stored form, read back
    assert [{k: v for k, v in e.items() if k != "prev_hash"} for e in before["events"]] == stored


@pytest.mark.parametrize(
    ("tamper", "found"),
    [
        (lambda d: d["events"][1]["data"].update(model="edited"), "seq 1 was edited"),
        (lambda d: d["events"].insert(2, d["events"].pop(1)), "events were reordered"),
        (lambda d: d["events"].pop(), "event_count is 4 but the file holds 3"),
        (lambda d: d["run"].update(model="edited"), "run metadata was edited"),
    ],
)
def test_tampered_v2_is_not_migrated(v2: Path, tamper: Callable[[dict[str, Any]], Any], found: str) -> None:
    doc = _v2_doc()
    tamper(doc)
    v2.write_text(json.dumps(doc))
    before = v2.read_bytes()
    with pytest.raises(CassetteIntegrityError, match=found):
        migrate_file(v2)
    assert v2.read_bytes() == before


def test_v3_relabelled_v2_is_refused(v2: Path) -> None:
    # A current file relabelled as the previous version must not get fresh digests over an edit.
    migrate_file(v2)
    doc = json.loads(v2.read_text())
    doc["version"] = 2
    doc["events"][1]["data"]["model"] = "edited"
    v2.write_text(json.dumps(doc))
    with pytest.raises(CassetteSchemaError, match="version-3 field event_digests"):
        load_cassette(v2)
    with pytest.raises(CassetteSchemaError, match="version-3 field event_digests"):
        migrate_file(v2)


def test_update_load_migrates_an_intact_v2_in_memory(v2: Path) -> None:
    before = v2.read_bytes()
    loaded = load_cassette(v2, migrate=True)
    assert len(loaded.events) == 4 and loaded.verify() == []
    assert v2.read_bytes() == before  # only the save of an accepted update rewrites the file


def test_migrate_file_dry_run_then_real(v1: Path) -> None:
    before = v1.read_bytes()
    assert migrate_file(v1, dry_run=True) is True
    assert v1.read_bytes() == before
    assert migrate_file(v1) is True
    doc = json.loads(v1.read_text())
    assert doc["version"] == FORMAT_VERSION
    assert migrate_file(v1) is False  # already current
    after = v1.read_bytes()
    loaded = load_cassette(v1)
    save_cassette(v1, loaded.run, loaded.events)
    assert v1.read_bytes() == after  # the migrated file is already canonical


def test_v1_relabelled_v2_file_is_refused(tmp_path: Path) -> None:
    # Relabelling a v2 file as v1 must not be a way to get a fresh chain over an edited event.
    path = tmp_path / "c.json"
    shutil.copy(V1_FIXTURE, path)
    migrate_file(path)
    doc = json.loads(path.read_text())
    doc["version"] = 1
    doc["events"][1]["data"]["model"] = "edited"
    path.write_text(json.dumps(doc))
    with pytest.raises(CassetteSchemaError) as info:
        load_cassette(path)
    assert "version-2 field" in str(info.value) and path.name in str(info.value)


def test_broken_v1_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    doc = json.loads(V1_FIXTURE.read_text())
    doc["events"][2] = "not an event"
    path.write_text(json.dumps(doc))
    with pytest.raises(CassetteSchemaError, match=r"events\[2\]"):
        load_cassette(path)
    doc = json.loads(V1_FIXTURE.read_text())
    doc["events"][1]["seq"] = 5
    path.write_text(json.dumps(doc))
    with pytest.raises(CassetteIntegrityError, match="seq 5"):
        load_cassette(path)


def test_migrate_file_refuses_broken_files(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    doc = json.loads(V1_FIXTURE.read_text())
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(CassetteVersionError):
        migrate_file(path)
    assert path.read_bytes() == before


def test_a_saved_cassette_matches_the_published_json_schema(tmp_path: Path) -> None:
    import jsonschema  # type: ignore[import-untyped]

    from pytest_agentreplay.core.events import cassette_json_schema

    events = [
        Event(run_id="r", seq=0, ts="t", type="run.start", actor="runtime", event_class="input"),
        Event(
            run_id="r",
            seq=1,
            ts="t",
            type="http",
            actor="tool",
            event_class="input",
            tool=ToolInfo(name="example.com/a"),
            data={"method": "GET", "url": "https://example.com/a", "status": 200},
            input_ref=PayloadRef(
                inline={"method": "GET", "url": "https://example.com/a", "headers": {}, "body": None},
                media_type="application/vnd.agentreplay.http-request+json",
            ),
        ),
    ]
    path = tmp_path / "cassettes" / "s.json"
    save_cassette(path, RunMeta(run_id="r"), events)
    doc = json.loads(path.read_text())
    assert "run_id" not in doc["events"][1] and "tool" not in doc["events"][1]  # left out as they repeat
    jsonschema.validate(doc, cassette_json_schema(), cls=jsonschema.Draft202012Validator)
    assert load_cassette(path).event_dicts()[1]["tool"] == {"name": "example.com/a"}
