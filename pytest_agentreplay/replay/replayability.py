"""Whether a loaded cassette can be replayed (``agentreplay verify``): every payload resolved and
shape-checked, every recorded response decoded into the bytes replay serves and checked against what the
recording says of it (a blob's recorded ``size``, a ``raw`` JSON body against its ``json``, a body stored
as it arrived against its ``content-length``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..cassette.read import LoadedCassette
from ..core.canonical import dumps_compact
from ..core.constants import HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE, REDACTED
from ..core.events import PayloadRef
from ..exceptions import CassetteError
from ..http.exchange import HttpRequest, HttpResponse


def replay_problems(loaded: LoadedCassette) -> list[str]:
    """What replay would trip on, as ``events[i].field: headline`` messages."""
    problems: list[str] = []
    for index, name, ref in loaded.iter_refs():
        where = f"events[{index}].{name}"
        try:
            value = loaded.payload(ref)
        except CassetteError as exc:
            problems.append(f"{where}: {exc.headline}")
            continue
        try:
            if ref.media_type == HTTP_RESPONSE_MEDIA_TYPE and value is not None:
                response = HttpResponse.from_payload(value)
                response.wire_tuple()
                served = b"".join(response.iter_chunks())
                problems.extend(f"{where}: {p}" for p in body_problems(value, served))
                problems.extend(f"{where}: {p}" for p in _size_problems(loaded, ref))
            elif ref.media_type == HTTP_REQUEST_MEDIA_TYPE and value is not None:
                request = HttpRequest.from_payload(value)
                request.excerpt(80)
                _ = request.host
        except CassetteError as exc:
            problems.append(f"{where}: {exc.headline}")
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            problems.append(f"{where}: the recorded exchange cannot be served: {type(exc).__name__}: {exc}")
    return problems


_CONTENT_KINDS = ("json", "text", "base64", "sse", "raw")


def body_problems(payload: Mapping[str, object], served: bytes) -> list[str]:
    """What is wrong with a response payload's body, given the bytes replay serves for it."""
    body = payload.get("body")
    if not isinstance(body, dict):
        return []
    out: list[str] = []
    holds = any(body.get(kind) not in (None, "", [], {}) for kind in _CONTENT_KINDS)
    if holds and not served:
        kinds = ", ".join(kind for kind in _CONTENT_KINDS if kind in body)
        out.append(f"the recorded body ({kinds}) is served as 0 bytes: replay cannot decode its stored form")
    raw = body.get("raw")
    if isinstance(raw, str) and "json" in body:
        try:
            same = json.loads(raw) == body["json"]
        except (ValueError, RecursionError):
            same = False
        if not same:
            out.append(
                "the body's raw text (what replay serves) and its json (what the diff compares) differ: one "
                "was edited without the other"
            )
    headers = payload.get("headers")
    length = headers.get("content-length") if isinstance(headers, dict) else None
    # A stream is stored per event, a decoded body without its length, a redacted one shorter or longer.
    as_sent = "sse" not in body and not body.get("coding") and REDACTED.encode() not in served
    announced = int(length) if isinstance(length, str) and length.strip().isdigit() else None
    if as_sent and announced is not None and announced != len(served):
        out.append(f"the recorded body serves {len(served)} bytes, its recorded content-length: {announced}")
    return out


def _size_problems(loaded: LoadedCassette, ref: PayloadRef) -> list[str]:
    """A blob-stored payload whose expanded size is not the ``size`` its reference records."""
    if ref.sha256 is None or ref.size is None:
        return []
    try:
        stored = loaded.blob_store.load(ref.sha256)
    except CassetteError:
        return []  # reported by the payload's own read
    size = len(dumps_compact(stored).encode("utf-8"))
    if size == ref.size:
        return []
    return [f"payload blob {ref.sha256} holds {size} bytes, its reference records size {ref.size}"]
