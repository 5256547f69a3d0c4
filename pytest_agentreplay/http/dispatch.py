"""The per-call decision shared by every interceptor: pass through, record live, or serve."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..capture import current_run
from .classify import Classification, classify_exchange, has_custom_classifiers
from .exchange import HttpRequest

if TYPE_CHECKING:
    from ..capture import RunContext

PASS = 0  # no active run: the call is none of our business
LIVE = 1  # send it and record it (record mode, or a live call the replay mode allows)
SERVE = 2  # answer from the cassette, never send


def active_run() -> RunContext | None:
    return current_run()


def _classify(ctx: RunContext, request: HttpRequest) -> Classification:
    """Built-in rules depend only on method, host and path: cache them per run (settings are per run).

    Registered classifiers may look at anything (headers, body), so nothing is cached while any exists.
    """
    if has_custom_classifiers():
        return classify_exchange(request, None, ctx.settings)
    cache: dict[tuple[str, str, str], Classification] | None = ctx.extensions.get("http.classify")
    if cache is None:
        cache = ctx.extensions.setdefault("http.classify", {})
    key = (request.method, request.host, request.path)
    cls = cache.get(key)
    if cls is None:
        cls = classify_exchange(request, None, ctx.settings)
        if len(cache) < 512:
            cache[key] = cls
    return cls


_goes_live: Callable[[RunContext, HttpRequest, Classification], bool] | None = None


def plan(ctx: RunContext, request: HttpRequest) -> tuple[int, Classification]:
    global _goes_live
    cls = _classify(ctx, request)
    if ctx.recording:
        return LIVE, cls
    if _goes_live is None:
        # Imported on first use (replay imports this package), then kept: a function-level import
        # statement costs more per call than the rest of this function.
        from ..replay.http import goes_live as imported

        _goes_live = imported
    return (LIVE if _goes_live(ctx, request, cls) else SERVE), cls
