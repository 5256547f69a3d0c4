"""Bytes on disk for a 50-model-call conversation: this project's cassette (+ blobs) vs vcrpy's YAML.

The same httpx traffic (a chat-completions conversation that resends its growing history on every call,
with a system prompt and tool schemas) goes to a local OpenAI-wire server on 127.0.0.1, recorded once
by vcrpy and once by pytest-agentreplay. Target: ours <= 25% of vcrpy's bytes. Last line: JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from servers import LLMServer, ModelReply, run_in

CALLS = 50
SYSTEM = "You are a careful support agent for a parcel company. " * 30
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{n}",
            "description": "Looks things up in the order system. " * 6,
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
    for n in range(6)
]


def converse(client: Any, server: LLMServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(CALLS):
        server.queue("chat", ModelReply(text=f"Answer {turn}: " + "your parcel is on its way. " * 8))
        messages.append({"role": "user", "content": f"Question {turn}: " + "where is my parcel? " * 10})
        body = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "temperature": 0}
        reply = client.post(f"{server.url}/v1/chat/completions", json=body).json()
        messages.append(reply["choices"][0]["message"])


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    import httpx
    import vcr

    from pytest_agentreplay.cassette.write import save_cassette

    with LLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vcr_dir = root / "vcr"
        with (
            vcr.use_cassette(str(vcr_dir / "conversation.yaml"), record_mode="all"),
            httpx.Client() as client,
        ):
            converse(client, server)
        ours_dir = root / "cassettes"
        with run_in("record") as ctx, httpx.Client() as client:
            converse(client, server)
        ctx.finish()
        save_cassette(ours_dir / "conversation.json", ctx.recorder.run, ctx.recorder.events)
        vcr_bytes, ours_bytes = size_of(vcr_dir), size_of(ours_dir)
    ratio = ours_bytes / vcr_bytes
    print(f"{'50-call conversation on disk':<44}{'bytes':>12}")
    print(f"{'vcrpy YAML cassette':<44}{vcr_bytes:>12,}")
    print(f"{'pytest-agentreplay cassette + blobs':<44}{ours_bytes:>12,}")
    print(f"{'ratio (target <= 0.25)':<44}{ratio:>12.3f}")
    print(json.dumps({"vcrpy_bytes": vcr_bytes, "ours_bytes": ours_bytes, "ours_vs_vcrpy": round(ratio, 4)}))


if __name__ == "__main__":
    main()
