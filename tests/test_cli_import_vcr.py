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
