"""Reader of vcrpy cassettes (YAML or JSON, format version 1) into exchanges and events, handling what
real cassettes hold (still-encoded ``!!binary`` bodies, any header case, list values, SSE streams whole);
bodies come out in the stored BODY shapes live recording would store.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..cassette.validation import read_regular_file
from ..core.capture import Recorder, RunContext
from ..core.documents import Document, object_in
from ..core.events import Event, RunMeta
from ..core.run_settings import RunSettings
from ..exceptions import CassetteCorruptError, CassetteError
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
    # vcrpy stores a body as str, bytes (``!!binary``), None, or ``{"string": ...}``.
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
    they expand, then vcrpy's own safe loader."""
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
    """Refuse a YAML document whose aliases expand beyond ``MAX_ALIAS_NODES`` nodes (read from the event
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
    out: list[VcrInteraction] = []
    for item in read_vcr_document(Path(path)).get("interactions") or []:
        item = object_in(item)
        req = object_in(item.get("request"))
        headers = _header_pairs(req.get("headers"))
        request = request_from_vcr(req.get("method", "GET"), req.get("uri", ""), headers, req.get("body"))
        out.append(VcrInteraction(request, response_from_vcr(item.get("response"))))
    return out


def request_from_vcr(
    method: object, uri: object, headers: Mapping[str, object] | list[tuple[str, str]], body: object
) -> HttpRequest:
    return HttpRequest(str(method).upper(), str(uri), lower_headers(headers), _raw_body(body))


def response_from_vcr(given: object) -> HttpResponse:
    resp_raw = object_in(given)
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
    """A run read from vcrpy cassettes, labelled ``source: vcr`` (``diff.rules.IMPORTED_SOURCES``)."""
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


# -- the read-only vcrpy persisters behind :class:`~.vcr_compat.VcrReplay` (recording writes this format) --


class VcrCassetteError(CassetteCorruptError):
    """A vcrpy cassette that vcrpy's own serializer cannot read (vcrpy would treat it as empty)."""


class _AlreadyParsed:
    @staticmethod
    def deserialize(document: Document) -> Document:
        return document


@dataclass
class Persister:
    """vcrpy persister reading every cassette of a test, like pytest-recording's ``CombinedPersister``,
    but failing on an undecodable file instead of treating it as empty."""

    paths: tuple[Path, ...]
    found: list[Path] = field(default_factory=list)  # the cassette files read

    def load_cassette(self, cassette_path: str, serializer: object) -> tuple[list[object], list[object]]:
        from vcr.serialize import deserialize  # heavy: vcrpy, only where one of its cassettes is read

        fmt = _builtin_format(serializer)
        requests: list[object] = []
        responses: list[object] = []
        for path in self.paths:
            try:
                if fmt is None:  # a serializer the project registered: its own text format
                    label = f"vcrpy cassette {path.name}"
                    text = read_regular_file(path, limit=MAX_VCR_BYTES, label=label, cassette=path)
                    reqs, resps, *_ = deserialize(text.decode("utf-8"), serializer)
                else:
                    reqs, resps, *_ = deserialize(read_vcr_document(path, fmt), _AlreadyParsed)
            except FileNotFoundError:
                continue
            except CassetteError:
                raise  # not a regular file, too large: said as such
            except Exception as exc:  # YAML/JSON syntax, alias bomb, old format, wrong shape, not UTF-8
                raise VcrCassetteError(
                    f"cannot read the vcrpy cassette {path.name}: {first_line(exc)}",
                    cassette=path,
                    fixes=(
                        "fix or delete the file, then re-record the test (vcrpy would have treated it as "
                        "empty and overwritten it)",
                        "or convert it once: agentreplay import-vcr PATH",
                    ),
                ) from None
            self.found.append(path)
            requests.extend(reqs)
            responses.extend(resps)
        return requests, responses


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _builtin_format(serializer: object) -> VcrFormat | None:
    from vcr.serializers import jsonserializer, yamlserializer  # heavy: vcrpy, as above

    formats: dict[object, VcrFormat] = {yamlserializer: "yaml", jsonserializer: "json"}
    return formats.get(serializer)


_PLACE = "persister in the vcr_config fixture, or register_persister in pytest_recording_configure"


@dataclass
class ProjectPersister:
    """A persister the project gave: it loads the test's cassette (not the markers' extra ones, as under
    pytest-recording); anything it raises but "not found" is an error, never "empty"."""

    persister: Any
    path: Path
    found: list[Path] = field(default_factory=list)

    def load_cassette(self, cassette_path: str, serializer: object) -> tuple[object, ...]:
        from vcr.persisters.filesystem import CassetteNotFoundError  # heavy: vcrpy, as above

        name = getattr(self.persister, "__name__", type(self.persister).__name__)
        try:
            loaded = tuple(self.persister.load_cassette(cassette_path, serializer=serializer))
        except (CassetteNotFoundError, FileNotFoundError):
            return [], []
        except Exception as exc:
            raise VcrCassetteError(
                f"the vcrpy persister {name} cannot load {self.path.name}: {first_line(exc)}",
                cassette=self.path,
                place=_PLACE,
                fixes=(
                    "fix the persister or the cassette (vcrpy would have treated it as empty and recorded "
                    "over it)",
                ),
            ) from None
        if len(loaded) < 2 or not all(isinstance(part, list | tuple) for part in loaded[:2]):
            raise VcrCassetteError(
                f"the vcrpy persister {name} returned {type(loaded).__name__} of {len(loaded)} item(s) for "
                f"{self.path.name}, not (requests, responses)",
                cassette=self.path,
                place=_PLACE,
                fixes=(
                    "return (requests, responses) from load_cassette, as vcrpy's FilesystemPersister does",
                ),
            )
        self.found.append(self.path)
        return loaded
