"""A test that leaves freezegun's clock frozen fails at teardown, naming itself, and the freeze is undone.

pytester's in-process inner sessions share the outer process: a freeze an inner test never stopped (a
``freeze_time(...).start()`` without ``stop()``, or a ``start()`` that raised half-way through patching
the loaded modules) would leave ``time.monotonic`` frozen for every later test, and an asyncio loop reading
it would never see a timeout fire. Registered by the suite's conftest and loadable in an inner session
with ``-p clock_guard``.
"""

from __future__ import annotations

import copyreg
import datetime
import sys
from collections.abc import Iterator

import pytest

_FAKES = (
    ("real_date", "FakeDate"),
    ("real_datetime", "FakeDatetime"),
    ("real_gmtime", "fake_gmtime"),
    ("real_localtime", "fake_localtime"),
    ("real_monotonic", "fake_monotonic"),
    ("real_perf_counter", "fake_perf_counter"),
    ("real_strftime", "fake_strftime"),
    ("real_time", "fake_time"),
    ("real_time_ns", "fake_time_ns"),
    ("real_monotonic_ns", "fake_monotonic_ns"),
    ("real_perf_counter_ns", "fake_perf_counter_ns"),
)


def undo_leftover_freezes() -> int:
    """Undo every freezegun freeze still active; how many there were (0: nothing was changed)."""
    api = sys.modules.get("freezegun.api")
    if api is None or not getattr(api, "freeze_factories", None):
        return 0
    count = len(api.freeze_factories)
    for stack in (api.freeze_factories, api.ignore_lists, api.tick_flags, api.tz_offsets):
        stack.clear()
    reals = {
        id(getattr(api, fake)): getattr(api, real)
        for real, fake in _FAKES
        if hasattr(api, fake) and hasattr(api, real)
    }
    for module in list(sys.modules.values()):
        # The module's own namespace, not getattr: a lazy module's __getattr__ would import more modules.
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            real = reals.get(id(value))
            if real is not None:
                namespace[name] = real
    datetime.datetime = api.real_datetime  # type: ignore[misc]
    datetime.date = api.real_date  # type: ignore[misc]
    copyreg.dispatch_table.pop(api.real_datetime, None)
    copyreg.dispatch_table.pop(api.real_date, None)
    return count


@pytest.fixture(autouse=True)
def _no_frozen_clock_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    left = undo_leftover_freezes()
    if left:
        pytest.fail(
            f"{request.node.nodeid} left {left} freezegun freeze(s) active after its teardown; they were "
            "undone so that later tests' clocks advance. Stop every freeze the test starts (use freeze_time "
            "as a decorator or a with block)",
            pytrace=False,
        )
