"""Parallel tool calls (threads, asyncio tasks) replay in any order; sequential reordering is still drift."""

from __future__ import annotations

import pytest

PARALLEL = """
import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor

from pytest_agentreplay import record_state, tool

ORDER = {order!r}

@tool(name="fetch")
def fetch(n):
    time.sleep(random.random() / 100)
    return {{"n": n}}

@tool(name="afetch")
async def afetch(n):
    await asyncio.sleep(random.random() / 100)
    return {{"n": n}}

def test_threads(agent_replay):
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(fetch, range(6)))
    record_state({{"done": True}})

def test_tasks(agent_replay):
    async def main():
        await asyncio.gather(*(afetch(n) for n in range(6)))
    asyncio.run(main())

def test_sequential(agent_replay):
    for n in ORDER:
        fetch(n)
"""


def test_parallel_calls_replay_in_any_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_par=PARALLEL.format(order=[1, 2, 3]))
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=3)
    for _ in range(4):
        pytester.runpytest().assert_outcomes(passed=3)


def test_sequential_reordering_is_a_regression(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_par=PARALLEL.format(order=[1, 2, 3]))
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=3)
    pytester.makepyfile(test_par=PARALLEL.format(order=[2, 1, 3]))
    result = pytester.runpytest("-k", "sequential")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*data.arguments.n: 1 -> 2*"])
