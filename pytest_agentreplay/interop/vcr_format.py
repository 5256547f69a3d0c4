"""Reader of vcrpy cassettes (YAML or JSON, format version 1) into exchanges and events, handling what
real cassettes hold (still-encoded ``!!binary`` bodies, any header case, list values, SSE streams whole);
bodies come out in the stored BODY shapes live recording would store.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from ..cassette.validation import read_regular_file
from ..core.capture import Recorder, RunContext
from ..core.documents import Document
from ..core.events import Event, RunMeta
from ..core.run_settings import RunSettings
from ..http import bodies
from ..http.classify import classify_exchange
from ..http.exchange import HttpRequest, HttpResponse, lower_headers, stored_response_headers
from ..http.recording import emit_exchange

VcrFormat: TypeAlias = Literal["yaml", "json"]


@dataclass(slots=True)
class VcrInteraction:
    request: HttpRequest
    response: HttpResponse


def _header_pairs(raw: object) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, value in raw.items() if isinstance(raw, Mapping) else ():
        values = value if isinstance(value, list) else [value]
        pairs.extend((str(name), str(v)) for v in values)
    return pairs


def _raw_body(body: object) -> bytes:
    """vcrpy stores a body as str, bytes (``!!binary``), None, or ``{"string": ...}``."""
    if isinstance(body, dict):
        body = body.get("string", body.get("base64_string"))
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    return str(body).encode("utf-8")


# Nodes that YAML aliases may add when expanded (a "billion laughs" file is a few hundred bytes).
MAX_ALIAS_NODES = 100_000
MAX_VCR_BYTES = 256 * 1024 * 1024


class AliasBombError(ValueError):
    """A YAML document whose aliases expand beyond ``MAX_ALIAS_NODES`` nodes, or refer to themselves."""


class NotVcrCassetteError(ValueError):
    """A document that parsed but is not a vcrpy cassette (no ``interactions`` list)."""


def read_vcr_document(path: Path, fmt: VcrFormat | None = None) -> Document:
    """The one reader of vcrpy cassettes: a regular file of bounded size, YAML alias bombs refused before
    they expand, then vcrpy's own safe loader. ``FileNotFoundError`` passes through."""
    data = read_regular_file(path, limit=MAX_VCR_BYTES, label=f"vcrpy cassette {path.name}", cassette=path)
    if fmt is None:
        fmt = "json" if path.suffix.lower() == ".json" or data.lstrip()[:1] == b"{" else "yaml"
    if fmt == "json":
        doc = json.loads(data)
    else:
        import yaml  # heavy: PyYAML, imported only where a vcrpy cassette is read
        from vcr.serializers import yamlserializer  # heavy: vcrpy, likewise

        if b"&" in data:
            check_alias_expansion(data, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        doc = yamlserializer.deserialize(data)
    if not isinstance(doc, dict) or "interactions" not in doc:
        raise NotVcrCassetteError("not a vcrpy cassette: no 'interactions' list")
    return doc


def check_alias_expansion(text: str | bytes, loader: type) -> None:
    """Refuse a YAML document whose aliases would expand beyond ``MAX_ALIAS_NODES`` nodes (from the event
    stream: nothing is built)."""
    import yaml  # heavy: PyYAML, imported only where a vcrpy cassette is read

    sizes: dict[str, int] = {}
    stack: list[tuple[str | None, list[int]]] = []  # (anchor, [nodes so far])
    expanded = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            size = sizes.get(str(event.anchor))
            if size is None:
                raise AliasBombError(
                    f"alias *{event.anchor} refers to a node that contains it (a recursive alias)"
                )
            expanded += size
            if expanded > MAX_ALIAS_NODES:
                raise AliasBombError(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (at *{event.anchor}): "
                    "refusing an alias bomb"
                )
            if stack:
                stack[-1][1][0] += size
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                sizes[str(event.anchor)] = 1
            if stack:
                stack[-1][1][0] += 1
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append((event.anchor, [1]))
        elif isinstance(event, yaml.CollectionEndEvent) and stack:
            anchor, (count,) = stack.pop()
            if anchor:
                sizes[str(anchor)] = count
            if stack:
                stack[-1][1][0] += count


def load_vcr(path: str | Path) -> list[VcrInteraction]:
    """A vcrpy cassette's interactions in this project's shapes."""
    out: list[VcrInteraction] = []
    for item in read_vcr_document(Path(path)).get("interactions") or []:
        item = _mapping(item)
        req = _mapping(item.get("request"))
        headers = _header_pairs(req.get("headers"))
        request = request_from_vcr(req.get("method", "GET"), req.get("uri", ""), headers, req.get("body"))
        out.append(VcrInteraction(request, response_from_vcr(item.get("response"))))
    return out


def request_from_vcr(
    method: object, uri: object, headers: Mapping[str, object] | list[tuple[str, str]], body: object
) -> HttpRequest:
    """A vcrpy request (a cassette's dict or vcrpy's ``Request``'s fields) as an ``HttpRequest``."""
    return HttpRequest(str(method).upper(), str(uri), lower_headers(headers), _raw_body(body))


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def response_from_vcr(given: object) -> HttpResponse:
    """A vcrpy response dict as a served ``HttpResponse``."""
    resp_raw = _mapping(given)
    resp_headers = lower_headers(_header_pairs(resp_raw.get("headers")))
    raw = _raw_body(resp_raw.get("body"))
    encoding = resp_headers.get("content-encoding")
    if encoding:
        # vcrpy's decode_compressed_response may have decoded it already but left the header.
        with contextlib.suppress(Exception):
            raw = bodies.decode_content(raw, encoding)
    status = resp_raw.get("status") or {}
    code = int(str(status.get("code", 200))) if isinstance(status, Mapping) else int(str(status))
    return HttpResponse(
        code,
        stored_response_headers(resp_headers, decoded=bool(encoding)),
        bodies.encode_body(raw, resp_headers.get("content-type"), exact=True),
    )


def vcrpy_run(run_id: str, test: str | None, cassettes: str) -> RunMeta:
    """A run read from the vcrpy cassettes named ``cassettes``, labelled ``source: vcr``: the lenient rules
    of imported recordings apply to it (``diff.rules.IMPORTED_SOURCES``)."""
    labels = {"source": "vcr", "imported_from": "vcrpy", "vcr_cassette": cassettes}
    return RunMeta(run_id=run_id, test=test, labels=labels)


def interactions_to_events(
    interactions: Iterable[VcrInteraction],
    settings: RunSettings | Document | None = None,
    run: RunMeta | None = None,
    *,
    framed: bool = False,
    cassette: str | None = None,
) -> list[Event]:
    """Classify and record each interaction as live recording would; ``framed``: in run.start/run.end."""
    run = run or RunMeta(run_id="vcr-import")
    ctx = RunContext(Recorder(run), mode="capture", cassette=cassette, settings=settings or {})
    if framed:
        ctx.start()
    for item in interactions:
        cls = classify_exchange(item.request, item.response, ctx.settings)
        emit_exchange(ctx, item.request, item.response, cls, 0.0)
    if framed:
        ctx.finish()
    return ctx.recorder.events
