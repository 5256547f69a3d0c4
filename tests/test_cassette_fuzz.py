"""Hostile cassettes: every generated case ends in a CassetteError subclass, a clean drift or a clean load.

Each case damages a cassette recorded here (model calls with blobs and a conversation chain, an SSE
stream, an HTTP read and write, tool calls): truncation, byte flips, deleted keys, wrong types, deep
nesting, huge numbers, bad UTF-8, edits with the hash chain recomputed, valid-hash blobs of the wrong
shape, FIFOs, ``/dev/zero``, symlinks leaving the cassette folder, path traversal in references, version
downgrades, and YAML alias bombs for ``import-vcr``. Each is run through ``agentreplay verify`` (the CLI
function, in-process) and through replay (load, then serving every exchange and tool result the way the
replay engine does, then the drift comparison), each under a timeout.

Set ``AGENTREPLAY_FUZZ_TABLE=path.json`` to write the per-category outcome counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay import api
from pytest_agentreplay.cli import main as cli_main
from pytest_agentreplay.core.canonical import dumps_compact, dumps_pretty, hash_value, sha256_hex
from pytest_agentreplay.core.capture import Recorder, RunContext, activate
from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE
from pytest_agentreplay.exceptions import CassetteError, DriftError, ReplayError
from pytest_agentreplay.http import bodies
from pytest_agentreplay.http.classify import classify_exchange
from pytest_agentreplay.http.exchange import HttpRequest, HttpResponse
from pytest_agentreplay.http.recording import emit_exchange

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, /dev/zero and signals")

SEED = 20261130
CASE_TIMEOUT_S = 10.0
MIN_CASES = 300

# -- base cassettes --------------------------------------------------------------------------------


@api.tool(name="lookup_order")
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order": order_id, "rows": [{"line": i, "note": "parcel " * 60} for i in range(8)]}


@api.tool(name="refund", effect="write", idempotency_key="idem")
def refund(order_id: str, idem: str) -> dict[str, Any]:
    return {"refund_id": f"rf-{order_id}", "status": "issued"}


def _exchange(ctx: RunContext, req: HttpRequest, status: int, ctype: str, raw: bytes) -> None:
    resp = HttpResponse(status, {"content-type": ctype}, bodies.encode_body(raw, ctype))
    emit_exchange(ctx, req, resp, classify_exchange(req, resp, ctx.settings), 1.0)


def _chat(turns: int, stream: bool) -> HttpRequest:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "lorem ipsum " * 60}
        for i in range(turns)
    ]
    body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages}
    if stream:
        body["stream"] = True
    return HttpRequest(
        "POST",
        "https://api.openai.com/v1/chat/completions",
        {"content-type": "application/json"},
        json.dumps(body).encode(),
    )


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
    ).encode()


def _sse() -> bytes:
    chunks = []
    for word in ["The", " parcel", " shipped", "."]:
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": word}}],
        }
        chunks.append(f"data: {json.dumps(chunk)}\n\n")
    chunks.append("data: [DONE]\n\n")
    return "".join(chunks).encode()


def record_base(path: Path, variant: int) -> None:
    with api.capture_run(path, agent="fuzz", run_id=f"run-{variant}", intercept_http=False) as ctx:
        _exchange(ctx, _chat(4 + variant, False), 200, "application/json", _completion("Where is it?"))
        lookup_order("A1")
        _exchange(
            ctx,
            HttpRequest("GET", "https://shop.example.com/orders/A1?x=1", {"accept": "application/json"}),
            200,
            "application/json",
            json.dumps({"order": "A1", "state": "shipped", "items": ["x" * 40] * (3 + variant)}).encode(),
        )
        if variant != 1:
            _exchange(ctx, _chat(6 + variant, True), 200, "text/event-stream", _sse())
        api.record_state({"order": "A1", "n": variant}, snapshot=True, label="after-lookup")
        _exchange(
            ctx,
            HttpRequest(
                "POST",
                "https://shop.example.com/tickets",
                {"content-type": "application/json", "idempotency-key": f"k-{variant}"},
                b'{"subject": "late"}',
            ),
            201,
            "application/json",
            b'{"id": "T-1", "ticket": "T-1"}',
        )
        refund("A1", idem=f"rk-{variant}")
        if variant == 2:
            _exchange(
                ctx,
                HttpRequest("GET", "https://shop.example.com/logo.png", {}),
                200,
                "image/png",
                bytes(range(256)) * 12,
            )


TOOLS: dict[str, Callable[..., Any]] = {"lookup_order": lookup_order, "refund": refund}
TOOL_PARAMS = {"lookup_order": {"order_id"}, "refund": {"order_id", "idem"}}

# -- the two runners -------------------------------------------------------------------------------


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def classify_outcome(run: Callable[..., str], *args: Any) -> tuple[str, BaseException | None]:
    """``clean``, ``reported``/``drift`` (what ``run`` returns), ``cassette-error`` or ``FOREIGN:<type>``."""
    try:
        with time_limit(CASE_TIMEOUT_S):
            return run(*args), None
    except CaseTimeout as exc:
        return "HANG", exc
    except CassetteError as exc:
        message = str(exc)
        if exc.cassette is None or "How to fix:" not in message:
            return "UNLOCATED:" + type(exc).__name__, exc
        return "cassette-error", exc
    except (ReplayError, DriftError) as exc:
        return "drift", exc
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return "FOREIGN:" + type(exc).__name__, exc


def run_verify(path: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["verify", str(path)])
    if code == 0:
        return "ok"
    if code == 1:
        return "reported"
    return "usage-error"


def run_replay(path: Path) -> str:
    """Load and serve everything as a regression replay does, then compare; ``clean`` or ``drift``."""
    from pytest_agentreplay.cassette.read import load_cassette
    from pytest_agentreplay.core.events import event_to_dict
    from pytest_agentreplay.diff.pipeline import RuleLayers, compare_run
    from pytest_agentreplay.redaction import Redactor
    from pytest_agentreplay.replay.policy import Serve, decide
    from pytest_agentreplay.replay.tools import ToolReplayer

    recorded = load_cassette(path, mode="regression")
    ctx = RunContext(
        Recorder(recorded.run),
        mode="regression",
        cassette=str(path),
        tools=ToolReplayer(recorded),
        recorded=recorded,
        settings={},
    )
    ctx.redactor = Redactor.from_config({})
    ctx.start()
    try:
        drift = False
        for event in recorded.events:
            ref = event.input_ref
            if ref is not None and ref.media_type == HTTP_REQUEST_MEDIA_TYPE:
                # The "live" call the agent would make: the recorded request itself.
                payload = recorded.payload(ref)
                request = HttpRequest(
                    str(payload.get("method", "GET")),
                    str(payload.get("url", "")),
                    {str(k): str(v) for k, v in (payload.get("headers") or {}).items()},
                    bodies.body_bytes(payload.get("body")),
                )
                # What every interceptor does with a call: ask the replay policy, then serve or refuse.
                action = decide(ctx, request)
                if not isinstance(action, Serve):
                    drift = True
                    continue
                b"".join(action.response.iter_chunks())
                action.response.wire_headers(request.method)
            elif event.type == "tool.call" and event.tool is not None:
                # The agent calls its @tool function; the decorator serves the recorded result.
                arguments = event.data.get("arguments")
                tool = TOOLS.get(event.tool.name)
                if (
                    tool is None
                    or not isinstance(arguments, dict)
                    or set(arguments) != TOOL_PARAMS[event.tool.name]
                ):
                    drift = True
                    continue
                try:
                    with activate(ctx):
                        tool(**arguments)
                except ReplayError:
                    drift = True
    except BaseException:
        # A run that raised still finishes: its runtime-value patches must not outlive it.
        ctx.finish("error")
        raise
    ctx.finish("ok")
    replayed = [ctx.redactor.redact(event_to_dict(e)) for e in ctx.recorder.events]
    result = compare_run(
        recorded.event_dicts(), replayed, layers=RuleLayers("regression"), labels=None, payloads=recorded
    )
    return "drift" if drift or result.has_regressions else "clean"


def run_import(path: Path, out: Path) -> str:
    from pytest_agentreplay.interop.vcr_import import import_vcr_file

    import_vcr_file(path, out / "imported.json", blob_dir=out / ".blobs")
    return "clean"


# -- mutations -------------------------------------------------------------------------------------


@dataclass
class Case:
    category: str
    name: str
    # Builds the damaged cassette in a fresh folder and returns the path to run.
    build: Callable[[Path], Path]
    kind: str = "cassette"  # or "vcr"


def rechain(doc: dict[str, Any]) -> dict[str, Any]:
    """Recompute the integrity fields the way the store writes them, over whatever the document holds."""
    from pytest_agentreplay.cassette.chain import event_digest, head_digest

    digests = [event_digest(e) if isinstance(e, dict) else hash_value(e) for e in doc["events"]]
    doc["event_count"] = len(doc["events"])
    doc["event_digests"] = digests
    doc["head_hash"] = head_digest(doc["run"], digests, len(digests))
    return doc


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    stack: list[tuple[tuple[Any, ...], Any]] = [(prefix, value)]
    while stack:
        path, item = stack.pop()
        if path:
            yield path
        if isinstance(item, dict):
            stack.extend(((*path, k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in enumerate(item))


def get_at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def deep(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


WRONG_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    "x",
    "",
    [],
    {},
    [1, 2],
    {"k": "v"},
    1.5,
    10**30,
    "0" * 64,
    {"$blob": "0" * 64},
    {"$chain": {"prev": None}},
    {"sse": "nope"},
    {"json": 1, "format": 7},
    {"base64": "!!!"},
]


class Fuzzer:
    def __init__(self, bases: list[Path], rng: random.Random) -> None:
        self.bases = bases
        self.rng = rng
        self.docs = [json.loads(p.read_text(encoding="utf-8")) for p in bases]

    # helpers to materialise a damaged copy of a base in a fresh folder
    def copy_base(self, base: int, work: Path) -> Path:
        src_root = self.bases[base].parent
        dst_root = work / "cassettes"
        shutil.copytree(src_root, dst_root, symlinks=True)
        return dst_root / self.bases[base].name

    def write_doc(self, base: int, work: Path, doc: Any) -> Path:
        path = self.copy_base(base, work)
        path.write_text(dumps_pretty(doc) if isinstance(doc, dict) else json.dumps(doc), encoding="utf-8")
        return path

    def blob_shas(self, base: int) -> list[str]:
        found = []
        for path in paths_in(self.docs[base]):
            if path[-1] == "sha256":
                value = get_at(self.docs[base], path)
                if isinstance(value, str):
                    found.append(value)
        return found

    def cases(self) -> list[Case]:
        out: list[Case] = []
        out += self.truncation()
        out += self.byte_flips()
        out += self.deleted_keys()
        out += self.wrong_types()
        out += self.deep_nesting()
        out += self.huge_numbers()
        out += self.bad_utf8()
        out += self.rechained_edits()
        out += self.blob_shapes()
        out += self.special_files()
        out += self.traversal()
        out += self.version_downgrade()
        out += self.alias_bombs()
        return out

    def pick_base(self) -> int:
        return self.rng.randrange(len(self.bases))

    def truncation(self) -> list[Case]:
        cases = []
        for i in range(24):
            base = self.pick_base()
            size = len(self.bases[base].read_bytes())
            cut = 0 if i == 0 else self.rng.randrange(size)

            def build(work: Path, base: int = base, cut: int = cut) -> Path:
                path = self.copy_base(base, work)
                path.write_bytes(self.bases[base].read_bytes()[:cut])
                return path

            cases.append(Case("truncation", f"base{base}[:{cut}]", build))
        return cases

    def byte_flips(self) -> list[Case]:
        cases = []
        for _ in range(30):
            base = self.pick_base()
            data = self.bases[base].read_bytes()
            flips = [
                (self.rng.randrange(len(data)), self.rng.randrange(1, 256))
                for _ in range(self.rng.choice([1, 1, 3]))
            ]

            def build(work: Path, base: int = base, flips: list[tuple[int, int]] = flips) -> Path:
                path = self.copy_base(base, work)
                buf = bytearray(self.bases[base].read_bytes())
                for pos, mask in flips:
                    buf[pos] ^= mask
                path.write_bytes(bytes(buf))
                return path

            cases.append(Case("byte-flip", f"base{base}{flips}", build))
        return cases

    def _dict_paths(self, base: int) -> list[tuple[Any, ...]]:
        doc = self.docs[base]
        return [p for p in paths_in(doc) if isinstance(get_at(doc, p[:-1]), dict)]

    def deleted_keys(self) -> list[Case]:
        cases = []
        for _ in range(30):
            base = self.pick_base()
            target = self.rng.choice(self._dict_paths(base))
            cases.append(
                Case("deleted-key", f"base{base}:{target}", self._edit(base, target, None, delete=True))
            )
        return cases

    def _edit(
        self, base: int, target: tuple[Any, ...], value: Any, *, delete: bool = False, chain: bool = False
    ) -> Callable[[Path], Path]:
        def build(work: Path) -> Path:
            doc = json.loads(json.dumps(self.docs[base]))
            parent = get_at(doc, target[:-1])
            if delete:
                del parent[target[-1]]
            else:
                parent[target[-1]] = json.loads(json.dumps(value))
            if chain and isinstance(doc.get("events"), list) and isinstance(doc.get("run"), dict):
                rechain(doc)
            return self.write_doc(base, work, doc)

        return build

    def wrong_types(self) -> list[Case]:
        cases = []
        for _ in range(30):
            base = self.pick_base()
            target = self.rng.choice(list(paths_in(self.docs[base])))
            value = self.rng.choice(WRONG_VALUES)
            cases.append(
                Case("wrong-type", f"base{base}:{target}={value!r:.30}", self._edit(base, target, value))
            )
        return cases

    def deep_nesting(self) -> list[Case]:
        cases = []
        targets = [
            ("run", "labels", "deep"),
            ("events", 0, "data", "deep"),
            ("events", 1, "output_ref", "inline"),
        ]
        for depth in (100, 190, 1_000, 50_000):
            for target in targets:
                for chain in (False, True):
                    base = self.pick_base()
                    value = deep(depth) if len(cases) % 2 else deep_dict(depth)

                    def build(
                        work: Path,
                        base: int = base,
                        target: Any = target,
                        chain: bool = chain,
                        v: Any = value,
                    ) -> Path:
                        doc = json.loads(json.dumps(self.docs[base]))
                        get_at(doc, target[:-1])[target[-1]] = v
                        if chain:
                            # Too deep to hash at the default limit: the chain then stays the old one.
                            with contextlib.suppress(RecursionError, ValueError):
                                rechain(doc)
                        path = self.copy_base(base, work)
                        path.write_text(_dumps_deep(doc), encoding="utf-8")
                        return path

                    cases.append(
                        Case("deep-nesting", f"base{base}:{target} depth {depth} chain={chain}", build)
                    )
        # A raw file of nothing but brackets.
        for depth in (10_000, 1_000_000):

            def build_raw(work: Path, depth: int = depth) -> Path:
                path = self.copy_base(0, work)
                path.write_text("[" * depth + "]" * depth, encoding="utf-8")
                return path

            cases.append(Case("deep-nesting", f"raw brackets {depth}", build_raw))
        return cases

    def huge_numbers(self) -> list[Case]:
        cases = []
        values = ["1" + "0" * 400, "1e999", "-1e999", "1" + "0" * 5000, "-0", "1.7976931348623157e309"]
        for raw in values:
            for target_kind in ("seq", "status", "size"):
                base = self.pick_base()

                def build(work: Path, base: int = base, raw: str = raw, kind: str = target_kind) -> Path:
                    path = self.copy_base(base, work)
                    text = self.bases[base].read_text(encoding="utf-8")
                    needle = {"seq": '"seq": 1', "status": '"status": 20', "size": '"size": '}[kind]
                    pos = text.find(needle)
                    if pos < 0:
                        pos = text.find('"seq": 1')
                        needle = '"seq": 1'
                    start = pos + len(needle.split(":")[0]) + 2
                    end = start
                    while end < len(text) and text[end] in "0123456789":
                        end += 1
                    path.write_text(text[:start] + raw + text[end:], encoding="utf-8")
                    return path

                cases.append(Case("huge-number", f"base{base}:{target_kind}={raw[:12]}", build))
        # Rechained: a huge integer where a number belongs, chain valid.
        for target in (("events", 0, "data", "latency_ms"), ("run", "decoding", "n")):
            base = self.pick_base()
            cases.append(
                Case("huge-number", f"rechained {target}", self._edit(base, target, 10**400, chain=True))
            )
        return cases

    def bad_utf8(self) -> list[Case]:
        cases = []
        for _ in range(12):
            base = self.pick_base()
            data = self.bases[base].read_bytes()
            pos = self.rng.randrange(len(data))
            junk = self.rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])

            def build(work: Path, base: int = base, pos: int = pos, junk: bytes = junk) -> Path:
                path = self.copy_base(base, work)
                data = self.bases[base].read_bytes()
                path.write_bytes(data[:pos] + junk + data[pos:])
                return path

            cases.append(Case("bad-utf8", f"base{base}@{pos}:{junk!r}", build))
        # A lone surrogate escape, chained.
        for base in range(len(self.bases)):

            def build_sur(work: Path, base: int = base) -> Path:
                path = self.copy_base(base, work)
                text = (
                    self.bases[base]
                    .read_text(encoding="utf-8")
                    .replace('"agent": "fuzz"', '"agent": "\\ud800"')
                )
                path.write_text(text, encoding="utf-8")
                return path

            cases.append(Case("bad-utf8", f"base{base}: lone surrogate", build_sur))
        return cases

    def rechained_edits(self) -> list[Case]:
        cases = []
        for i in range(70):
            base = self.pick_base()
            doc = self.docs[base]
            all_paths = [p for p in paths_in(doc) if p[0] in ("events", "run")]
            # Bias towards payloads, where replay reads what the schema does not check.
            payload_paths = [
                p for p in all_paths if "inline" in p or "data" in p or "tool" in p or "effect" in p
            ]
            target = self.rng.choice(payload_paths if i % 3 else all_paths)
            op = self.rng.choice(["delete", "type", "type"])
            if op == "delete" and isinstance(get_at(doc, target[:-1]), dict):
                build = self._edit(base, target, None, delete=True, chain=True)
            else:
                op = "type"
                build = self._edit(base, target, self.rng.choice(WRONG_VALUES), chain=True)
            cases.append(Case("rechained-edit", f"base{base}:{op}:{target}", build))
        # Structural: the same ref on every event, events swapped and rechained, an empty event list.
        for base in range(len(self.bases)):

            def swap(work: Path, base: int = base) -> Path:
                doc = json.loads(json.dumps(self.docs[base]))
                doc["events"][1], doc["events"][2] = doc["events"][2], doc["events"][1]
                return self.write_doc(base, work, rechain(doc))

            def empty(work: Path, base: int = base) -> Path:
                doc = json.loads(json.dumps(self.docs[base]))
                doc["events"] = []
                return self.write_doc(base, work, rechain(doc))

            cases.append(Case("rechained-edit", f"base{base}: swapped events", swap))
            cases.append(Case("rechained-edit", f"base{base}: no events", empty))
        return cases

    def _put_blob(self, root: Path, value: Any) -> str:
        try:
            data = dumps_compact(value).encode("utf-8")
        except RecursionError:
            data = _dumps_deep(value).encode("utf-8")
        sha = sha256_hex(data)
        target = root / ".blobs" / sha[:2] / f"{sha}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return sha

    def blob_shapes(self) -> list[Case]:
        cases = []
        sha_zero = "0" * 64
        # Payload-level shapes: what a whole request / response / tool payload blob holds.
        payload_shapes: list[Any] = [
            [],
            "text",
            42,
            None,
            {"status": "ok", "headers": {}, "body": None},
            {"status": 200, "headers": [], "body": None},
            {"status": 200, "headers": {"a": 1}, "body": None},
            {"status": 200, "headers": {}, "body": []},
            {"status": 200, "headers": {}, "body": {"sse": "x", "content_type": "text/event-stream"}},
            {"status": 200, "headers": {}, "body": {"sse": [1, 2], "content_type": "text/event-stream"}},
            {"status": 200, "headers": {}, "body": {"base64": "%%%", "content_type": None}},
            {"status": 200, "headers": {}, "body": {"text": 5, "content_type": None}},
            {"status": 200, "headers": {}, "body": {"json": {}, "format": 3}},
            {"status": 10**100, "headers": {}, "body": None},
            {"method": 1, "url": [], "headers": "h", "body": {"json": 1}},
            {"method": "GET", "url": "u", "headers": {}, "body": {"text": None}},
            {"$chain": {"prev": None}},
            {"$chain": {"items": "abc", "prev": None}},
            {"$chain": {"items": [], "prev": 7}},
            {"$chain": {"items": [], "prev": sha_zero}},
            {"$chain": {"items": [], "prev": "../../../etc/passwd"}},
            {"$chain": []},
            {"$blob": 5},
            {"$blob": "../" * 10 + "etc/passwd"},
            {"$blob": sha_zero},
            {"$lit": 5},
            {"$lit": {"$blob": "not-a-sha"}},
            {"messages": {"$chain": {"items": [{"$blob": "zz"}], "prev": None}}},
            deep(5_000),
            deep_dict(5_000),
            {"x": deep(900)},
            {"x": "y" * 100},
        ]
        for shape_index, shape in enumerate(payload_shapes):
            base = shape_index % len(self.bases)
            shas = self.blob_shas(base)
            which = shape_index % max(len(shas), 1)

            def build(work: Path, base: int = base, shape: Any = shape, which: int = which) -> Path:
                path = self.copy_base(base, work)
                root = path.parent
                sha = self._put_blob(root, shape)
                doc = json.loads(json.dumps(self.docs[base]))
                refs = [p for p in paths_in(doc) if p[-1] == "sha256"]
                get_at(doc, refs[which][:-1])["sha256"] = sha
                path.write_text(dumps_pretty(rechain(doc)), encoding="utf-8")
                return path

            cases.append(Case("blob-shape", f"base{base}: ref {which} -> {_short(shape)}", build))
        # Blob bombs: valid blobs, each referencing the one below twice (2**levels expansions).
        for levels in (12, 30, 60):

            def build_bomb(work: Path, levels: int = levels) -> Path:
                path = self.copy_base(0, work)
                sha = self._put_blob(path.parent, {"leaf": "x" * 64})
                for _ in range(levels):
                    sha = self._put_blob(path.parent, [{"$blob": sha}, {"$blob": sha}])
                sha = self._put_blob(
                    path.parent, {"status": 200, "headers": {}, "body": {"json": {"$blob": sha}}}
                )
                doc = json.loads(json.dumps(self.docs[0]))
                for event in doc["events"]:
                    ref = event.get("output_ref") or {}
                    if ref.get("media_type", "").endswith("http-response+json"):
                        event["output_ref"] = {k: v for k, v in ref.items() if k != "inline"} | {
                            "sha256": sha
                        }
                        break
                path.write_text(dumps_pretty(rechain(doc)), encoding="utf-8")
                return path

            cases.append(Case("blob-shape", f"blob bomb 2**{levels}", build_bomb))
        # Chain nodes: an existing chain node replaced (under a new valid hash) by a wrong one.
        node_shapes: list[Any] = [
            {"$chain": {"prev": None}},
            {"$chain": {"items": 1, "prev": None}},
            {"$chain": {"items": [], "prev": 3}},
            {"chain": {"items": [], "prev": None}},
            [],
            {"$chain": {"items": [], "prev": None, "extra": 1}},
        ]
        for base in range(len(self.bases)):
            for ni, node in enumerate(node_shapes):

                def build_node(work: Path, base: int = base, node: Any = node) -> Path:
                    path = self.copy_base(base, work)
                    root = path.parent
                    bad = self._put_blob(root, node)
                    # Rewrite the first blob holding a chain so its prev points at the bad node.
                    for file in sorted((root / ".blobs").rglob("*.json")):
                        value = json.loads(file.read_bytes())
                        if (
                            isinstance(value, dict)
                            and isinstance(value.get("$chain"), dict)
                            and value["$chain"].get("prev")
                        ):
                            value["$chain"]["prev"] = bad
                            new = self._put_blob(root, value)
                            text = path.read_text(encoding="utf-8").replace(file.stem, new)
                            doc = json.loads(text)
                            # The chain may be referenced from another blob: fix references there too.
                            for other in sorted((root / ".blobs").rglob("*.json")):
                                raw = other.read_text(encoding="utf-8")
                                if file.stem in raw and other.stem != file.stem:
                                    replaced = raw.replace(file.stem, new)
                                    new_sha = self._put_blob(root, json.loads(replaced))
                                    doc = json.loads(dumps_pretty(doc).replace(other.stem, new_sha))
                            path.write_text(dumps_pretty(rechain(doc)), encoding="utf-8")
                            return path
                    return path

                cases.append(Case("blob-shape", f"base{base}: chain node {ni}", build_node))
        # Inline payloads of the wrong shape, rechained (same class of damage without blobs).
        for shape_index, shape in enumerate(payload_shapes[:16]):
            base = shape_index % len(self.bases)

            def build_inline(work: Path, base: int = base, shape: Any = shape) -> Path:
                doc = json.loads(json.dumps(self.docs[base]))
                for event in doc["events"]:
                    ref = event.get("output_ref") or {}
                    if "inline" in ref and ref.get("media_type", "").endswith("http-response+json"):
                        ref["inline"] = shape
                        break
                return self.write_doc(base, work, rechain(doc))

            cases.append(Case("blob-shape", f"base{base}: inline response -> {_short(shape)}", build_inline))
        return cases

    def special_files(self) -> list[Case]:
        cases = []

        def fifo_cassette(work: Path) -> Path:
            path = self.copy_base(0, work)
            path.unlink()
            os.mkfifo(path)
            return path

        def fifo_blob(work: Path) -> Path:
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            blob = path.parent / ".blobs" / sha[:2] / f"{sha}.json"
            blob.unlink()
            os.mkfifo(blob)
            return path

        def zero_cassette(work: Path) -> Path:
            path = self.copy_base(0, work)
            path.unlink()
            path.symlink_to("/dev/zero")
            return path

        def zero_blob(work: Path) -> Path:
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            blob = path.parent / ".blobs" / sha[:2] / f"{sha}.json"
            blob.unlink()
            blob.symlink_to("/dev/zero")
            return path

        def urandom_cassette(work: Path) -> Path:
            path = self.copy_base(1, work)
            path.unlink()
            path.symlink_to("/dev/urandom")
            return path

        def blob_outside(work: Path) -> Path:
            # The blob is valid (right hash) but lives outside .blobs: a symlink must not be followed.
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            blob = path.parent / ".blobs" / sha[:2] / f"{sha}.json"
            outside = work / "outside" / f"{sha}.json"
            outside.parent.mkdir()
            shutil.move(blob, outside)
            blob.symlink_to(outside)
            return path

        def blob_dir_outside(work: Path) -> Path:
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            sub = path.parent / ".blobs" / sha[:2]
            outside = work / "elsewhere"
            shutil.move(sub, outside)
            sub.symlink_to(outside, target_is_directory=True)
            return path

        def cassette_outside(work: Path) -> Path:
            path = self.copy_base(0, work)
            outside = work / "outside.json"
            shutil.move(path, outside)
            path.symlink_to(outside)
            return path

        def cassette_dir(work: Path) -> Path:
            path = self.copy_base(0, work)
            path.unlink()
            path.mkdir()
            return path

        def blob_is_dir(work: Path) -> Path:
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            blob = path.parent / ".blobs" / sha[:2] / f"{sha}.json"
            blob.unlink()
            blob.mkdir()
            return path

        def huge_blob(work: Path) -> Path:
            # A sparse file far above any blob size limit, at a referenced blob's name.
            path = self.copy_base(0, work)
            sha = self.blob_shas(0)[0]
            blob = path.parent / ".blobs" / sha[:2] / f"{sha}.json"
            with blob.open("r+b") as handle:
                handle.truncate(3 * 1024**3)
            return path

        def huge_cassette(work: Path) -> Path:
            path = self.copy_base(0, work)
            with path.open("r+b") as handle:
                handle.truncate(3 * 1024**3)
            return path

        def dangling(work: Path) -> Path:
            path = self.copy_base(0, work)
            path.unlink()
            path.symlink_to(work / "nowhere.json")
            return path

        def unreadable(work: Path) -> Path:
            path = self.copy_base(0, work)
            path.chmod(0)
            return path

        for name, build in [
            ("fifo cassette", fifo_cassette),
            ("fifo blob", fifo_blob),
            ("/dev/zero cassette", zero_cassette),
            ("/dev/zero blob", zero_blob),
            ("/dev/urandom cassette", urandom_cassette),
            ("blob symlink leaving .blobs", blob_outside),
            ("blob folder symlink leaving .blobs", blob_dir_outside),
            ("cassette symlink leaving the folder", cassette_outside),
            ("cassette is a directory", cassette_dir),
            ("blob is a directory", blob_is_dir),
            ("3 GB sparse blob", huge_blob),
            ("3 GB sparse cassette", huge_cassette),
            ("dangling symlink", dangling),
        ]:
            category = "fifo" if "fifo" in name else "dev-zero" if "/dev/" in name else "special-file"
            if "symlink leaving" in name:
                category = "symlink-out"
            cases.append(Case(category, name, build))
        if os.geteuid() != 0:
            cases.append(Case("special-file", "unreadable cassette", unreadable))
        return cases

    def traversal(self) -> list[Case]:
        cases = []
        targets = ["../../../../etc/passwd", "/etc/passwd", "..", "0" * 63 + "/", "A" * 64, "0" * 64 + "\x00"]
        for bad in targets:
            for base in range(2):

                def build(work: Path, base: int = base, bad: str = bad) -> Path:
                    doc = json.loads(json.dumps(self.docs[base]))
                    refs = [p for p in paths_in(doc) if p[-1] == "sha256"]
                    get_at(doc, refs[0][:-1])["sha256"] = bad
                    return self.write_doc(base, work, rechain(doc))

                cases.append(Case("path-traversal", f"base{base}: sha256={bad!r}", build))

            def build_nested(work: Path, bad: str = bad) -> Path:
                path = self.copy_base(0, work)
                sha = self._put_blob(path.parent, {"messages": [{"$blob": bad}, {"$blob": bad}]})
                doc = json.loads(json.dumps(self.docs[0]))
                refs = [p for p in paths_in(doc) if p[-1] == "sha256"]
                get_at(doc, refs[0][:-1])["sha256"] = sha
                path.write_text(dumps_pretty(rechain(doc)), encoding="utf-8")
                return path

            cases.append(Case("path-traversal", f"nested $blob={bad!r}", build_nested))
        return cases

    def version_downgrade(self) -> list[Case]:
        cases = []
        edits: list[Callable[[dict[str, Any]], None]] = [
            lambda d: None,
            lambda d: d["events"][1]["data"].update(edited=True),
            lambda d: d["events"].pop(),
            lambda d: d["events"].reverse(),
            lambda d: d["run"].update(agent="someone-else"),
        ]
        for base in range(len(self.bases)):
            for ei, edit in enumerate(edits):
                for strip, old in ((True, 1), (False, 1), (True, 2), (False, 2)):

                    def build(
                        work: Path, base: int = base, edit: Any = edit, strip: bool = strip, old: int = old
                    ) -> Path:
                        doc = json.loads(json.dumps(self.docs[base]))
                        edit(doc)
                        doc["version"] = old
                        if strip:
                            doc.pop("event_count", None)
                            doc.pop("head_hash", None)
                            doc.pop("event_digests", None)
                        return self.write_doc(base, work, doc)

                    cases.append(
                        Case("version-downgrade", f"base{base}: edit {ei} strip={strip} to v{old}", build)
                    )
        for version in (0, -1, 4, "3", 3.0, None, 10**30):

            def build_v(work: Path, version: Any = version) -> Path:
                doc = json.loads(json.dumps(self.docs[0]))
                doc["version"] = version
                return self.write_doc(0, work, doc)

            cases.append(Case("version-downgrade", f"version={version!r:.20}", build_v))
        return cases

    def alias_bombs(self) -> list[Case]:
        cases = []
        for levels in (3, 5, 7, 9, 12):
            for width in (5, 9):
                lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
                for level in range(1, levels + 1):
                    lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
                lines.append("interactions:")
                lines.append(
                    f"- request: {{method: GET, uri: 'http://example.com/', body: *a{levels}, headers: {{}}}}"
                )
                lines.append(
                    "  response: {status: {code: 200, message: OK}, headers: {}, body: {string: ok}}"
                )
                text = "\n".join(lines) + "\n"

                def build(work: Path, text: str = text) -> Path:
                    path = work / "bomb.yaml"
                    path.write_text(text, encoding="utf-8")
                    return path

                cases.append(Case("alias-bomb", f"{levels} levels x {width}", build, kind="vcr"))
        # Aliases used in a harmless way stay importable; a recursive alias is refused cleanly.
        benign = (
            "h: &h {content-type: [application/json]}\ninteractions:\n"
            "- request: {method: GET, uri: 'http://example.com/a', body: null, headers: *h}\n"
            "  response: {status: {code: 200, message: OK}, headers: *h, body: {string: '{\"a\": 1}'}}\n"
        )
        recursive = "a: &a [*a]\ninteractions: []\n"
        for name, text in (("benign aliases", benign), ("recursive alias", recursive)):

            def build_text(work: Path, text: str = text) -> Path:
                path = work / "vcr.yaml"
                path.write_text(text, encoding="utf-8")
                return path

            cases.append(Case("alias-bomb", name, build_text, kind="vcr"))
        return cases


def _short(value: Any) -> str:
    try:
        return json.dumps(value)[:40]
    except RecursionError:
        return f"<{type(value).__name__} nested deeper than the recursion limit>"


def _dumps_deep(doc: Any) -> str:
    """json.dumps without the recursion limit: an explicit stack writer for deep test documents."""
    out: list[str] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            out.append("{")
            parts: list[Any] = []
            for i, (k, v) in enumerate(item.items()):
                if i:
                    parts.append(_Raw(","))
                parts.append(_Raw(json.dumps(k) + ":"))
                parts.append(v)
            parts.append(_Raw("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, list):
            out.append("[")
            parts = []
            for i, v in enumerate(item):
                if i:
                    parts.append(_Raw(","))
                parts.append(v)
            parts.append(_Raw("]"))
            stack.extend(reversed(parts))
        else:
            out.append(json.dumps(item))
    return "".join(out)


@dataclass
class _Raw:
    text: str


# -- the test --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("fuzz-bases")
    paths = []
    for variant in range(3):
        path = root / f"b{variant}" / "cassettes" / f"base{variant}.json"
        record_base(path, variant)
        paths.append(path)
    return paths


def test_bases_replay_clean_and_verify(bases: list[Path]) -> None:
    for path in bases:
        assert classify_outcome(run_verify, path)[0] == "ok"
        assert classify_outcome(run_replay, path)[0] == "clean"
        blobs = list((path.parent / ".blobs").rglob("*.json"))
        assert blobs, "the base cassettes must exercise the blob store"
        assert any('"$chain"' in b.read_text(encoding="utf-8") for b in blobs)


def _unblock_fifos(work: Path) -> None:
    # A reader stuck in open() of a FIFO is released by a writer opening and closing it.
    for fifo in work.rglob("*"):
        with contextlib.suppress(OSError):
            if fifo.is_fifo():
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)


def test_fuzzed_cassettes_end_in_the_error_family(bases: list[Path], tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cases = Fuzzer(bases, rng).cases()
    assert len(cases) >= MIN_CASES, len(cases)
    table: dict[str, Counter[str]] = defaultdict(Counter)
    failures: list[str] = []
    started = time.monotonic()
    for number, case in enumerate(cases):
        work = tmp_path / f"c{number}"
        work.mkdir()
        path = case.build(work)
        results: list[tuple[str, str, BaseException | None]] = []
        if case.kind == "vcr":
            outcome, exc = classify_outcome(run_import, path, work / "out")
            results.append(("import", outcome, exc))
        else:
            for runner_name, runner in (("verify", run_verify), ("replay", run_replay)):
                outcome, exc = classify_outcome(runner, path)
                if outcome == "HANG":
                    _unblock_fifos(work)
                results.append((runner_name, outcome, exc))
            verify_outcome, replay_outcome = results[0][1], results[1][1]
            if verify_outcome == "ok" and replay_outcome not in ("clean", "drift"):
                results.append(("verify", "MISSED", None))
        for runner_name, outcome, exc in results:
            table[case.category][f"{runner_name}:{outcome}"] += 1
            if outcome.isupper() or outcome.startswith(("FOREIGN", "UNLOCATED", "HANG", "MISSED")):
                detail = f"{type(exc).__name__}: {str(exc)[:200]}" if exc is not None else ""
                failures.append(f"[{case.category}] {case.name} -> {runner_name} {outcome} {detail}")
        with contextlib.suppress(OSError):
            for child in work.rglob("*"):
                if child.is_file() and not child.is_symlink():
                    child.chmod(0o644)
    elapsed = time.monotonic() - started
    lines = [f"{len(cases)} cases in {elapsed:.1f} s"]
    for category in sorted(table):
        n = sum(v for k, v in table[category].items() if k.startswith(("replay:", "import:")))
        counts = ", ".join(f"{k}={v}" for k, v in sorted(table[category].items()))
        lines.append(f"{category:18} {n:4}  {counts}")
    report = "\n".join(lines)
    print(report)
    if out := os.environ.get("AGENTREPLAY_FUZZ_TABLE"):
        Path(out).write_text(
            json.dumps(
                {"cases": len(cases), "table": {k: dict(v) for k, v in table.items()}, "failures": failures},
                indent=2,
            ),
            encoding="utf-8",
        )
    assert not failures, (
        f"{len(failures)} case(s) outside the error family:\n" + "\n".join(failures[:40]) + "\n" + report
    )


# -- through a real inner pytest session ------------------------------------------------------------

INNER_TEST = """
from pytest_agentreplay import tool, record_state

@tool(name="fetch_rows")
def fetch_rows(order_id):
    return [{"line": i, "note": "parcel " * 60} for i in range(6)]

def test_agent(agent_replay):
    rows = fetch_rows("A1")
    record_state({"rows": len(rows)})
"""


def _inner_blob(path: Path, value: Any) -> str:
    data = dumps_compact(value).encode("utf-8")
    sha = sha256_hex(data)
    target = path.parent.parent / ".blobs" / sha[:2] / f"{sha}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return sha


def _point_result_at(path: Path, sha: str) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    for event in doc["events"]:
        if event["type"] == "tool.result":
            event["output_ref"] = {k: v for k, v in event["output_ref"].items() if k != "inline"} | {
                "sha256": sha
            }
    path.write_text(dumps_pretty(rechain(doc)), encoding="utf-8")


def _result_blob(path: Path) -> Path:
    doc = json.loads(path.read_text(encoding="utf-8"))
    sha = next(e["output_ref"]["sha256"] for e in doc["events"] if e["type"] == "tool.result")
    return path.parent.parent / ".blobs" / sha[:2] / f"{sha}.json"


def _fifo(path: Path, tmp: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path, tmp: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _chain_without_items(path: Path, tmp: Path) -> None:
    _point_result_at(path, _inner_blob(path, {"$chain": {"prev": None}}))


def _deep_blob(path: Path, tmp: Path) -> None:
    _point_result_at(path, _inner_blob(path, deep(150)))


def _blob_outside(path: Path, tmp: Path) -> None:
    blob = _result_blob(path)
    outside = tmp / "outside.json"
    shutil.move(blob, outside)
    blob.symlink_to(outside)


def _downgrade(path: Path, tmp: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["version"] = 1
    del doc["event_count"], doc["head_hash"], doc["event_digests"]
    doc["events"][-2]["data"]["edited"] = True
    path.write_text(json.dumps(doc), encoding="utf-8")


INNER_CASES: list[tuple[str, Callable[[Path, Path], None], str]] = [
    ("fifo", _fifo, "FIFO"),
    ("dev-zero", _dev_zero, "symlink leading out of"),
    ("chain-shape", _chain_without_items, "chain"),
    ("deep-blob", _deep_blob, "nested"),
    ("blob-symlink-out", _blob_outside, "symlink leading out of"),
    ("version-downgrade", _downgrade, "agentreplay migrate"),
]


def test_inner_session_fails_cleanly(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replaying test fails with our message: no INTERNALERROR, no foreign exception, no hang."""
    # Only this plugin: the inner sessions then start in a fraction of the time.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    args = ("-p", "pytest_agentreplay.plugin", "-p", "no:cacheprovider")
    pytester.makepyfile(test_inner=INNER_TEST)
    pytester.runpytest("--agentreplay-record=all", *args).assert_outcomes(passed=1)
    cassettes = pytester.path / "cassettes"
    assert any('"$chain"' in p.read_text() for p in (cassettes / ".blobs").rglob("*.json"))
    pristine = pytester.path / "pristine"
    shutil.copytree(cassettes, pristine)
    path = cassettes / "test_inner" / "test_agent.json"
    for name, damage, needle in INNER_CASES:
        shutil.rmtree(cassettes)
        shutil.copytree(pristine, cassettes)
        damage(path, pytester.path)
        with time_limit(30):
            result = pytester.runpytest(*args)
        out = result.stdout.str()
        assert result.parseoutcomes().get("failed") == 1, f"{name}:\n{out}"
        assert "INTERNALERROR" not in out and "Traceback" not in out, f"{name}:\n{out}"
        for foreign in ("RecursionError", "MemoryError", "KeyError", "AttributeError", "TypeError"):
            assert foreign not in out, f"{name}:\n{out}"
        assert "test_agent.json" in out and "How to fix" in out and needle in out, f"{name}:\n{out}"
