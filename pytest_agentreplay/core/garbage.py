"""Freeing what a finished test left behind before the next test starts.

An agent's SDK clients (an ``openai.OpenAI``, its ``httpx`` client, TLS context and pool) sit in reference
cycles: a young-generation collection after each test frees them (~1 ms; flat memory, where a 100-test replay
piled up 14 MB). The session's own 100,000+ objects are frozen once collected (:func:`freeze_session_objects`)
so no collection walks them again (~10 M instructions a test), and never thawed (the exit collection would
walk them, ~140 M instructions, just before the process frees its memory anyway).
"""

from __future__ import annotations

import gc

__all__ = ["collect_test_garbage", "freeze_session_objects"]

# Generations 0 and 1: where a test's objects are when it ends (they survived its own collections, not a
# full one). A full collection would walk every long-lived object of the session again, test after test.
_YOUNG = 1


def collect_test_garbage() -> None:
    """Collect the cyclic garbage of the test that just ended, when the collector is enabled (a suite that
    disabled it chose to manage memory itself)."""
    if gc.isenabled():
        gc.collect(_YOUNG)


def freeze_session_objects() -> None:
    """Leave every object alive now out of the collections to come, the young garbage freed first rather
    than kept. Once per process: nothing is frozen again when something is frozen already (by the project,
    or by a session around this one: ``pytester``'s in-process runs)."""
    if gc.isenabled() and not gc.get_freeze_count():
        gc.collect(_YOUNG)
        gc.freeze()
