"""Whether a call is made concurrently with other calls of its run: then its order among them is a scheduling
accident, and the comparison takes the calls made so as one order-insensitive group (``data.group``)."""

from __future__ import annotations

import asyncio
import threading

from .capture import RunContext

# The ``data.group`` value of calls made concurrently (``@tool`` calls carry the same one).
CONCURRENT = "concurrent"


def concurrent_group(ctx: RunContext) -> str | None:
    """:data:`CONCURRENT` for a call made from a thread other than the run's first, or from an asyncio task
    with sibling tasks alive (gather, TaskGroup); else None."""
    origin = ctx.origin_thread
    if origin is None:
        origin = ctx.origin_thread = threading.get_ident()
    if threading.get_ident() != origin:
        return CONCURRENT
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return None
    return CONCURRENT if len(asyncio.all_tasks()) > 1 else None
