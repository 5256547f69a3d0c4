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


# -- every stored body served with its recorded bytes; verify decodes them -----------------------------

BODY_URL = "http://127.0.0.1:9/bodies"  # a closed port: replay never sends


def _json_bodies() -> dict[str, bytes]:
    """Response bodies in both stored forms, small (inline) and large (blob store): ``lean`` ones keep their
    exact text only (key order and spacing no serialisation reproduces), ``full`` ones their parsed JSON."""
    big = "y" * 200_000
    return {
        "lean-inline": b'{\n  "zeta": 1,\n  "alpha": "x"\n}\n',
        "full-inline": json.dumps({"a": 1, "b": [1, 2]}).encode(),
        "lean-blob": ('{\n  "zeta": 2,\n  "alpha": "' + big + '"\n}\n').encode(),
        "full-blob": json.dumps({"a": 2, "b": big}).encode(),
    }


def _body_interaction(name: str, body: bytes) -> dict[str, Any]:
    headers = {"Content-Type": ["application/json"], "Content-Length": [str(len(body))]}
    found = interaction("GET", f"{BODY_URL}/{name}", None, 200, body.decode(), headers=headers)
    return found


def _stored_forms(cassette: Path) -> dict[str, str]:
    """How import-vcr stored each response body: ``lean``/``full``, ``inline``/``blob``."""
    doc = json.loads(cassette.read_text(encoding="utf-8"))
    blobs = cassette.parents[2] / ".blobs"
    forms: dict[str, str] = {}
    for event in doc["events"]:
        ref = event.get("output_ref")
        if not ref:
            continue
        url = event["input_ref"]["inline"]["url"]
        if "sha256" in ref:
            sha = ref["sha256"]
            payload = json.loads((blobs / sha[:2] / f"{sha}.json").read_text(encoding="utf-8"))
            where = "blob"
        else:
            payload, where = ref["inline"], "inline"
        body = payload["body"]
        forms[url.rsplit("/", 1)[1]] = f"{'full' if 'json' in body else 'lean'}-{where}"
    return forms


def test_imported_json_bodies_are_served_with_their_recorded_bytes(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both stored forms, inline and in the blob store, replay byte for byte (a lean blob was served as 0
    bytes); ``verify`` passes them and fails a blob whose bytes were altered."""
    from pytest_agentreplay.intercept import install

    install()()  # as in test_vcr_marker.py: the interceptors imported once, in this process
    bodies = _json_bodies()
    monkeypatch.chdir(pytester.path)
    source = pytester.path / "tests" / "cassettes" / "test_bodies" / "test_fetch.yaml"
    write_yaml(source, [_body_interaction(name, body) for name, body in bodies.items()])
    (pytester.path / "tests" / "expected.json").write_text(
        json.dumps({k: v.decode() for k, v in bodies.items()})
    )
    (pytester.path / "tests" / "test_bodies.py").write_text(
        "import json, pathlib, httpx, pytest\n\n"
        "@pytest.mark.vcr\n"
        "def test_fetch():\n"
        "    expected = json.loads((pathlib.Path(__file__).parent / 'expected.json').read_text())\n"
        "    for name, body in expected.items():\n"
        f"        response = httpx.get('{BODY_URL}/' + name)\n"
        "        assert response.content == body.encode(), (name, len(response.content))\n"
        "        assert response.json() == json.loads(body)\n"
    )
    code, _, err = run_cli(capsys, "import-vcr", "tests/cassettes", "--out", "cassettes")
    assert code == 0, err
    source.unlink()  # served from the imported cassette alone
    imported = pytester.path / "cassettes" / "tests" / "test_bodies" / "test_fetch.json"
    assert _stored_forms(imported) == {name: name for name in bodies}

    quiet = ("-p", "no:recording", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest")
    pytester.runpytest(*quiet).assert_outcomes(passed=1)
    code, out, _ = run_cli(capsys, "verify", "cassettes")
    assert code == 0, out

    blob = next((pytester.path / "cassettes" / ".blobs").rglob("*.json"))
    blob.write_bytes(blob.read_bytes().replace(b"yyyy", b"yyyz", 1))
    code, out, _ = run_cli(capsys, "verify", "cassettes")
    assert code == 1 and f"payload blob {blob.stem} does not match its content hash" in out, out
    pytester.runpytest(*quiet).assert_outcomes(failed=1)


def test_verify_fails_a_body_that_does_not_serve_its_recorded_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A vcrpy cassette edited by hand (the body, not its Content-Length): verify names the mismatch."""
    stale = interaction(
        "GET",
        "https://crm.example.com/x",
        None,
        200,
        json.dumps({"name": "Ada Lovelace"}),
        headers={"Content-Type": ["application/json"], "Content-Length": ["15"]},
    )
    write_yaml(tmp_path / "vcr" / "stale.yaml", [stale])
    assert run_cli(capsys, "import-vcr", str(tmp_path / "vcr"), "--out", str(tmp_path / "out"))[0] == 0
    code, out, _ = run_cli(capsys, "verify", str(tmp_path / "out"))
    assert code == 1
    assert "events[1].output_ref: the recorded body serves 24 bytes, its recorded content-length: 15" in out


def test_body_problems_decode_every_stored_form() -> None:
    from pytest_agentreplay.replay.replayability import body_problems

    assert body_problems({"body": {"json": {"a": 1}, "raw": '{"a": 1}'}}, b'{"a": 1}') == []
    assert body_problems({"headers": {"content-length": "3"}, "body": {"text": "abc"}}, b"abc") == []
    # A stored form replay cannot decode serves nothing; raw and json edited apart; a stale length.
    (empty,) = body_problems({"body": {"content_type": "application/json", "raw": "{}"}}, b"")
    assert "served as 0 bytes" in empty
    (apart,) = body_problems({"body": {"json": {"a": 1}, "raw": '{"a": 2}'}}, b'{"a": 2}')
    assert "raw text (what replay serves) and its json (what the diff compares) differ" in apart
    (stale,) = body_problems({"headers": {"content-length": "9"}, "body": {"text": "abc"}}, b"abc")
    assert "serves 3 bytes, its recorded content-length: 9" in stale
    # Decoded (a content coding undone), redacted or streamed bodies do not keep their length.
    assert (
        body_problems({"headers": {"content-length": "9"}, "body": {"text": "a", "coding": "gzip"}}, b"a")
        == []
    )
    assert (
        body_problems({"headers": {"content-length": "9"}, "body": {"text": "[REDACTED]"}}, b"[REDACTED]")
        == []
    )


# -- Ollama: its reads are reads; the order of imported calls is not compared ---------------------------

OLLAMA = "http://localhost:11434"


def _ollama(path: str, body: Any, answer: Any, method: str = "POST") -> dict[str, Any]:
    return interaction(
        method, f"{OLLAMA}{path}", None if body is None else json.dumps(body), 200, json.dumps(answer)
    )


def _chat() -> dict[str, Any]:
    answer = {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "Hi."},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 5,
        "eval_count": 2,
    }
    request = {"model": "llama3.2", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    return _ollama("/api/chat", request, answer)


def test_ollama_reads_are_reads_and_imported_order_is_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    show = _ollama("/api/show", {"model": "llama3.2"}, {"details": {"family": "llama"}})
    embed = _ollama("/api/embed", {"model": "all-minilm", "input": "hi"}, {"embeddings": [[0.1, 0.2]]})
    tags = _ollama("/api/tags", None, {"models": []}, method="GET")
    write_yaml(tmp_path / "a" / "run.yaml", [show, _chat(), embed, tags])
    write_yaml(tmp_path / "b" / "run.yaml", [_chat(), tags, embed, show])
    assert run_cli(capsys, "import-vcr", "a", "--out", "ia")[0] == 0
    assert run_cli(capsys, "import-vcr", "b", "--out", "ib")[0] == 0
    doc = json.loads((tmp_path / "ia" / "run.json").read_text(encoding="utf-8"))
    assert [e["type"] for e in doc["events"]] == [
        "run.start",
        "http",
        "model.call",
        "http",
        "http",
        "run.end",
    ]
    assert run_cli(capsys, "verify", "ia")[0] == 0
    code, stdout, _ = run_cli(capsys, "diff", "ia/run.json", "ib/run.json")
    assert code == 0, stdout
    assert "0 regressions" in stdout and "order changed" in stdout and "[expected" in stdout


def test_ollama_read_endpoints_classify_as_reads() -> None:
    from pytest_agentreplay.core.run_settings import RunSettings
    from pytest_agentreplay.http.classify import classify_exchange
    from pytest_agentreplay.http.exchange import HttpRequest

    def kind(method: str, path: str, body: Any = None) -> str:
        raw = b"" if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if body is not None else {}
        return classify_exchange(
            HttpRequest(method, f"{OLLAMA}{path}", headers, raw), None, RunSettings()
        ).kind

    for path, body in [
        ("/api/show", {"model": "llama3.2"}),
        ("/api/show", {"name": "llama3.2"}),
        ("/api/embed", {"model": "m", "input": "x"}),
        ("/api/embeddings", {"model": "m", "prompt": "x"}),
    ]:
        assert kind("POST", path, body) == "read", path
    assert kind("GET", "/api/tags") == kind("GET", "/api/ps") == "read"
    assert kind("POST", "/api/chat", {"model": "m", "messages": []}) == "model"
    # "/api/show" is a common path: without a body naming a model it stays a write.
    assert kind("POST", "/api/show", {"ticket": 7}) == "write"
    assert kind("POST", "/api/pull", {"model": "m"}) == "write"
