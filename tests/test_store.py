"""Cassette store: canonical round trip, hash chain, every failure as its own CassetteError subclass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cassette.atomic import TEMP_PREFIX, lock_path_for, path_lock
from pytest_agentreplay.cassette.blobs import BlobStore, default_blob_dir
from pytest_agentreplay.cassette.loaded import verify_chain
from pytest_agentreplay.cassette.read import load_cassette
from pytest_agentreplay.cassette.write import save_cassette
from pytest_agentreplay.core.canonical import dumps_cassette, hash_value
from pytest_agentreplay.core.constants import FORMAT_VERSION
from pytest_agentreplay.core.events import Event, PayloadRef, RunMeta
from pytest_agentreplay.exceptions import (
    BlobMissingError,
    CassetteCorruptError,
    CassetteError,
    CassetteIntegrityError,
    CassetteNotFoundError,
    CassetteSchemaError,
    CassetteVersionError,
)

RUN = RunMeta(run_id="run-1", agent="bot", model="claude-3-5-sonnet-20241022", test="tests/test_x.py::test_a")


def make_event(seq: int, inline: Any = None, **extra: Any) -> Event:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "seq": seq,
        "ts": f"2025-01-01T00:00:{seq:02d}Z",
        "type": "model.call",
        "actor": "model",
        "class": "decision",
        "data": {"n": seq, "usage": {"input_tokens": 10 * seq, "output_tokens": 3}},
    }
    if inline is not None:
        fields["output_ref"] = PayloadRef(inline=inline)
    fields.update(extra)
    return Event.model_validate(fields)


def history(n: int = 6) -> list[Event]:
    big = {"text": "lorem ipsum " * 400}
    return [make_event(i, inline=big if i % 3 == 0 else {"reply": f"answer {i}"}) for i in range(n)]


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "cassettes" / "test_x" / "test_a.json"
    save_cassette(path, RUN, history())
    return path


def load_error(path: Path, cls: type[CassetteError]) -> CassetteError:
    with pytest.raises(CassetteError) as info:
        load_cassette(path)
    assert type(info.value) is cls, f"expected {cls.__name__}, got {type(info.value).__name__}: {info.value}"
    message = str(info.value)
    assert path.name in message
    assert "How to fix:" in message and "  1. " in message
    return info.value


def rewrite(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


# -- round trip -----------------------------------------------------------------------------------


def test_save_load_save_is_byte_identical(cassette: Path) -> None:
    first = cassette.read_bytes()
    loaded = load_cassette(cassette)
    save_cassette(cassette, loaded.run, loaded.events)
    assert cassette.read_bytes() == first
    again = load_cassette(cassette)
    assert again.event_dicts() == loaded.event_dicts()


def test_file_is_canonical_pretty_json(cassette: Path) -> None:
    text = cassette.read_text(encoding="utf-8")
    assert text == dumps_cassette(json.loads(text))
    assert text.endswith("}\n")


def test_saving_twice_from_memory_is_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "c.json", tmp_path / "b" / "c.json"
    save_cassette(a, RUN, history())
    save_cassette(b, RUN, history())
    assert a.read_bytes() == b.read_bytes()


def test_payloads_round_trip_inline_and_blob(cassette: Path) -> None:
    loaded = load_cassette(cassette)
    assert loaded.events[0].output_ref is not None and loaded.events[0].output_ref.sha256 is not None
    assert loaded.events[0].output_ref.inline is None
    assert loaded.payload(loaded.events[0].output_ref) == {"text": "lorem ipsum " * 400}
    assert loaded.payload(loaded.events[1].output_ref) == {"reply": "answer 1"}
    assert loaded.payload(None) is None


def test_integrity_fields(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    assert doc["version"] == FORMAT_VERSION
    assert doc["event_count"] == 6
    assert all("prev_hash" not in event for event in doc["events"])
    # One digest per event over its content without seq; the head binds run, count and the ordered list.
    assert doc["event_digests"] == [
        hash_value({k: v for k, v in event.items() if k != "seq"}) for event in doc["events"]
    ]
    digests = doc["event_digests"]
    assert doc["head_hash"] == hash_value(
        {"version": FORMAT_VERSION, "run": doc["run"], "event_count": 6, "event_digests": digests}
    )
    assert verify_chain(doc) == []


def test_empty_history(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    save_cassette(path, RUN, [])
    doc = json.loads(path.read_text())
    assert doc["event_count"] == 0 and doc["event_digests"] == []
    assert doc["head_hash"] == hash_value(
        {"version": FORMAT_VERSION, "run": doc["run"], "event_count": 0, "event_digests": []}
    )
    assert load_cassette(path).events == []


def test_seq_must_be_dense(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seq must be dense"):
        save_cassette(tmp_path / "c.json", RUN, [make_event(0), make_event(2)])
    assert not (tmp_path / "c.json").exists()


def test_no_temp_files_or_lock_files_left(cassette: Path) -> None:
    folder = cassette.parents[1]
    names = [p.name for p in folder.rglob("*")]
    assert not [n for n in names if n.startswith(TEMP_PREFIX) or n.endswith(".lock")]
    assert lock_path_for(cassette).parent == Path(tempfile.gettempdir()) / "pytest-agentreplay-locks"


def test_path_lock_is_reentrant_across_paths(tmp_path: Path) -> None:
    with path_lock(tmp_path / "a.json"), path_lock(tmp_path / "b.json"):
        pass


# -- blob dir -------------------------------------------------------------------------------------


def test_default_blob_dir(tmp_path: Path) -> None:
    assert default_blob_dir(tmp_path / "cassettes" / "mod" / "t.json") == tmp_path / "cassettes" / ".blobs"
    (tmp_path / "other" / ".blobs").mkdir(parents=True)
    assert default_blob_dir(tmp_path / "other" / "deep" / "t.json") == tmp_path / "other" / ".blobs"
    assert default_blob_dir(tmp_path / "plain" / "t.json") == tmp_path / "plain" / ".blobs"


@pytest.mark.parametrize(
    "text",
    ["/c.json", "/x/cassettes/c.json", "//x/y/c.json", "rel/c.json", "c.json", "a/../b/c.json", "./d/c.json"],
)
def test_a_paths_folder_is_its_parent_whatever_its_spelling(text: str) -> None:
    """The cassette's folder is taken as the dirname of its absolute path's text, not as a Path's parent
    (one Path fewer per load): the same folder for every spelling, str or Path."""
    for given in (text, Path(text)):
        assert default_blob_dir(given) == default_blob_dir(Path(text).absolute().parent / "x.json")
    assert os.path.dirname(str(Path(text).absolute())) == str(Path(text).absolute().parent)


def test_explicit_blob_dir(tmp_path: Path) -> None:
    blobs = tmp_path / "store"
    path = tmp_path / "c.json"
    save_cassette(path, RUN, history(), blob_dir=blobs)
    assert list(BlobStore(blobs).iter_shas())
    loaded = load_cassette(path, blob_dir=blobs)
    assert loaded.payload(loaded.events[0].output_ref) == {"text": "lorem ipsum " * 400}


def test_resave_elsewhere_copies_blobs_from_source(cassette: Path, tmp_path: Path) -> None:
    loaded = load_cassette(cassette)
    target = tmp_path / "elsewhere" / "c.json"
    with pytest.raises(BlobMissingError, match="source_blob_store"):
        save_cassette(target, loaded.run, loaded.events)
    assert not target.exists()
    save_cassette(target, loaded.run, loaded.events, source_blob_store=loaded.blob_store)
    copy = load_cassette(target, verify_blobs=True)
    assert copy.payload(copy.events[0].output_ref) == loaded.payload(loaded.events[0].output_ref)


# -- errors ---------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    error = load_error(tmp_path / "nope.json", CassetteNotFoundError)
    assert "--agentreplay-record" in str(error)


@pytest.mark.parametrize("content", [b"", b"   \n", b"{", b"not json", b'{"format": "pytest-agentreplay",'])
def test_not_json(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    error = load_error(path, CassetteCorruptError)
    assert "line " in str(error) and "column " in str(error)
    assert "git checkout" in str(error)


def test_invalid_utf8(cassette: Path) -> None:
    data = cassette.read_bytes()
    cassette.write_bytes(data[:40] + b"\xff\xfe" + data[40:])
    load_error(cassette, CassetteCorruptError)


def test_truncated_at_many_offsets(cassette: Path) -> None:
    data = cassette.read_bytes()
    step = max(1, len(data) // 150)
    for cut in range(0, len(data) - 2, step):
        cassette.write_bytes(data[:cut])
        error = load_error(cassette, CassetteCorruptError)
        if cut > 10:
            assert "line " in str(error)
            assert "truncated" in str(error)


@pytest.mark.parametrize("doc", [[], "text", 3, None])
def test_not_an_object(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "c.json"
    rewrite(path, doc)
    load_error(path, CassetteCorruptError)


def test_wrong_format_name(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["format"] = "vcrpy"
    rewrite(cassette, doc)
    assert "import-vcr" in str(load_error(cassette, CassetteCorruptError))


def test_newer_version(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["version"] = FORMAT_VERSION + 1
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteVersionError)
    assert "upgrade pytest-agentreplay" in str(error)
    assert f"version {FORMAT_VERSION + 1}" in str(error)


@pytest.mark.parametrize("version", [0, -1, "2", 2.5, None, True])
def test_unknown_version(cassette: Path, version: Any) -> None:
    doc = json.loads(cassette.read_text())
    doc["version"] = version
    rewrite(cassette, doc)
    assert "unknown format version" in str(load_error(cassette, CassetteVersionError))


def test_missing_version(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    del doc["version"]
    rewrite(cassette, doc)
    load_error(cassette, CassetteVersionError)


def test_unknown_field(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][3]["surprise"] = 1
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteSchemaError)
    assert "event seq 3 (events[3]), field surprise" in str(error)
    assert "unknown field" in str(error)
    assert "agentreplay migrate" in str(error)


def test_wrong_type(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][2]["output_ref"]["size"] = "big"
    doc["events"][4]["seq"] = "4"
    rewrite(cassette, doc)
    message = str(load_error(cassette, CassetteSchemaError))
    assert "event seq 4 (events[4]), field seq" in message
    assert "event seq 2 (events[2]), field output_ref.size" in message


def test_many_schema_problems_show_eight_and_count_the_rest(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["run"]["labels"] = {f"label{n:02d}": n for n in range(30)}
    rewrite(cassette, doc)
    message = str(load_error(cassette, CassetteSchemaError))
    assert "(30 problem(s))" in message
    assert "field run.labels.label07" in message
    assert "field run.labels.label08" not in message
    assert "... and 22 more" in message


def test_wrong_type_in_run(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["run"]["labels"] = {"a": 1}
    rewrite(cassette, doc)
    assert "field run.labels.a" in str(load_error(cassette, CassetteSchemaError))


def test_bad_enum_value(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][1]["actor"] = "robot"
    rewrite(cassette, doc)
    assert "field actor" in str(load_error(cassette, CassetteSchemaError))


def test_edited_event(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][2]["data"]["n"] = 99
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteIntegrityError)
    assert error.place == "event seq 2 (events[2])"
    assert "seq 2 was edited" in str(error)


def test_edited_last_event(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][-1]["ts"] = "2030-01-01T00:00:00Z"
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteIntegrityError)
    assert "seq 5 was edited" in str(error) and error.place == "event seq 5 (events[5])"


def test_edited_run_header(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["run"]["model"] = "gpt-4o"
    rewrite(cassette, doc)
    assert "run metadata was edited" in str(load_error(cassette, CassetteIntegrityError))


def test_reordered_events(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][2], doc["events"][3] = doc["events"][3], doc["events"][2]
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteIntegrityError)
    assert "events[2] has seq 3" in str(error) and error.place == "event seq 2 (events[2])"


def test_reordered_and_renumbered(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"][2], doc["events"][3] = doc["events"][3], doc["events"][2]
    doc["events"][2]["seq"], doc["events"][3]["seq"] = 2, 3
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteIntegrityError)
    assert "event digest mismatch at seq 2" in str(error) and error.place == "event seq 2 (events[2])"


def test_removed_event(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    del doc["events"][3]
    rewrite(cassette, doc)
    assert "events[3] has seq 4" in str(load_error(cassette, CassetteIntegrityError))


def test_removed_last_event(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    del doc["events"][-1]
    rewrite(cassette, doc)
    message = str(load_error(cassette, CassetteIntegrityError))
    assert "event_count is 6 but the file holds 5 events" in message


def test_removed_last_event_and_fixed_count(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    del doc["events"][-1]
    doc["event_count"] = 5
    rewrite(cassette, doc)
    message = str(load_error(cassette, CassetteIntegrityError))
    assert "event_digests lists 6 digest(s) but the file holds 5 events" in message
    assert "head_hash does not match" in message


def test_removed_last_event_with_fixed_count_and_digests(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    del doc["events"][-1]
    doc["event_count"] = 5
    del doc["event_digests"][-1]
    rewrite(cassette, doc)
    assert "head_hash does not match" in str(load_error(cassette, CassetteIntegrityError))


def test_inserted_event_is_caught(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["events"].insert(3, dict(doc["events"][2]))
    for index, event in enumerate(doc["events"]):
        event["seq"] = index
    doc["event_count"] = 7
    doc["event_digests"].insert(3, doc["event_digests"][2])
    rewrite(cassette, doc)
    assert "head_hash does not match" in str(load_error(cassette, CassetteIntegrityError))


def test_edited_digest_line_is_caught(cassette: Path) -> None:
    doc = json.loads(cassette.read_text())
    doc["event_digests"][4] = "0" * 64
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteIntegrityError)
    assert error.place == "event seq 4 (events[4])" and "head_hash does not match" in str(error)


def test_reformatted_file_still_loads(cassette: Path) -> None:
    # Whitespace and key order are not content: a reformatting editor must not break the chain.
    doc = json.loads(cassette.read_text())
    cassette.write_text(json.dumps(doc, indent=4, sort_keys=False), encoding="utf-8")
    assert len(load_cassette(cassette).events) == 6


def test_missing_blob_on_resolve_and_verify(cassette: Path) -> None:
    loaded = load_cassette(cassette)
    ref = loaded.events[0].output_ref
    assert ref is not None and ref.sha256 is not None
    blob = loaded.blob_store.path_for(ref.sha256)
    blob.unlink()
    fresh = load_cassette(cassette)  # lazy: loading does not need the blob
    with pytest.raises(BlobMissingError) as info:
        fresh.payload(fresh.events[0].output_ref)
    assert ref.sha256 in str(info.value) and cassette.name in str(info.value)
    assert "How to fix:" in str(info.value)
    with pytest.raises(BlobMissingError) as info:
        load_cassette(cassette, verify_blobs=True)
    assert "event seq 0 (events[0]), field output_ref" in str(info.value)
    assert any("missing" in problem for problem in fresh.verify())


def test_damaged_blob(cassette: Path) -> None:
    loaded = load_cassette(cassette)
    ref = loaded.events[0].output_ref
    assert ref is not None and ref.sha256 is not None
    loaded.blob_store.path_for(ref.sha256).write_text('{"text":"tampered"}')
    with pytest.raises(CassetteIntegrityError, match="does not match its content hash"):
        load_cassette(cassette).payload(ref)
    with pytest.raises(CassetteIntegrityError):
        load_cassette(cassette, verify_blobs=True)


def test_verify_lists_every_problem(cassette: Path) -> None:
    assert load_cassette(cassette).verify() == []
    doc = json.loads(cassette.read_text())
    doc["events"][1]["data"]["n"] = 7
    doc["events"][4]["data"]["n"] = 7
    problems = verify_chain(doc)
    assert len(problems) == 2 and "seq 1 was edited" in problems[0] and "seq 4 was edited" in problems[1]


def test_a_loaded_cassette_keeps_its_bytes_not_its_parsed_document(cassette: Path) -> None:
    """Replay holds a loaded cassette for the whole test: the stored form, read again only by `verify`, is
    kept as the file's bytes (one object) rather than as thousands of parsed containers the garbage
    collector would walk; `verify` still checks the stored form, chain included."""
    loaded = load_cassette(cassette)
    assert loaded.document == {} and loaded.source == cassette.read_bytes()
    assert loaded.verify() == []
    # The stored form as loaded, not one rebuilt from the events: a chain broken in memory is seen.
    loaded.source = loaded.source.replace(b'"n": 1', b'"n": 9', 1)
    assert any("was edited" in problem for problem in loaded.verify())


def test_mode_is_named_in_errors(tmp_path: Path) -> None:
    with pytest.raises(CassetteNotFoundError) as info:
        load_cassette(tmp_path / "x.json", mode="regression")
    assert "mode: regression" in str(info.value)


def test_store_import_is_light() -> None:
    code = (
        "import sys, pytest_agentreplay.cassette.read, pytest_agentreplay.cassette.write\n"
        "bad = [m for m in ('pytest', '_pytest', 'respx', 'vcr', 'deepdiff', 'syrupy') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


# -- hostile files (issue 11) ----------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
def test_fifo_cassette_is_refused_without_blocking(cassette: Path) -> None:
    from pytest_agentreplay.exceptions import CassetteFileTypeError

    cassette.unlink()
    os.mkfifo(cassette)
    error = load_error(cassette, CassetteFileTypeError)
    assert "FIFO" in str(error)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks to devices")
def test_symlink_to_dev_zero_is_refused(cassette: Path) -> None:
    from pytest_agentreplay.exceptions import CassetteFileTypeError

    cassette.unlink()
    cassette.symlink_to("/dev/zero")
    error = load_error(cassette, CassetteFileTypeError)
    assert "symlink leading out of" in str(error) and "/dev/zero" in str(error)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_symlink_within_the_cassette_folder_is_read(cassette: Path) -> None:
    alias = cassette.parent / "alias.json"
    alias.symlink_to(cassette.name)
    assert load_cassette(alias).events == load_cassette(cassette).events


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_path_below_a_resolved_root_resolves_as_realpath_does(tmp_path: Path) -> None:
    """The read of a file under its cassette folder resolves only the names below the folder (the folder is
    resolved once): the answer is realpath's, or None where realpath must decide."""
    from pytest_agentreplay.cassette.validation import _below_resolved

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.json").write_text("{}")
    real_root = tmp_path / "real"
    (real_root / "sub").mkdir(parents=True)
    (real_root / "sub" / "c.json").write_text("{}")
    (real_root / "linked").symlink_to("sub")
    (real_root / "out").symlink_to(outside)
    (real_root / "sub" / "alias.json").symlink_to("c.json")
    root = tmp_path / "root"
    root.symlink_to(real_root)  # the folder itself reached through a symlink
    names = [
        "sub/c.json",
        "sub/missing.json",
        "linked/c.json",
        "out/c.json",
        "sub/alias.json",
        "sub/../sub/c.json",
        "sub/./c.json",
        "sub//c.json",
        "c.json",
    ]
    for root_text in (str(root), str(real_root), str(root) + "/"):
        base = os.path.realpath(root_text)
        for name in names:
            path = root_text.rstrip("/") + "/" + name
            fast = _below_resolved(path, Path(root_text), base)
            assert fast is None or fast == os.path.realpath(path), (root_text, name)
            # Only plain names of existing files and folders, none a symlink, are resolved here.
            assert (fast is not None) == (name == "sub/c.json"), (root_text, name)
    assert _below_resolved("sub/c.json", Path("sub"), os.path.realpath("sub")) is None  # relative: realpath's
    assert _below_resolved("/etc/hosts", None, "/etc") is None  # no root given (blobs): realpath's


def test_directory_and_oversized_cassettes_are_refused(
    cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_agentreplay.cassette import parsing
    from pytest_agentreplay.exceptions import CassetteFileTypeError, CassetteLimitError

    monkeypatch.setattr(parsing, "MAX_CASSETTE_BYTES", 1000)
    error = load_error(cassette, CassetteLimitError)
    assert "larger than the limit" in str(error)
    monkeypatch.undo()
    folder = cassette.parent / "folder.json"
    folder.mkdir()
    assert "a directory" in str(load_error(folder, CassetteFileTypeError))


def test_deeply_nested_cassette_is_a_limit_error(cassette: Path) -> None:
    from pytest_agentreplay.exceptions import CassetteLimitError

    text = cassette.read_text(encoding="utf-8")
    cassette.write_text(text.replace('"run": {', '"run": {"deep": ' + "[" * 5000 + "]" * 5000 + ",", 1))
    load_error(cassette, CassetteLimitError)


def test_relabelled_v1_with_stripped_chain_does_not_load(cassette: Path) -> None:
    # An edited file relabelled version 1, chain fields deleted, must not pass as an old, chainless file.
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    doc["version"] = 1
    del doc["event_count"], doc["head_hash"], doc["event_digests"]
    doc["events"][1]["data"]["n"] = 999
    rewrite(cassette, doc)
    error = load_error(cassette, CassetteVersionError)
    assert "agentreplay migrate" in str(error)


def test_rechained_wrong_shape_payload_is_a_shape_error(cassette: Path) -> None:
    from pytest_agentreplay.core.constants import HTTP_RESPONSE_MEDIA_TYPE
    from pytest_agentreplay.exceptions import PayloadShapeError

    doc = json.loads(cassette.read_text(encoding="utf-8"))
    doc["events"][1]["output_ref"] = {
        "inline": ["not", "a", "response"],
        "media_type": HTTP_RESPONSE_MEDIA_TYPE,
    }
    rewrite(cassette, rechained(doc))
    loaded = load_cassette(cassette)  # the chain is valid: the payload is checked when it is resolved
    with pytest.raises(PayloadShapeError) as info:
        loaded.payload(loaded.events[1].output_ref)
    message = str(info.value)
    assert cassette.name in message and "event seq 1" in message and "How to fix:" in message


def test_event_key_fields_must_be_scalars(cassette: Path) -> None:
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    doc["events"][1]["data"]["provider"] = {"not": "hashable"}
    rewrite(cassette, rechained(doc))
    assert "data.provider" in str(load_error(cassette, CassetteSchemaError))


def test_a_load_raises_the_first_of_two_problems(cassette: Path) -> None:
    """What a load raises when a cassette has two problems: a schema error before a value the chain cannot
    hash, a field replay reads (here unchained) before the broken chain."""
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    doc["events"][3]["surprise"] = 1
    doc["run"]["agent"] = "\ud800"
    rewrite(cassette, doc)
    assert "field surprise" in str(load_error(cassette, CassetteSchemaError))
    del doc["events"][3]["surprise"]
    rewrite(cassette, doc)
    assert "cannot round-trip" in str(load_error(cassette, CassetteCorruptError))
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    doc["run"]["agent"] = "fine"
    doc["events"][1]["data"]["provider"] = ["not", "a", "key"]
    rewrite(cassette, doc)
    assert "data.provider" in str(load_error(cassette, CassetteSchemaError))


def rechained(doc: dict[str, Any]) -> dict[str, Any]:
    """The integrity fields recomputed over whatever the document now holds (a tamper they cannot see)."""
    from pytest_agentreplay.cassette.chain import build_document

    return build_document(doc["run"], doc["events"])


def test_a_load_leaves_the_garbage_collector_as_it_found_it(cassette: Path) -> None:
    """Loading pauses the collector (the cassette's containers all survive); it is on again after a load,
    a failed one included, and stays off when the caller had turned it off."""
    import gc

    assert gc.isenabled()
    assert load_cassette(cassette).events
    assert gc.isenabled()
    doc = json.loads(cassette.read_text())
    doc["events"][1]["actor"] = "robot"
    rewrite(cassette, doc)
    load_error(cassette, CassetteSchemaError)
    assert gc.isenabled()
    gc.disable()
    try:
        load_error(cassette, CassetteSchemaError)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("events", [None, "not a list", {"0": {}}])
def test_a_document_without_an_events_list_is_a_schema_error(cassette: Path, events: Any) -> None:
    """Decoding finds no events in such a file; the schema check must still see the file as stored (it
    once validated it with an empty events list put in, and the chain check then met a KeyError)."""
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    if events is None:
        del doc["events"]
    else:
        doc["events"] = events
    rewrite(cassette, doc)
    assert "events" in str(load_error(cassette, CassetteSchemaError))


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(
    ("raw", "extra", "refused"),
    [
        (_nested(126), {}, False),  # the deepest JSON body a response holds: its last list at level 127
        (_nested(127), {}, True),  # one level more
        ('{"s": "' + "[" * 300 + '"}', {}, False),  # brackets in a string: the checks one by one decide
        ('{"a": 1}', {"x": json.loads(_nested(130))}, True),  # a member of its own, too deep
        ('{"a": 1}', {"x": 1}, False),
        ('{"a": 1}', {"headers": {"h": ["not", "a", "string"]}}, True),
        ('{"a": 1}', {"status": "200"}, True),
    ],
)
def test_a_response_parsed_on_load_is_checked_as_any_payload_when_served(
    cassette: Path, raw: str, extra: dict[str, Any], refused: bool
) -> None:
    """An inline response's JSON body, parsed on load from its raw text, is checked without writing the
    payload out when it has the usual shape (its brackets counted in the raw text); refused or served, the
    outcome and its message are the checks' one by one."""
    from pytest_agentreplay.core.constants import HTTP_RESPONSE_MEDIA_TYPE
    from pytest_agentreplay.exceptions import PayloadShapeError

    doc = json.loads(cassette.read_text(encoding="utf-8"))
    body = {"content_type": "application/json", "raw": raw}
    payload = {"status": 200, "headers": {"content-type": "application/json"}, "body": body, **extra}
    doc["events"][1]["output_ref"] = {"inline": payload, "media_type": HTTP_RESPONSE_MEDIA_TYPE}
    rewrite(cassette, rechained(doc))
    loaded = load_cassette(cassette)
    ref = loaded.events[1].output_ref
    assert ref is not None and loaded.restored.get(id(ref.inline)) is ref.inline  # parsed on load

    def outcome() -> str | None:
        try:
            served = loaded.payload(ref)
        except PayloadShapeError as exc:
            return str(exc)
        assert served is ref.inline
        return None

    told = outcome()
    loaded.restored.clear()  # every payload checked one by one
    assert outcome() == told
    assert (told is not None) == refused
