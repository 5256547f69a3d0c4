"""`agentreplay verify`: every kind of damage gets its own message, with its file, and exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli_support import build_run, put_blob, read, write_raw, write_rechained

from pytest_agentreplay.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "cassettes" / "tests" / "test_agent" / "test_refund.json"
    build_run(path)
    return path


def test_intact_cassette_verifies(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "verify", str(cassette))
    assert code == 0, out + err
    assert "1 cassette(s) ok (sealed: event digests and head_hash match)" in out


def test_edited_event_is_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["events"][8]["data"]["arguments"]["amount"] = 4000
    write_raw(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert f"{cassette}: event digest mismatch at seq 8" in out
    assert "seq 8 was edited" in out


def test_reordered_events_are_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["events"][4], doc["events"][5] = doc["events"][5], doc["events"][4]
    write_raw(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "events were reordered" in out


def test_truncated_history_is_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["events"] = doc["events"][:-3]
    write_raw(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "event_count is 12 but the file holds 9 events" in out
    assert "removed from the end" in out


def test_truncated_file_is_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cassette.read_bytes()
    cassette.write_bytes(data[: len(data) // 2])
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "is not valid JSON (the file looks truncated)" in out


def test_committed_effect_without_receipt_is_advice_and_strict_fails_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cassettes" / "no_receipt.json"
    build_run(path, receipt=None)
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 0
    assert f"{path}: warning: seq 9 effect issue_refund: committed without a receipt" in out
    assert "verify: 1 cassette(s) ok" in out
    assert "1 warning(s)" in out
    code, out, _ = run_cli(capsys, "verify", "--strict", str(path))
    assert code == 1
    assert f"{path}: seq 9 effect issue_refund: committed without a receipt" in out


def test_committed_effect_without_idempotency_key_is_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cassettes" / "no_key.json"
    build_run(path, idempotency_key=None)
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 0
    assert "warning: seq 9 effect issue_refund: committed without an idempotency key" in out
    assert run_cli(capsys, "verify", "--strict", str(path))[0] == 1
    # show renders it and never fails on advice.
    code, out, _ = run_cli(capsys, "show", str(path))
    assert code == 0
    assert "advice: 1" in out
    assert "seq 9 effect issue_refund: committed without an idempotency key" in out


def test_missing_blob(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blobs = sorted((cassette.parents[2] / ".blobs").rglob("*.json"))
    assert blobs, "the fixture must store a blob"
    for blob in blobs:
        blob.unlink()
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "events[1].input_ref: payload blob" in out
    assert "is missing" in out


def test_damaged_blob(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = sorted((cassette.parents[2] / ".blobs").rglob("*.json"))[0]
    blob.write_bytes(blob.read_bytes().replace(b"Refund", b"Rfund!"))
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "does not match its content hash" in out


def test_secret_is_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["events"][3]["data"]["note"] = "key sk-proj-" + "A1b2C3d4E5f6G7h8" * 3
    write_rechained(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert f"{cassette}: secret-shaped value at events[3].data.note" in out
    assert "hash chain" not in out


def test_secrets_inside_encodings_are_caught(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import base64

    import zstandard

    key = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 3
    plain = json.dumps({"user": "ann", "password": "pw-planted"}).encode()
    frame = zstandard.ZstdCompressor().compress(plain)
    doc = read(cassette)
    doc["events"][3]["data"].update(
        {
            # a response body stored as its zstd frame (what recording did before codings were decoded)
            "body": {"base64": base64.b64encode(frame).decode(), "content_type": "application/json"},
            # an Anthropic document block's text, base64
            "document": base64.b64encode(f"deploy notes: {key}".encode()).decode(),
            "callback": "https://app.example/cb#access_token=ya29-planted-token&state=s1",
            "search": "https://app.example/s?q=" + key.replace("-", "%2D"),
        }
    )
    write_rechained(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    for where in ("body.base64", "document", "callback", "search"):
        assert f"{cassette}: secret-shaped value at events[3].data.{where}" in out, out


def test_schema_problem(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["events"][2]["colour"] = "blue"
    write_rechained(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1
    assert "does not match the cassette schema" in out
    assert "unknown field" in out


def test_directories_are_searched_recursively(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cassettes"
    good = root / "a" / "good.json"
    bad = root / "b" / "deep" / "bad.json"
    build_run(good)
    build_run(bad, receipt=None)
    code, out, _ = run_cli(capsys, "verify", "-v", "--strict", str(root))
    assert code == 1
    assert f"{good}: ok" in out
    assert f"{bad}: seq 9 effect issue_refund: committed without a receipt" in out
    assert ".blobs" not in out
    assert "1 problem(s) in 1 of 2 cassette(s)" in out


def test_each_problem_listed_with_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = tmp_path / "cassettes" / "one.json"
    second = tmp_path / "cassettes" / "two.json"
    build_run(first, receipt=None)
    build_run(second, idempotency_key=None)
    code, out, _ = run_cli(capsys, "verify", "--strict", str(first), str(second))
    assert code == 1
    lines = [line for line in out.splitlines() if line.startswith(str(tmp_path))]
    assert [line.split(": ")[0] for line in lines] == [str(first), str(second)]


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", str(tmp_path / "nope"))
    assert code == 2
    assert "no such file or directory" in err
    assert "Traceback" not in err


def test_console_script_exit_codes_without_traceback(cassette: Path) -> None:
    doc = read(cassette)
    doc["events"][1]["data"]["model"] = "gpt-5"
    write_raw(cassette, doc)
    result = subprocess.run(
        [sys.executable, "-m", "pytest_agentreplay.cli", "verify", str(cassette)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "event digest mismatch at seq 1" in result.stdout
    assert "Traceback" not in result.stderr


# -- what replay would trip on (issue 11) ----------------------------------------------------------


def _response_refs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Output refs relabelled as HTTP responses (the edit controls the media type as well)."""
    from pytest_agentreplay.core.constants import HTTP_RESPONSE_MEDIA_TYPE

    refs = [e["output_ref"] for e in doc["events"] if isinstance(e.get("output_ref"), dict)]
    for ref in refs:
        ref["media_type"] = HTTP_RESPONSE_MEDIA_TYPE
    return refs


@pytest.mark.parametrize(
    "payload",
    [
        ["not", "a", "response"],
        {"status": "ok", "headers": {}, "body": None},
        {"status": 200, "headers": {}, "body": {"sse": "x", "content_type": "text/event-stream"}},
        {"status": 200, "headers": {}, "body": {"base64": "%%%", "content_type": None}},
        {"status": 200, "headers": {"a": 1}, "body": None},
    ],
)
def test_valid_hash_blob_of_the_wrong_shape_is_reported(
    cassette: Path, capsys: pytest.CaptureFixture[str], payload: Any
) -> None:
    from pytest_agentreplay.cassette.blobs import default_blob_dir

    doc = read(cassette)
    refs = _response_refs(doc)
    assert refs, "the run must hold an output payload"
    sha = put_blob(default_blob_dir(cassette), payload)
    refs[0].pop("inline", None)
    refs[0]["sha256"] = sha
    write_rechained(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1, out
    assert "wrong shape" in out and f"{cassette}: events[" in out


def test_chain_node_without_items_is_reported(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentreplay.cassette.blobs import default_blob_dir

    doc = read(cassette)
    sha = put_blob(default_blob_dir(cassette), {"$chain": {"prev": None}})
    ref = next(e["input_ref"] for e in doc["events"] if e.get("input_ref"))
    ref.pop("inline", None)
    ref["sha256"] = sha
    write_rechained(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1 and "chain" in out, out


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
def test_fifo_is_reported_without_blocking(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette.unlink()
    os.mkfifo(cassette)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1 and "FIFO" in out, out


def test_version_downgrade_is_reported(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = read(cassette)
    doc["version"] = 1
    del doc["event_count"], doc["head_hash"], doc["event_digests"]
    doc["events"][1]["data"]["edited"] = True
    write_raw(cassette, doc)
    code, out, _ = run_cli(capsys, "verify", str(cassette))
    assert code == 1 and "agentreplay migrate" in out, out


# -- textconv (issue 16: payload changes visible in git diff) ---------------------------------------


def test_textconv_inlines_blob_payloads(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentreplay.cassette.blobs import BlobStore, default_blob_dir

    doc = read(cassette)
    refs = [
        (i, name, e[name]["sha256"])
        for i, e in enumerate(doc["events"])
        for name in ("input_ref", "output_ref")
        if isinstance(e.get(name), dict) and "sha256" in e[name]
    ]
    assert refs, "the fixture cassette stores at least one payload as a blob"
    code, out, _ = run_cli(capsys, "textconv", str(cassette))
    assert code == 0
    rendered = json.loads(out)
    store = BlobStore(default_blob_dir(cassette))
    for index, name, sha in refs:
        ref = rendered["events"][index][name]
        assert ref["sha256"] == sha and ref["inline"] == store.load(sha)


def test_textconv_finds_the_blobs_from_the_repository_for_a_temp_copy(
    cassette: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git passes an older revision as a temporary file outside the cassette folder.
    outside = tmp_path / "elsewhere" / "XXXX_test_refund.json"
    outside.parent.mkdir()
    outside.write_bytes(cassette.read_bytes())
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "textconv", str(outside))
    assert code == 0 and "<payload not resolved" not in out


def test_textconv_renders_a_damaged_file_without_failing(
    cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette.write_bytes(b'{"not": "closed"')
    code, out, _ = run_cli(capsys, "textconv", str(cassette))
    assert code == 0 and out == '{"not": "closed"'


def test_textconv_loads_neither_the_diff_nor_the_viewer_nor_replay(cassette: Path) -> None:
    # git runs textconv once per changed cassette: the parser imports a command's module only when that
    # command runs, so textconv does not pay for what show, diff and verify load.
    script = (
        "import sys\n"
        "from pytest_agentreplay.cli import main\n"
        f"code = main(['textconv', {str(cassette)!r}])\n"
        "prefixes = tuple('pytest_agentreplay.' + name for name in ('diff', 'report', 'replay', 'interop'))\n"
        "print(code, sorted(m for m in sys.modules if m.startswith(prefixes)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 []"
