"""`agentreplay show`, `diff`, `migrate`, `prune`, `schema` and the help texts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from test_cli_support import build_run, read, write_raw, write_rechained

from pytest_agentreplay.cli import build_parser, main
from pytest_agentreplay.core.constants import FORMAT_VERSION

SUBCOMMANDS = ("show", "diff", "verify", "migrate", "prune", "import-vcr", "export-otel", "schema")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "cassettes" / "test_refund.json"
    build_run(path)
    return path


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out
    assert f"agentreplay {command}" in out


def test_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2


def test_parser_lists_every_subcommand() -> None:
    help_text = build_parser().format_help()
    for command in SUBCOMMANDS:
        assert command in help_text


# -- show ----------------------------------------------------------------------------------------


def test_show_renders_the_audit_view(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "show", str(cassette))
    assert code == 0
    assert "model.call" in out and "gpt-4o-mini" in out
    assert "issue_refund payments committed, receipt rf_9001, key refund-order-17" in out
    assert "refund-limit v3: needs_approval" in out
    assert "granted by agent-lead" in out
    assert "audit: ok" in out


def test_show_says_the_current_format_is_sealed_not_chained(
    cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "show", str(cassette))
    assert code == 0
    assert "audit: ok (sealed: event digests and head_hash match; committed effects" in out
    assert "chain" not in out and "migrate" not in out
    code, out, _ = run_cli(capsys, "show", str(cassette), "--json")
    assert json.loads(out)["integrity"] == "sealed: event digests and head_hash match"


@pytest.mark.parametrize(
    ("version", "words"),
    [
        (1, "version 1: no integrity fields, nothing to check"),
        (2, "hash chain intact (version 2: every prev_hash walked)"),
        (3, "sealed: event digests and head_hash match (version 3)"),
    ],
)
def test_show_names_what_an_older_version_had_checked(
    version: int, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agentreplay.cassette.migrations import MIGRATIONS

    doc = json.loads((Path(__file__).parent / "data" / "v1_cassette.json").read_text(encoding="utf-8"))
    for older in range(1, version):
        doc = MIGRATIONS[older](doc, "fixture")
    path = tmp_path / "cassettes" / "test_old.json"
    path.parent.mkdir()
    write_raw(path, doc)
    code, out, _ = run_cli(capsys, "show", str(path))
    assert code == 0, out
    assert f"audit: ok ({words}; committed effects" in out
    assert f"format version {version} is not replayed: upgrade it with `agentreplay migrate {path}`" in out


def test_show_reports_advice_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cassettes" / "bad.json"
    build_run(path, receipt=None)
    code, out, _ = run_cli(capsys, "show", str(path))
    assert code == 0
    assert "audit: ok (sealed: event digests and head_hash match; blobs present, no secrets)" in out
    assert "advice: 1" in out
    assert "committed without a receipt" in out


def test_show_renders_a_tampered_cassette_and_flags_it(
    cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = read(cassette)
    doc["events"][5]["data"]["verdict"] = "allow"
    write_raw(cassette, doc)
    code, out, _ = run_cli(capsys, "show", str(cassette))
    assert code == 1
    assert "refund-limit v3: allow" in out
    assert "event digest mismatch at seq 5" in out


def test_show_json(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "show", str(cassette), "--json")
    assert code == 0
    doc = json.loads(out)
    assert [e["seq"] for e in doc["events"]] == list(range(12))
    assert doc["run"]["agent"] == "support-bot"
    assert doc["problems"] == []


def test_show_html(cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "out" / "run.html"
    code, out, _ = run_cli(capsys, "show", str(cassette), "--html", str(out_file))
    assert code == 0
    assert f"wrote {out_file}" in out
    page = out_file.read_text(encoding="utf-8")
    assert page.count('<li id="ev-') == 12
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page


def test_show_missing_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "show", str(tmp_path / "nope.json"))
    assert code == 2
    assert "does not exist" in err
    assert "How to fix" in err
    assert "Traceback" not in err


def test_show_corrupt_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    code, _, err = run_cli(capsys, "show", str(path))
    assert code == 2
    assert "is not valid JSON" in err


def resealed_data(path: Path, event_type: str, **data: object) -> Path:
    """The cassette at ``path`` with ``data`` set on every event of ``event_type``, resealed (the model
    leaves ``data`` free-form: a provider of one's own may store any shape there)."""
    doc = read(path)
    for event in doc["events"]:
        if event["type"] == event_type:
            event["data"].update(data)
    write_rechained(path, doc)
    return path


@pytest.mark.parametrize(
    ("event_type", "data", "shown"),
    [
        ("model.call", {"decision": "stop"}, "openai gpt-4o-mini"),
        ("model.call", {"decision": {"tool_calls": [["x"], 7], "text": "hi"}}, '-> ["x"], 7 says hi'),
        ("model.call", {"decision": {"tool_calls": {"name": "a"}}}, "-> a(null)"),
        ("model.call", {"decision": {"tool_calls": 3}}, "-> 3"),
        ("model.call", {"usage": [3, 4]}, "openai gpt-4o-mini"),
        ("retrieval", {"document_ids": 7}, "-> [7]"),
        ("retrieval", {"document_ids": None}, "-> []"),
    ],
)
def test_show_renders_data_of_any_shape(
    cassette: Path, capsys: pytest.CaptureFixture[str], event_type: str, data: dict[str, object], shown: str
) -> None:
    """A decision or usage that is no object, tool calls or document ids that are no list: before, `show`
    raised AttributeError or TypeError out of the timeline (its text and its HTML page)."""
    resealed_data(cassette, event_type, **data)
    code, out, err = run_cli(capsys, "show", str(cassette))
    assert (code, err) == (0, "")
    assert shown in out
    code, _, err = run_cli(capsys, "show", str(cassette), "--html", str(cassette.with_suffix(".html")))
    assert (code, err) == (0, "")


# -- diff ----------------------------------------------------------------------------------------


def test_diff_identical_runs_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002")
    code, out, _ = run_cli(capsys, "diff", str(a), str(b))
    assert code == 0, out
    assert "no drift" in out


def test_diff_regression_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002", refund_amount=400)
    code, out, _ = run_cli(capsys, "diff", str(a), str(b))
    assert code == 1
    assert "data.arguments.amount: 40 -> 400" in out
    code, out, _ = run_cli(capsys, "diff", str(a), str(b), "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["has_regressions"] is True
    assert {d["path"] for d in doc["differences"]} >= {"data.arguments.amount"}


def test_diff_uses_the_project_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002", final_text="Refund sent: 40 EUR.")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "diff", str(a), str(b))
    assert code == 1
    (tmp_path / "pyproject.toml").write_text(
        '[tool.agentreplay.rules]\n"model.call:data.decision.text" = "expected"\n', encoding="utf-8"
    )
    code, out, _ = run_cli(capsys, "diff", str(a), str(b))
    assert code == 0, out
    assert "1 expected difference" in out


def test_diff_mode_model_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002", final_text="Your refund of 40 EUR is on the way.")
    code, _, _ = run_cli(capsys, "diff", str(a), str(b))
    assert code == 1
    code, out, _ = run_cli(capsys, "diff", str(a), str(b), "--mode", "model-comparison")
    assert code == 0, out


def test_diff_bad_pyproject_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "cassettes" / "a.json"
    build_run(a)
    (tmp_path / "pyproject.toml").write_text("[tool.agentreplay]\nbogus = 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "diff", str(a), str(a))
    assert code == 2
    assert "unknown key(s): bogus in [tool.agentreplay]" in err


# -- migrate -------------------------------------------------------------------------------------


def _downgrade_to_v1(path: Path) -> None:
    doc = read(path)
    del doc["event_count"], doc["head_hash"], doc["event_digests"]
    doc["version"] = 1
    write_raw(path, doc)


def test_migrate_rewrites_old_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "cassettes" / "old.json"
    new = tmp_path / "cassettes" / "new.json"
    build_run(old)
    build_run(new)
    _downgrade_to_v1(old)
    before_new = new.read_bytes()

    code, out, _ = run_cli(capsys, "migrate", str(tmp_path / "cassettes"), "--dry-run")
    assert code == 0
    assert f"would migrate {old}" in out
    assert read(old)["version"] == 1

    code, out, _ = run_cli(capsys, "migrate", str(tmp_path / "cassettes"))
    assert code == 0
    assert f"migrated {old}" in out
    assert "1 migrated, 1 already current, 0 failed" in out
    assert read(old)["version"] == FORMAT_VERSION
    assert new.read_bytes() == before_new

    code, _, _ = run_cli(capsys, "verify", str(old))
    assert code == 0
    code, out, _ = run_cli(capsys, "migrate", str(old))
    assert "0 migrated, 1 already current" in out


def test_migrate_unreadable_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "pytest-agentreplay", "version": 1, "run": 3}', encoding="utf-8")
    before = bad.read_bytes()
    code, _out, err = run_cli(capsys, "migrate", str(bad))
    assert code == 2
    assert f"{bad}:" in err
    assert bad.read_bytes() == before


# -- prune ---------------------------------------------------------------------------------------


def _age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_prune_keeps_referenced_blobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cassettes"
    build_run(root / "keep.json")
    store = root / ".blobs"
    referenced = sorted(store.rglob("*.json"))
    orphan = store / "ab" / ("ab" + "0" * 62 + ".json")
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_text("{}", encoding="utf-8")
    for blob in [*referenced, orphan]:
        _age(blob, 100)

    code, out, _ = run_cli(capsys, "prune", "--cassette-dir", str(root), "--dry-run")
    assert code == 0
    assert f"would remove {orphan} (unreferenced" in out
    assert orphan.exists()

    code, out, _ = run_cli(capsys, "prune", "--cassette-dir", str(root))
    assert code == 0
    assert not orphan.exists()
    assert all(blob.exists() for blob in referenced)
    assert f"kept {len(referenced)} blob(s)" in out
    code, _, _ = run_cli(capsys, "verify", str(root))
    assert code == 0


def test_prune_by_age(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cassettes"
    root.mkdir()
    store = root / ".blobs"
    old = store / "aa" / ("aa" + "1" * 62 + ".json")
    young = store / "bb" / ("bb" + "2" * 62 + ".json")
    for blob in (old, young):
        blob.parent.mkdir(parents=True)
        blob.write_text("{}", encoding="utf-8")
    _age(old, 40)
    _age(young, 2)
    code, out, _ = run_cli(capsys, "prune", "--cassette-dir", str(root), "--older-than", "30")
    assert code == 0
    assert not old.exists() and young.exists()
    assert "1 blob(s) removed" in out


def test_prune_by_data_class_include_referenced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cassettes"
    build_run(root / "run.json")
    store = root / ".blobs"
    blobs = sorted(store.rglob("*.json"))
    assert blobs
    # The fixture's blobs hold the model request, tagged personal.
    code, out, _ = run_cli(
        capsys, "prune", "--cassette-dir", str(root), "--data-class", "public", "--include-referenced"
    )
    assert all(blob.exists() for blob in blobs)
    code, out, _ = run_cli(capsys, "prune", "--cassette-dir", str(root), "--data-class", "personal")
    assert all(blob.exists() for blob in blobs)
    assert "of class personal" in out and "--include-referenced" in out
    code, out, _ = run_cli(
        capsys, "prune", "--cassette-dir", str(root), "--data-class", "personal", "--include-referenced"
    )
    assert code == 0
    assert not any(blob.exists() for blob in blobs)
    assert "referenced, data class personal" in out
    assert "1 cassette(s) now reference removed blobs" in out
    code, out, _ = run_cli(capsys, "verify", str(root / "run.json"))
    assert code == 1 and "is missing" in out


def test_prune_missing_dir_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "prune", "--cassette-dir", str(tmp_path / "none"))
    assert code == 2
    assert "does not exist" in err


def test_prune_refuses_when_a_cassette_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cassettes"
    build_run(root / "run.json")
    (root / "broken.json").write_text("{", encoding="utf-8")
    blobs = sorted((root / ".blobs").rglob("*.json"))
    code, _, err = run_cli(capsys, "prune", "--cassette-dir", str(root), "--include-referenced")
    assert code == 2
    assert "cannot tell which blobs broken.json references" in err
    assert all(blob.exists() for blob in blobs)


# -- schema --------------------------------------------------------------------------------------


def test_schema_prints_the_cassette_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert "format version" in schema["title"]


def test_schema_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema", "--report")
    assert code == 0
    schema = json.loads(out)
    assert schema["properties"]["format"] == {"const": "pytest-agentreplay-report"}


def test_show_html_with_a_drift_from_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002", refund_amount=400)
    assert main(["diff", str(a), str(b), "--json"]) == 1
    drift_file = tmp_path / "drift.json"
    drift_file.write_text(capsys.readouterr().out, encoding="utf-8")
    out_file = tmp_path / "drift.html"
    code, _, _ = run_cli(capsys, "show", str(a), "--html", str(out_file), "--drift", str(drift_file))
    assert code == 0
    page = out_file.read_text(encoding="utf-8")
    assert page.count('class="drift-pair"') == 2
    assert page.count("drift-marker") == 2
    # A test of the JSON report holds its drift too; a file holding none is refused by name.
    drift_file.write_text(json.dumps({"nodeid": "t", "drift": json.loads(drift_file.read_text())}))
    assert run_cli(capsys, "show", str(a), "--html", str(out_file), "--drift", str(drift_file))[0] == 0
    assert out_file.read_text(encoding="utf-8") == page
    drift_file.write_text(json.dumps({"differences": [{"path": "x"}]}), encoding="utf-8")
    code, _, err = run_cli(capsys, "show", str(a), "--html", str(out_file), "--drift", str(drift_file))
    assert code == 2 and f"{drift_file} holds no drift result" in err and "agentreplay diff --json" in err


@pytest.mark.parametrize(
    ("field", "value"),
    [("seq_recorded", [1]), ("seq_replayed", "2"), ("label", ["x"]), ("event_type", {"a": 1}), ("kind", [])],
)
def test_show_html_refuses_a_drift_whose_fields_have_other_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object
) -> None:
    """A drift file edited by hand: a list or an object where a seq or a text belongs raised TypeError
    (unhashable type) out of the viewer, which groups differences by them."""
    a, b = tmp_path / "cassettes" / "a.json", tmp_path / "cassettes" / "b.json"
    build_run(a)
    build_run(b, run_id="run-0002", refund_amount=400)
    assert main(["diff", str(a), str(b), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    doc["differences"][0][field] = value
    drift_file = tmp_path / "drift.json"
    drift_file.write_text(json.dumps(doc), encoding="utf-8")
    out_file = tmp_path / "drift.html"
    code, _, err = run_cli(capsys, "show", str(a), "--html", str(out_file), "--drift", str(drift_file))
    assert code == 2 and f"{drift_file} holds no drift result" in err
    assert f"difference {field} is not" in err
