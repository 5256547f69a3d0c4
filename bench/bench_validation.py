"""Validating a cassette's records: pydantic's JSON validation against parse-then-validate.

    python bench/bench_validation.py [--repeats 15]

For each cassette of the repository (``cassettes/``, ``example_project/``, ``tests/``) and two synthetic
ones (bench_load's ~6 MB run, a 400-call conversation), the document as the records see it (events decoded
from their stored form) is written as JSON bytes, then validated as ``CassetteDoc`` three ways:

- ``jiter+validate``: ``jiter.from_json`` then ``CassetteDoc.model_validate`` (what loading does);
- ``json+validate``: ``json.loads`` then ``model_validate``;
- ``validate_json``: ``CassetteDoc.model_validate_json`` on the bytes (pydantic parses and validates in one
  pass, in Rust).

Then the whole load path each way: loading also needs the parsed document itself (the events are stored
as deltas over earlier requests, decoded in Python, and the integrity chain is over the stored form), so
JSON validation there comes after the parse, on the decoded events written back as JSON
(``load: parse, decode, dumps, validate_json``) rather than in place of ``model_validate``.

Timings are medians of ``--repeats`` runs, the ways interleaved so that noise hits all alike; the
per-cassette figures are summed over the repository's cassettes. Last line: one JSON object of the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jiter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load import build_events  # noqa: E402

from pytest_agentreplay.cassette.blobs import BlobStore, default_blob_dir  # noqa: E402
from pytest_agentreplay.cassette.read import decoded_document  # noqa: E402
from pytest_agentreplay.cassette.write import save_cassette  # noqa: E402
from pytest_agentreplay.core.documents import Document  # noqa: E402
from pytest_agentreplay.core.events import CassetteDoc, Event, PayloadRef, RunMeta  # noqa: E402


def repository_cassettes() -> list[Path]:
    found = [
        path
        for folder in ("cassettes", "example_project", "tests")
        for path in sorted((ROOT / folder).rglob("*.json"))
        if ".blobs" not in path.parts and _is_current_cassette(path)
    ]
    return found


def _is_current_cassette(path: Path) -> bool:
    try:
        doc = json.loads(path.read_bytes())
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("format") == "pytest-agentreplay" and doc.get("version") == 4


def conversation(calls: int) -> list[Event]:
    """A chat conversation resending its growing history on every call (stored as deltas)."""
    events = []
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a support agent. " * 10}]
    for seq in range(calls):
        messages = [*messages, {"role": "user", "content": f"question {seq} " + "words " * 20}]
        request = {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "headers": {"content-type": "application/json"},
            "body": {"json": {"model": "m", "messages": messages}, "content_type": "application/json"},
        }
        answer = {"role": "assistant", "content": f"answer {seq} " + "words " * 20}
        response = {
            "status": 200,
            "headers": {"content-type": "application/json"},
            "body": {"json": {"choices": [{"message": answer}]}, "content_type": "application/json"},
        }
        messages = [*messages, answer]
        events.append(
            Event(
                run_id="run-1",
                seq=seq,
                ts="2025-01-01T00:00:00Z",
                type="model.call",
                actor="model",
                event_class="decision",
                input_ref=PayloadRef(
                    inline=request, media_type="application/vnd.agentreplay.http-request+json"
                ),
                output_ref=PayloadRef(
                    inline=response, media_type="application/vnd.agentreplay.http-response+json"
                ),
                data={"model": "m", "provider": "openai"},
            )
        )
    return events


def in_memory_document(path: Path) -> tuple[bytes, bytes, BlobStore]:
    """(the file's bytes, the document with its events decoded, as JSON bytes, the blob store)."""
    stored = path.read_bytes()
    raw: Document = json.loads(stored)
    store = BlobStore(default_blob_dir(path))
    decoded = decoded_document(raw, path, store)
    return stored, json.dumps(decoded).encode(), store


def ways(path: Path) -> dict[str, Callable[[], object]]:
    stored, content, store = in_memory_document(path)

    def load_validate() -> object:
        raw = jiter.from_json(stored)
        return CassetteDoc.model_validate(decoded_document(raw, path, store))

    def load_validate_json() -> object:
        raw = jiter.from_json(stored)
        return CassetteDoc.model_validate_json(json.dumps(decoded_document(raw, path, store)))

    return {
        "jiter+validate": lambda: CassetteDoc.model_validate(jiter.from_json(content)),
        "json+validate": lambda: CassetteDoc.model_validate(json.loads(content)),
        "validate_json": lambda: CassetteDoc.model_validate_json(content),
        "load: parse, decode, validate": load_validate,
        "load: parse, decode, dumps, validate_json": load_validate_json,
    }


def measure(cases: dict[str, Path], repeats: int) -> dict[str, dict[str, float]]:
    """Per case, per way: the median seconds."""
    prepared = {name: ways(path) for name, path in cases.items()}
    samples: dict[str, dict[str, list[float]]] = {
        name: {way: [] for way in funcs} for name, funcs in prepared.items()
    }
    for _ in range(repeats):
        for name, funcs in prepared.items():
            for way, fn in funcs.items():
                start = time.perf_counter()
                fn()
                samples[name][way].append(time.perf_counter() - start)
    return {name: {way: statistics.median(s) for way, s in per.items()} for name, per in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "cassettes" / "big.json"
        save_cassette(big, RunMeta(run_id="run-1"), build_events(2500))
        chat = Path(tmp) / "cassettes" / "chat.json"
        save_cassette(chat, RunMeta(run_id="run-1"), conversation(400))
        real = repository_cassettes()
        results = measure({"big": big, "chat": chat, **{str(p): p for p in real}}, args.repeats)
        sizes = {"big": big.stat().st_size, "chat": chat.stat().st_size}
    totals: dict[str, dict[str, float]] = {
        "synthetic ~6 MB (bench_load)": results["big"],
        "synthetic 400-call conversation": results["chat"],
        f"repository cassettes ({len(real)}, summed)": {
            way: sum(results[str(p)][way] for p in real) for way in results["big"]
        },
    }
    width = max(len(way) for way in results["big"])
    for label, per in totals.items():
        print(label)
        for way, seconds in per.items():
            print(f"  {way:<{width}} {seconds * 1000:9.2f} ms")
    print(
        f"(files: big {sizes['big'] / 1e6:.1f} MB, chat {sizes['chat'] / 1e6:.2f} MB;"
        f" medians of {args.repeats})"
    )
    print(
        json.dumps({label: {w: round(s * 1000, 3) for w, s in per.items()} for label, per in totals.items()})
    )


if __name__ == "__main__":
    main()
