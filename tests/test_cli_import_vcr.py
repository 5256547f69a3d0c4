"""`agentreplay import-vcr`: vcrpy / pytest-recording cassettes (YAML or JSON, gzip bodies, SSE) into
classified, redacted, verifiable cassettes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cli import main

SECRET_KEY = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5P" * 3


def interaction(
    method: str,
    uri: str,
    request_body: Any,
    status: int,
    body: Any,
    headers: dict[str, list[str]] | None = None,
    request_headers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    return {
        "request": {
            "method": method,
            "uri": uri,
            "body": request_body,
            "headers": request_headers or {"Content-Type": ["application/json"]},
        },
        "response": {
            "status": {"code": status, "message": "OK"},
            "headers": headers or {"Content-Type": ["application/json"]},
            "body": {"string": body},
        },
    }


def chat_request(content: str) -> str:
    return json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]})


def chat_response(text: str, prompt_tokens: int, completion_tokens: int) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-x",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": 0,
            },
        }
    )


def write_yaml(path: Path, interactions: list[dict[str, Any]]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}), encoding="utf-8")
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_yaml_with_gzip_body_and_effect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_yaml(
        tmp_path / "vcr" / "test_flow.yaml",
        [
            interaction(
                "POST",
                "https://api.openai.com/v1/chat/completions",
                chat_request("open a ticket"),
                200,
                gzip.compress(chat_response("Opening it.", 11, 3).encode()),
                headers={"Content-Type": ["application/json"], "Content-Encoding": ["gzip"]},
                request_headers={
                    "Content-Type": ["application/json"],
                    "Authorization": [f"Bearer {SECRET_KEY}"],
                },
            ),
            interaction("GET", "https://crm.example.com/customers/7", None, 200, json.dumps({"name": "Ada"})),
            interaction(
                "POST",
                "https://tickets.example.com/v1/tickets",
                json.dumps({"subject": "late parcel"}),
                201,
                json.dumps({"id": "T-100", "status": "open"}),
                request_headers={"Content-Type": ["application/json"], "Idempotency-Key": ["ticket-7"]},
            ),
        ],
    )
    out = tmp_path / "imported"
    code, stdout, err = run_cli(capsys, "import-vcr", str(tmp_path / "vcr"), "--out", str(out))
    assert code == 0, err
    target = out / "test_flow.json"
    assert f"imported {source} -> {target} (5 events)" in stdout
    doc = json.loads(target.read_text(encoding="utf-8"))
    types = [e["type"] for e in doc["events"]]
    assert types == ["run.start", "model.call", "http", "effect", "run.end"]
    model = doc["events"][1]["data"]
    assert model["provider"] == "openai" and model["model"] == "gpt-4o-mini"
    assert model["usage"]["input_tokens"] == 11 and model["decision"]["text"] == "Opening it."
    effect = doc["events"][3]
    assert effect["tool"]["idempotency_key"] == "ticket-7"
    assert effect["effect"]["receipt"] == "T-100" and effect["effect"]["committed"] is True
    assert SECRET_KEY not in target.read_text(encoding="utf-8")
    for blob in (out / ".blobs").rglob("*.json") if (out / ".blobs").is_dir() else []:
        assert SECRET_KEY not in blob.read_text(encoding="utf-8")
    code, stdout, _ = run_cli(capsys, "verify", str(out))
    assert code == 0, stdout


def test_json_cassette_with_sse_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chunks = [
        {"id": "c1", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {
            "id": "c1",
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}],
        },
        {
            "id": "c1",
            "model": "gpt-4o-mini",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        },
    ]
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    source = tmp_path / "vcr" / "stream.json"
    source.parent.mkdir(parents=True)
    source.write_text(
        json.dumps(
            {
                "version": 1,
                "interactions": [
                    interaction(
                        "POST",
                        "https://api.openai.com/v1/chat/completions",
                        json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": []}),
                        200,
                        stream,
                        headers={"Content-Type": ["text/event-stream"]},
                    )
                ],
            }
        ),
        encoding="utf-8",
    )
    out = tmp_path / "imported"
    code, _, err = run_cli(capsys, "import-vcr", str(source), "--out", str(out))
    assert code == 0, err
    doc = json.loads((out / "stream.json").read_text(encoding="utf-8"))
    call = doc["events"][1]["data"]
    assert call["streamed"] is True
    assert call["decision"]["text"] == "Hello"
    assert call["usage"] == {"input_tokens": 5, "output_tokens": 2}
    code, stdout, _ = run_cli(capsys, "show", str(out / "stream.json"))
    assert code == 0 and "(stream)" in stdout


def test_unreadable_input_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions: [unclosed", encoding="utf-8")
    code, _, err = run_cli(capsys, "import-vcr", str(bad), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "cannot import bad.yaml" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "bad.json").exists()


def test_non_vcr_json_in_a_folder_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_yaml(
        tmp_path / "vcr" / "one.yaml",
        [interaction("GET", "https://crm.example.com/x", None, 200, "{}")],
    )
    (tmp_path / "vcr" / "index.json").write_text('{"not": "a cassette"}', encoding="utf-8")
    code, stdout, _ = run_cli(capsys, "import-vcr", str(tmp_path / "vcr"), "--out", str(tmp_path / "out"))
    assert code == 0
    assert "1 imported, 0 failed" in stdout


def test_pytest_recording_layout_maps_to_the_test_and_where_the_plugin_looks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    get = [interaction("GET", "https://crm.example.com/x", None, 200, "{}")]
    folder = tmp_path / "tests" / "unit" / "cassettes" / "test_orders"
    write_yaml(folder / "test_plain.yaml", get)
    write_yaml(folder / "TestRefunds.test_refund.yaml", get)
    write_yaml(folder / "test_param[gpt-4o-1.5].yaml", get)
    code, stdout, err = run_cli(capsys, "import-vcr", "tests/unit/cassettes", "--out", "cassettes")
    assert code == 0, err
    expected = {
        "test_plain": "tests/unit/test_orders.py::test_plain",
        "TestRefunds.test_refund": "tests/unit/test_orders.py::TestRefunds::test_refund",
        "test_param[gpt-4o-1.5]": "tests/unit/test_orders.py::test_param[gpt-4o-1.5]",
    }
    for name, nodeid in expected.items():
        target = tmp_path / "cassettes" / "tests" / "unit" / "test_orders" / f"{name}.json"
        doc = json.loads(target.read_text(encoding="utf-8"))
        assert doc["run"]["test"] == nodeid
        assert doc["run"]["labels"]["source"] == "vcr"
        assert f"test {nodeid}" in stdout


def test_layout_mirror_and_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    get = [interaction("GET", "https://crm.example.com/x", None, 200, "{}")]
    write_yaml(tmp_path / "tests" / "cassettes" / "test_m" / "TestA.test_x.yaml", get)
    code, _, err = run_cli(capsys, "import-vcr", "tests/cassettes", "--out", "m", "--layout", "mirror")
    assert code == 0, err
    assert (tmp_path / "m" / "test_m" / "TestA.test_x.json").is_file()
    code, _, err = run_cli(
        capsys, "import-vcr", "tests/cassettes", "--out", "t", "--layout", "{module}/{cls}/{test}"
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "t" / "test_m" / "TestA" / "test_x.json").read_text(encoding="utf-8"))
    assert doc["run"]["test"] == "tests/test_m.py::TestA::test_x"
    code, _, err = run_cli(capsys, "import-vcr", "tests/cassettes", "--out", "u", "--layout", "sideways")
    assert code == 2 and "unknown --layout 'sideways'" in err


def test_imported_runs_are_judged_with_imported_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentreplay diff` of an imported cassette against a re-recording with a longer max_tokens and new
    headers: the body change is reported, not a regression (vcrpy never compared bodies); headers the
    imported recording lacks (a beta flag, a credential filtered at record time) are not compared."""
    monkeypatch.chdir(tmp_path)
    old = json.dumps({"model": "gpt-4o-mini", "max_tokens": 100, "messages": []})
    new = json.dumps({"model": "gpt-4o-mini", "max_tokens": 4000, "messages": []})
    answer = chat_response("Hi.", 3, 1)
    write_yaml(
        tmp_path / "a" / "one.yaml",
        [interaction("POST", "https://api.openai.com/v1/chat/completions", old, 200, answer)],
    )
    headers = {"Content-Type": ["application/json"], "OpenAI-Beta": ["v2"], "Authorization": ["x"]}
    url = "https://api.openai.com/v1/chat/completions"
    replayed = interaction("POST", url, new, 200, answer, request_headers=headers)
    write_yaml(tmp_path / "b" / "one.yaml", [replayed])
    assert run_cli(capsys, "import-vcr", "a", "--out", "ia")[0] == 0
    assert run_cli(capsys, "import-vcr", "b", "--out", "ib")[0] == 0
    code, stdout, _ = run_cli(capsys, "diff", "ia/one.json", "ib/one.json")
    assert code == 0, stdout
    assert "0 regressions, 2 expected differences" in stdout
    assert "input_ref.body.json.max_tokens: 100 -> 4000  [expected" in stdout
    assert "openai-beta" not in stdout and "authorization" not in stdout


# -- alias bombs (issue 11) ------------------------------------------------------------------------


def _alias_bomb(levels: int, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    lines.append("interactions:")
    lines.append(f"- request: {{method: GET, uri: 'http://example.com/', body: *a{levels}, headers: {{}}}}")
    lines.append("  response: {status: {code: 200, message: OK}, headers: {}, body: {string: ok}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [6, 9, 20])
def test_alias_bomb_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], levels: int) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb(levels), encoding="utf-8")
    assert bomb.stat().st_size < 2000
    code, _, err = run_cli(capsys, "import-vcr", str(bomb), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "cannot import bomb.yaml" in err and "alias" in err and "Traceback" not in err
    assert not list((tmp_path / "out").rglob("*.json")) if (tmp_path / "out").exists() else True


def test_recursive_alias_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "loop.yaml"
    bad.write_text("a: &a [*a]\ninteractions: []\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "import-vcr", str(bad), "--out", str(tmp_path / "out"))
    assert code == 2 and "recursive alias" in err, err


def test_shared_anchors_within_the_bound_still_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "h: &h {Content-Type: [application/json]}\ninteractions:\n"
        "- request: {method: GET, uri: 'http://example.com/a', body: null, headers: *h}\n"
        "  response: {status: {code: 200, message: OK}, headers: *h, body: {string: '{\"a\": 1}'}}\n"
        "- request: {method: GET, uri: 'http://example.com/b', body: null, headers: *h}\n"
        "  response: {status: {code: 200, message: OK}, headers: *h, body: {string: '{\"b\": 2}'}}\n"
    )
    source = tmp_path / "shared.yaml"
    source.write_text(text, encoding="utf-8")
    code, out, err = run_cli(capsys, "import-vcr", str(source), "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "1 imported, 0 failed" in out
