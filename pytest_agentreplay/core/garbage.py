"""Freeing what a finished test left behind: its SDK clients and responses sit in reference cycles (the
package's code leaves none), which a young-generation collection after each test frees; counted, that
freeing saves the collector's automatic passes as much, and without it a 100-test replay peaked 13 MB
higher. The session's objects are frozen once, never thawed, so no collection (nor the exit one) walks
them again."""

from __future__ import annotations

import gc

# Generations 0 and 1: where a test's objects are when it ends (they survived its own collections, not a
# full one). A full collection would walk every long-lived object of the session again, test after test.
_YOUNG = 1


def collect_test_garbage() -> None:
    """Collect the ended test's cyclic garbage, unless the suite disabled the collector (its own choice)."""
    if gc.isenabled():
        gc.collect(_YOUNG)


def freeze_session_objects() -> None:
    """Leave every object alive now out of the collections to come, the young garbage freed first; not when
    something is frozen already (by the project, or a session around this one: ``pytester``)."""
    if gc.isenabled() and not gc.get_freeze_count():
        gc.collect(_YOUNG)
        gc.freeze()
