"""The 35 real vcrpy cassettes of ``../shared/corpus``: import, verify, show, and export to OpenTelemetry
with the right models and token counts (expected values read independently from the YAML)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.cli import main

CORPUS = Path(__file__).parents[2] / "shared" / "corpus"
FILES = sorted(CORPUS.rglob("*.yaml")) if CORPUS.is_dir() else []

pytestmark = pytest.mark.skipif(not FILES, reason=f"corpus folder absent: {CORPUS}")

MODEL_PATHS = ("/chat/completions", "/responses", "/messages")


def _sse(text: str) -> list[Any]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if data and data != "[DONE]":
            try:
                out.append(json.loads(data))
            except ValueError:
                continue
    return out


def _usage(body: Any) -> tuple[int | None, int | None]:
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None, None
    return usage.get("input_tokens", usage.get("prompt_tokens")), usage.get(
        "output_tokens", usage.get("completion_tokens")
    )


def expected_calls(path: Path) -> list[tuple[str, str | None, int | None, int | None]]:
    """(provider, request model, input tokens, output tokens) per model call, straight from the YAML."""
    import yaml

    doc = yaml.safe_load(path.read_bytes())
    out = []
    for item in doc["interactions"]:
        request, response = item["request"], item["response"]
        uri = request["uri"].split("?")[0]
        if not uri.endswith(MODEL_PATHS):
            continue
        provider = "anthropic" if "anthropic" in uri else "openai"
        model = json.loads(request["body"])["model"]
        body = response["body"]["string"]
        if isinstance(body, str):
            body = body.encode()
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        text = body.decode()
        inp = outp = None
        if text.lstrip().startswith("{"):
            inp, outp = _usage(json.loads(text))
        else:
            for chunk in _sse(text):
                kind = chunk.get("type")
                if kind == "message_start":
                    inp, outp = _usage(chunk["message"])
                elif kind == "message_delta":
                    usage = chunk.get("usage") or {}
                    inp = usage.get("input_tokens") if usage.get("input_tokens") is not None else inp
                    outp = usage.get("output_tokens") if usage.get("output_tokens") is not None else outp
                elif kind == "response.completed":
                    inp, outp = _usage(chunk["response"])
                elif chunk.get("usage"):
                    inp, outp = _usage(chunk)
        out.append((provider, model, inp, outp))
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "cassettes"
    assert main(["import-vcr", str(CORPUS), "--out", str(out), "--layout", "mirror"]) == 0
    return out


def target_of(imported: Path, source: Path) -> Path:
    return imported / source.relative_to(CORPUS).with_suffix(".json")


def test_all_35_import(imported: Path) -> None:
    assert len(FILES) == 35
    for source in FILES:
        assert target_of(imported, source).is_file(), source


def test_all_verify(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["verify", str(imported)]) == 0
    assert "35 cassette(s) ok" in capsys.readouterr().out


@pytest.mark.parametrize("source", FILES, ids=[f.stem for f in FILES])
def test_show_and_otel_export(source: Path, imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = target_of(imported, source)
    expected = expected_calls(source)
    assert expected, "every corpus file holds at least one model call"
    capsys.readouterr()
    assert main(["show", str(cassette)]) == 0
    shown = capsys.readouterr().out
    assert shown.count(" model.call ") == len(expected)
    for _, model, _, _ in expected:
        assert str(model) in shown

    assert main(["export-otel", str(cassette)]) == 0
    doc = json.loads(capsys.readouterr().out)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chats = [s for s in spans if s["name"].startswith("chat")]
    got = []
    for span in chats:
        attributes = {a["key"]: a["value"] for a in span["attributes"]}

        def num(key: str, attributes: dict[str, Any] = attributes) -> int | None:
            return int(attributes[key]["intValue"]) if key in attributes else None

        assert attributes["gen_ai.operation.name"] == {"stringValue": "chat"}
        got.append(
            (
                attributes["gen_ai.provider.name"]["stringValue"],
                attributes["gen_ai.request.model"]["stringValue"],
                num("gen_ai.usage.input_tokens"),
                num("gen_ai.usage.output_tokens"),
            )
        )
        assert span["name"] == f"chat {attributes['gen_ai.request.model']['stringValue']}"
    assert got == expected


def test_corpus_viewer_pages(imported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for source in FILES[:5]:
        out = tmp_path / f"{source.stem}.html"
        assert main(["show", str(target_of(imported, source)), "--html", str(out)]) == 0
        page = out.read_text(encoding="utf-8")
        assert page.count('class="entry type-model-call') == len(expected_calls(source))
