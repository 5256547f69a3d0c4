"""Real recorded LLM traffic (``../shared/corpus``, 35 vcrpy cassettes) replayed through the real SDKs.

Each cassette is converted to recorded events, then every interaction is re-issued through the
official SDK call that produced it (rebuilt from the recorded request body) while a replay run
serves it. The decisions the SDK returns and the ones our replay events carry must equal what the
raw recorded response bodies say; those expected values are computed here, independently of the
package (own YAML reading, gzip decoding and SSE splitting).
"""

from __future__ import annotations

import asyncio
import gzip
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from servers import MemoryCassette, http_events, run_in

CORPUS = Path(__file__).parents[2] / "shared" / "corpus"
FILES = sorted(CORPUS.rglob("*.yaml")) if CORPUS.is_dir() else []
INDEX = {r["local"]: r for r in json.loads((CORPUS / "index.json").read_text())} if FILES else {}

pytestmark = [
    pytest.mark.skipif(not FILES, reason=f"corpus folder absent: {CORPUS}"),
    # The recorded models are old: the SDK warns about their deprecation on every call.
    pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning"),
]


# -- independent reading of the raw recorded responses -------------------------------------------


def _raw_interactions(path: Path) -> list[dict[str, Any]]:
    import yaml

    doc = yaml.safe_load(path.read_bytes())
    out = []
    for item in doc["interactions"]:
        resp = item["response"]
        headers = {k.lower(): v[0] if isinstance(v, list) else v for k, v in resp["headers"].items()}
        body = resp["body"]["string"]
        if isinstance(body, str):
            body = body.encode()
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        req_body = item["request"]["body"]
        out.append(
            {
                "method": item["request"]["method"],
                "uri": item["request"]["uri"],
                "request": json.loads(req_body) if req_body else None,
                "status": resp["status"]["code"],
                "headers": headers,
                "body": body.decode("utf-8") if body else "",
            }
        )
    return out


def _sse_data(text: str) -> list[Any]:
    items = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:"))
        if data and data != "[DONE]":
            items.append(json.loads(data))
    return items


def _args(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) and raw else ({} if raw in (None, "") else raw)


def expected_decision(api: str, raw: dict[str, Any]) -> dict[str, Any]:
    """text, tool calls (name, arguments), stop reason, model, usage — straight from the raw body."""
    streamed = raw["headers"].get("content-type", "").startswith("text/event-stream")
    chunks = _sse_data(raw["body"]) if streamed else [json.loads(raw["body"])]
    if api == "openai.chat.completions":
        text, calls, stop, model, usage = "", {}, None, None, {}
        for c in chunks:
            model = model or c.get("model")
            usage = c.get("usage") or usage
            for choice in c.get("choices") or []:
                part = choice.get("delta") if streamed else choice.get("message")
                text += part.get("content") or ""
                for i, tc in enumerate(part.get("tool_calls") or []):
                    slot = calls.setdefault(tc.get("index", i), {"name": None, "args": ""})
                    slot["name"] = slot["name"] or tc["function"].get("name")
                    slot["args"] += tc["function"].get("arguments") or ""
                stop = choice.get("finish_reason") or stop
        return {
            "text": text or None,
            "tools": [(c["name"], _args(c["args"])) for _, c in sorted(calls.items())],
            "stop": stop,
            "model": model,
            "usage": (usage.get("prompt_tokens"), usage.get("completion_tokens")),
        }
    if api == "openai.responses":
        final = (
            chunks[0]
            if not streamed
            else next(c["response"] for c in chunks if c.get("type") == "response.completed")
        )
        text = "".join(
            p["text"]
            for item in final["output"]
            if item["type"] == "message"
            for p in item["content"]
            if p["type"] == "output_text"
        )
        tools = [(i["name"], _args(i["arguments"])) for i in final["output"] if i["type"] == "function_call"]
        return {
            "text": text or None,
            "tools": tools,
            "stop": final["status"],
            "model": final["model"],
            "usage": (final["usage"]["input_tokens"], final["usage"]["output_tokens"]),
        }
    # anthropic.messages
    if not streamed:
        msg = chunks[0]
        blocks, stop, model, usage = msg["content"], msg["stop_reason"], msg["model"], msg["usage"]
    else:
        blocks_by_index: dict[int, dict[str, Any]] = {}
        stop = model = None
        usage = {}
        for c in chunks:
            if c["type"] == "message_start":
                model, usage = c["message"]["model"], dict(c["message"]["usage"])
            elif c["type"] == "content_block_start":
                blocks_by_index[c["index"]] = {**c["content_block"], "_json": ""}
            elif c["type"] == "content_block_delta":
                b, d = blocks_by_index[c["index"]], c["delta"]
                if d["type"] == "text_delta":
                    b["text"] = b.get("text", "") + d["text"]
                elif d["type"] == "input_json_delta":
                    b["_json"] += d["partial_json"]
            elif c["type"] == "message_delta":
                stop = c["delta"].get("stop_reason") or stop
                usage.update({k: v for k, v in (c.get("usage") or {}).items() if v is not None})
        blocks = []
        for _, b in sorted(blocks_by_index.items()):
            if b["type"] == "tool_use":
                b["input"] = json.loads(b["_json"]) if b["_json"] else {}
            blocks.append(b)
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    tools = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    return {
        "text": text or None,
        "tools": tools,
        "stop": stop,
        "model": model,
        "usage": (usage.get("input_tokens"), usage.get("output_tokens")),
    }


# -- re-issuing the recorded calls through the SDKs ----------------------------------------------


def _split(method: Any, body: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    params = inspect.signature(method).parameters
    kwargs = {k: v for k, v in body.items() if k in params and k not in drop}
    extra = {k: v for k, v in body.items() if k not in params and k not in drop}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _api_of(uri: str) -> str | None:
    if uri.endswith("/chat/completions"):
        return "openai.chat.completions"
    if uri.endswith("/v1/responses"):
        return "openai.responses"
    if uri.endswith("/v1/messages"):
        return "anthropic.messages"
    return None


def sdk_decision(api: str, uri: str, body: dict[str, Any], use_async: bool) -> dict[str, Any]:
    import anthropic
    import openai

    if api == "openai.chat.completions":
        client = openai.OpenAI(base_url=uri.rsplit("/chat/completions", 1)[0], api_key="sk-x", max_retries=0)
        result = client.chat.completions.create(**_split(client.chat.completions.create, body))
        if not body.get("stream"):
            msg = result.choices[0].message
            return {
                "text": msg.content or None,
                "tools": [(t.function.name, _args(t.function.arguments)) for t in msg.tool_calls or []],
                "stop": result.choices[0].finish_reason,
                "model": result.model,
                "usage": (result.usage.prompt_tokens, result.usage.completion_tokens),
            }
        text, calls, stop, model, usage = "", {}, None, None, (None, None)
        for chunk in result:
            model = model or chunk.model
            if chunk.usage:
                usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tc in choice.delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"name": None, "args": ""})
                    slot["name"] = slot["name"] or (tc.function.name if tc.function else None)
                    slot["args"] += (tc.function.arguments or "") if tc.function else ""
                stop = choice.finish_reason or stop
        return {
            "text": text or None,
            "tools": [(c["name"], _args(c["args"])) for _, c in sorted(calls.items())],
            "stop": stop,
            "model": model,
            "usage": usage,
        }
    if api == "openai.responses":
        client = openai.OpenAI(base_url=uri.rsplit("/responses", 1)[0], api_key="sk-x", max_retries=0)
        result = client.responses.create(**_split(client.responses.create, body))
        if body.get("stream"):
            result = next(e.response for e in result if e.type == "response.completed")
        return {
            "text": result.output_text or None,
            "tools": [(i.name, _args(i.arguments)) for i in result.output if i.type == "function_call"],
            "stop": result.status,
            "model": result.model,
            "usage": (result.usage.input_tokens, result.usage.output_tokens),
        }

    def summary(msg: Any) -> dict[str, Any]:
        return {
            "text": "".join(b.text for b in msg.content if b.type == "text") or None,
            "tools": [(b.name, b.input) for b in msg.content if b.type == "tool_use"],
            "stop": msg.stop_reason,
            "model": msg.model,
            "usage": (msg.usage.input_tokens, msg.usage.output_tokens),
        }

    base = uri.rsplit("/v1/messages", 1)[0]
    if use_async:

        async def run() -> Any:
            aclient = anthropic.AsyncAnthropic(base_url=base, api_key="sk-ant-x", max_retries=0)
            kwargs = _split(aclient.messages.stream, body, drop=("stream",))
            async with aclient.messages.stream(**kwargs) as stream:
                return summary(await stream.get_final_message())

        return asyncio.run(run())
    client = anthropic.Anthropic(base_url=base, api_key="sk-ant-x", max_retries=0)
    if body.get("stream"):
        with client.messages.stream(**_split(client.messages.stream, body, drop=("stream",))) as stream:
            return summary(stream.get_final_message())
    return summary(client.messages.create(**_split(client.messages.create, body)))


def _ours(event: Any) -> dict[str, Any]:
    d = event.data["decision"]
    return {
        "text": d["text"],
        "tools": [(c["name"], c["arguments"]) for c in d["tool_calls"]],
        "stop": d["stop_reason"],
        "model": event.data["response_model"],
        "usage": (event.data["usage"].get("input_tokens"), event.data["usage"].get("output_tokens")),
    }


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_corpus_cassette_replays_through_the_sdk(path: Path) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    import httpx2

    from pytest_agentreplay.interop.vcr_format import interactions_to_events, load_vcr

    events = interactions_to_events(load_vcr(path))
    raw = _raw_interactions(path)
    assert len(events) == len(raw)
    use_async = "Async" in INDEX.get(str(path.relative_to(CORPUS)), {}).get("sdk_call", "")
    with run_in("regression", recorded=MemoryCassette(events), cassette=str(path)) as ctx:
        for item in raw:
            api = _api_of(item["uri"])
            if api is None:
                # A non-model interaction (the pelican.jpg HEAD/GET) is served as a read.
                with httpx2.Client() as client:
                    response = client.request(item["method"], item["uri"])
                assert response.status_code == item["status"]
                if "content-length" in item["headers"]:
                    assert response.headers["content-length"] == item["headers"]["content-length"]
                continue
            expected = expected_decision(api, item)
            assert sdk_decision(api, item["uri"], item["request"], use_async) == expected
    assert list(ctx.failures) == []
    replayed = http_events(ctx)
    assert [e.type for e in replayed] == [e.type for e in events]
    for event, item in zip(replayed, raw, strict=True):
        api = _api_of(item["uri"])
        if api is None:
            assert (event.type, event.data["classification"]) == ("http", "read")
            continue
        assert event.data["provider"] == api.split(".")[0]
        assert _ours(event) == expected_decision(api, item)
        assert event.data["streamed"] == bool(item["request"].get("stream"))
    # Straight after import, with no project rules, the replayed history does not drift (issue 12).
    from pytest_agentreplay.core.events import event_to_dict
    from pytest_agentreplay.diff.pipeline import RuleLayers, compare_run
    from pytest_agentreplay.redaction import Redactor

    redactor = Redactor.from_config({})
    # import-vcr writes through the same redaction as a recording: compare like with like.
    recorded_dicts = [redactor.redact(event_to_dict(e)) for e in http_events_of(events)]
    replayed_dicts = [redactor.redact(event_to_dict(e)) for e in replayed]
    result = compare_run(
        recorded_dicts,
        replayed_dicts,
        layers=RuleLayers("regression"),
        labels={"source": "vcr"},  # as import-vcr labels the run
        payloads=MemoryCassette(events),
    )
    assert not result.has_regressions, [d.path for d in result.regressions]


def http_events_of(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type in ("model.call", "http", "effect")]
