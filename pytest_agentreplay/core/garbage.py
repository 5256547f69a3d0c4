"""Freeing what a finished test left behind before the next test starts.

An agent's test builds its SDK clients (an ``openai.OpenAI`` and its ``httpx`` client, TLS context and
connection pool included) and drops them at its end. Those objects sit in reference cycles (a client and
its resources point at each other), so only the cyclic garbage collector frees them, and it walks the
young generations on its own schedule only: in a suite of agent tests their garbage piled up, test after
test, until a full collection ran (peak memory of a 100-test suite-shape replay 14 MB above its start).
A collection of the young generations right after each test frees them while they are still young: about
a millisecond per test, and flat memory however long the suite.

The session's own objects (pytest's, the collected tests', every imported module's: over 100,000
containers) live until the session ends, yet every full collection walks them all again, test after test.
Frozen once the tests are collected (:func:`freeze_session_objects`), the collector leaves them out: a
replayed test then costs ~10 M instructions less, about the collector's whole share of it. They stay
frozen to the process's end: they are what the session holds till then, and a thaw would only have the
collection at exit walk them all (~140 M instructions) just before the process frees its memory anyway.
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
