"""A finished run is freed by reference counting alone: a session of many replayed tests does not leave
their histories and cassettes to the cyclic collector, whose passes would walk them all."""

from __future__ import annotations

import gc
import time
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentreplay import capture_run
from pytest_agentreplay.diff.rules.syntax import parse_rules


@pytest.fixture
def no_cyclic_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_cyclic_collector")
def test_a_captured_run_that_read_runtime_values_is_freed_when_let_go(tmp_path: Path) -> None:
    with capture_run(tmp_path / "run.json", intercept_http=False) as ctx:
        time.time()
        uuid.uuid4()
        ref = weakref.ref(ctx)
        events = weakref.ref(ctx.recorder)
    assert any(e.type == "runtime.values" for e in ctx.recorder.events)
    del ctx
    assert ref() is None and events() is None


@pytest.mark.usefixtures("no_cyclic_collector")
def test_parsing_rules_leaves_no_cyclic_garbage() -> None:
    # Nested layers: the walk recurses (a closure calling itself would be a cycle per call).
    spec = [[{"$.model": "ignore"}], {"selector": "$.usage", "verdict": "ignore"}, None]
    rules = parse_rules(spec, source="project")
    assert [(r.source, r.index) for r in rules] == [("project", 0), ("project", 1)]
    assert parse_rules(rules, source="project") == rules
    # Only the package's objects count: the collector is off for the whole process, so a thread another
    # test left running may leave cycles of its own meanwhile.
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        kept = [o for o in gc.garbage if _ours(o)]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    assert kept == []


def _ours(o: object) -> bool:
    """An object of the package's types, or a function or method of its code (a closure in a cycle)."""
    code = getattr(getattr(o, "__func__", o), "__code__", None)
    module = type(o).__module__ if code is None else code.co_filename
    return "pytest_agentreplay" in module


def test_a_replayed_test_leaves_no_cyclic_garbage(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import gc

        import pytest

        counts = []


        def ours(o):
            # An object of the package's types, or a function or method of its code (a closure in a cycle).
            code = getattr(getattr(o, "__func__", o), "__code__", None)
            module = type(o).__module__ if code is None else code.co_filename
            return "pytest_agentreplay" in module


        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logfinish(nodeid, location):
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            kept = [o for o in gc.garbage if ours(o)]
            counts.append(len(kept))
            gc.garbage.clear()
            gc.set_debug(0)


        def pytest_terminal_summary(terminalreporter):
            terminalreporter.write_line(f"RUN GARBAGE {counts}")
        """
    )
    pytester.makepyfile(
        """
        import time
        import uuid

        import pytest

        from pytest_agentreplay import tool


        @tool(name="lookup")
        def lookup(order: str) -> dict:
            return {"order": order, "at": time.time()}


        @pytest.mark.agentreplay
        def test_agent(agent_replay):
            uuid.uuid4()
            assert lookup("A-1")["order"] == "A-1"
        """
    )
    recorded = pytester.runpytest_subprocess("--agentreplay-record=all", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=1)
    replayed = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["RUN GARBAGE [[]0[]]"])
