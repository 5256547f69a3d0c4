"""gRPC calls as HTTP exchanges (docs/grpc.md): ``POST grpc://<authority>/<package.Service>/<Method>``, the
metadata its headers, its bodies JSON documents (a response's messages as bytes beside their readable
view, with the code, details and trailing metadata), the status the code's usual mapping. Imports no grpc.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

from ..core.constants import GRPC_SCHEME, REDACTED
from ..core.documents import Document
from .exchange import SECRET_HEADERS, HttpRequest, HttpResponse, lower_headers

Flavour = Literal["retrieval", "read", "write"]

# The status codes' usual HTTP equivalents (google.rpc.Code's documented mapping); the first code of a
# status is the one a client sees for an HTTP status with no recorded code (an injected status fault).
_HTTP_STATUS: Final[dict[str, int]] = {
    **dict.fromkeys(("INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"), 400),
    **dict.fromkeys(("UNKNOWN", "INTERNAL", "DATA_LOSS"), 500),
    **dict.fromkeys(("ABORTED", "ALREADY_EXISTS"), 409),
    "OK": 200,
    "CANCELLED": 499,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "UNAUTHENTICATED": 401,
}
_FROM_HTTP: Final = {status: code for code, status in reversed(_HTTP_STATUS.items())}

_RETRIEVAL_QDRANT: Final = frozenset(
    {
        *("Search", "SearchBatch", "SearchGroups", "Query", "QueryBatch", "QueryGroups", "Scroll"),
        *("Recommend", "RecommendBatch", "RecommendGroups", "Discover", "DiscoverBatch", "Get", "Count"),
        *("Facet", "SearchMatrixPairs", "SearchMatrixOffsets"),
    }
)
_VERTEX: Final[dict[str, Flavour]] = dict.fromkeys(("GenerateContent", "Predict"), "read")
# Well-known services: method -> flavour, where the name rule (below) does not tell it; any other method
# of theirs (Upsert, Delete, BatchObjects, StreamGenerateContent...) falls to the rule.
WELL_KNOWN: Final[dict[str, dict[str, Flavour]]] = {
    "qdrant.Points": dict.fromkeys(_RETRIEVAL_QDRANT, "retrieval"),
    "weaviate.v1.Weaviate": {**dict.fromkeys(("Search", "Aggregate"), "retrieval"), "TenantsGet": "read"},
    "milvus.proto.milvus.MilvusService": dict.fromkeys(("Search", "HybridSearch", "Query"), "retrieval"),
    "google.cloud.aiplatform.v1.PredictionService": _VERTEX,
    "google.cloud.aiplatform.v1beta1.PredictionService": _VERTEX,
}
# A method whose name starts with one of these words (then a capital or the end) reads; any other writes.
_READ_VERBS: Final = re.compile(
    r"(Get|List|Search|Query|Read|Count|Scroll|Fetch|Stream|Find|Lookup|Describe|Check|Watch|Recommend|"
    r"Discover|Retrieve|Exists|Has|Health|Info|Batch(Get|Read))(?![a-z])"
)


def authority(target: str) -> str:
    """``host:port`` of a channel target: ``dns:///h:p``, ``dns://server/h:p``, ``ipv4:h:p``, ``h:p``."""
    if target.startswith("dns:"):
        rest = target[4:]
        if rest.startswith("//"):
            rest = rest[2:].partition("/")[2]
        return rest or "localhost"
    if target.startswith(("ipv4:", "ipv6:")):
        return target[5:].partition(",")[0]
    if target.startswith(("unix:", "unix-abstract:", "vsock:")):
        return "localhost"
    return target


def call_url(target: str, method: str) -> str:
    """``grpc://127.0.0.1:50051/qdrant.Points/Search`` for the method path ``/qdrant.Points/Search``."""
    return f"{GRPC_SCHEME}{authority(target)}/{method.lstrip('/')}"


def flavour(path: str) -> Flavour:
    """What a call to the method at ``path`` (``/qdrant.Points/Search``) does: the well-known table, else
    the method-name rule."""
    service, _, method = path.strip("/").rpartition("/")
    return WELL_KNOWN.get(service, {}).get(method) or ("read" if _READ_VERBS.match(method) else "write")


def http_status(code: str) -> int:
    return _HTTP_STATUS.get(code, 500)


def _text(value: str | bytes) -> str:
    # Binary metadata (``-bin`` keys) arrives as bytes: kept as base64, as it travels on the wire.
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def metadata_headers(pairs: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    """Metadata as headers: lower-case keys, repeated keys joined with ", " (as HTTP joins them)."""
    return lower_headers([(key, _text(value)) for key, value in pairs or ()])


def metadata_pairs(pairs: Iterable[tuple[str, str | bytes]] | None) -> list[list[str]]:
    """Trailing metadata as stored: pairs in order, credentials redacted as headers are."""
    named = ((key.lower(), value) for key, value in pairs or ())
    return [[name, REDACTED if name in SECRET_HEADERS else _text(value)] for name, value in named]


def wire_metadata(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str | bytes], ...]:
    """Stored metadata pairs -> what a client reads (binary values decoded again)."""
    return tuple((key, _binary(value) if key.endswith("-bin") else value) for key, value in pairs)


def _binary(value: str) -> str | bytes:
    try:
        return base64.b64decode(value)
    except ValueError:
        return value


def message_entry(raw: bytes, view: object | None, *, keep_bytes: bool) -> Document:
    """One message as stored: its readable view when known, its bytes when ``keep_bytes`` or no view."""
    entry: Document = {}
    if keep_bytes or view is None:
        entry["base64"] = base64.b64encode(raw).decode("ascii")
    if view is not None:
        entry["json"] = view
    return entry


def _dumps(doc: Document) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


def response_body(
    code: str, details: str | None, entries: Sequence[Document], trailing: list[list[str]]
) -> bytes:
    return _dumps(
        {"code": code, "details": details or "", "messages": list(entries), "trailing_metadata": trailing}
    )


def request(
    target: str, method: str, metadata: Iterable[tuple[str, str | bytes]] | None, entries: Sequence[Document]
) -> HttpRequest:
    """The call as an exchange's request: its body the request messages (:func:`message_entry` each)."""
    body = _dumps({"messages": list(entries)})
    return HttpRequest("POST", call_url(target, method), metadata_headers(metadata), body)


# A plain class, not a dataclass: far cheaper to create at start-up.
class Outcome:
    """A served call: status, messages (bytes to deserialize) and metadata as a client reads them."""

    __slots__ = ("code", "details", "initial", "messages", "trailing")

    def __init__(
        self,
        code: str,
        details: str,
        messages: list[bytes] | None = None,
        initial: tuple[tuple[str, str | bytes], ...] = (),
        trailing: tuple[tuple[str, str | bytes], ...] = (),
    ) -> None:
        self.code, self.details, self.initial, self.trailing = code, details, initial, trailing
        self.messages = [] if messages is None else messages

    @property
    def ok(self) -> bool:
        return self.code == "OK"


def served_outcome(response: HttpResponse) -> Outcome:
    """The recorded call ``response`` stands for; a response not recorded from gRPC (an injected status
    fault) is its status's code with no messages."""
    body = response.json()
    initial = wire_metadata(response.headers.items())
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        code = "OK" if 200 <= response.status < 300 else _FROM_HTTP.get(response.status, "UNKNOWN")
        return Outcome(code, f"HTTP {response.status}", initial=initial)
    stored = [entry.get("base64") for entry in body.get("messages") or () if isinstance(entry, dict)]
    messages = [base64.b64decode(data) for data in stored if isinstance(data, str)]
    trailing = wire_metadata((str(k), str(v)) for k, v in body.get("trailing_metadata") or ())
    return Outcome(str(body["code"]), str(body.get("details") or ""), messages, initial, trailing)
