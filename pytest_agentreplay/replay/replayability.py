"""Whether a loaded cassette can be replayed: every payload resolved and shape-checked, every HTTP exchange
decoded and rendered the way replay serves it (``agentreplay verify`` reports what replay would trip on)."""

from __future__ import annotations

from ..cassette.read import LoadedCassette
from ..exceptions import CassetteError
from ..http.exchange import REQUEST_MEDIA_TYPE, RESPONSE_MEDIA_TYPE, HttpRequest, HttpResponse


def replay_problems(loaded: LoadedCassette) -> list[str]:
    """What replay would trip on: every payload resolved and shape-checked, every HTTP exchange decoded
    and rendered the way it is served. Messages are ``events[i].field: headline``."""
    problems: list[str] = []
    for index, name, ref in loaded.iter_refs():
        where = f"events[{index}].{name}"
        try:
            value = loaded.payload(ref)
        except CassetteError as exc:
            problems.append(f"{where}: {exc.headline}")
            continue
        try:
            if ref.media_type == RESPONSE_MEDIA_TYPE and value is not None:
                response = HttpResponse.from_payload(value)
                response.wire_tuple()
                for _ in response.iter_chunks():
                    pass
            elif ref.media_type == REQUEST_MEDIA_TYPE and value is not None:
                request = HttpRequest.from_payload(value)
                request.excerpt(80)
                _ = request.host
        except CassetteError as exc:
            problems.append(f"{where}: {exc.headline}")
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            problems.append(f"{where}: the recorded exchange cannot be served: {type(exc).__name__}: {exc}")
    return problems
