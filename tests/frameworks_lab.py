"""Shared by tests/test_frameworks_*.py: an inner pytest project holding an agent built on a framework,
recorded against the local LLM double (tests/servers.py), then replayed with variants of the agent code."""

from __future__ import annotations

import contextlib
import importlib
import json
import pkgutil
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer, ModelReply

INNER_TEST = """
import agentkit

def test_support(agent_replay):
    agentkit.RAN.clear()
    answer = agentkit.run("Where is my order A1? It is late.")
    assert "shipped" in answer
"""


def preload(*modules: str) -> None:
    """Import the frameworks and the whole package in the outer process, before any inner session.

    pytester's in-process runs restore ``sys.modules`` afterwards: a module first imported inside an inner
    session would be imported again by the next one, and process-wide hooks (LangChain's configure hooks,
    the Agents SDK's processors, Pydantic AI's instrumentation default) would then hold stale copies.
    """
    import pytest_agentreplay

    # hypothesis' pytest plugin imports this in every session's terminal summary: ~1 s per inner session
    # when the outer process has not imported it.
    for name in (*modules, "hypothesis.internal.observability"):
        importlib.import_module(name)
    for info in pkgutil.walk_packages(pytest_agentreplay.__path__, "pytest_agentreplay."):
        with contextlib.suppress(ImportError):
            importlib.import_module(info.name)


@dataclass
class Lab:
    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    llm: LLMServer
    kit: Any

    @property
    def cassette(self) -> Path:
        return self.pytester.path / "cassettes" / "test_agent" / "test_support.json"

    def run(self, *args: str, variant: str = "") -> pytest.RunResult:
        self.monkeypatch.setenv("AGENT_VARIANT", variant)
        return self.pytester.runpytest("-p", "no:cacheprovider", *args)

    def record(self, endpoint: str, replies: list[ModelReply]) -> pytest.RunResult:
        self.llm.queue(endpoint, *replies)
        result = self.run("--agentreplay-record=all")
        result.assert_outcomes(passed=1)
        assert self.cassette.exists()
        return result

    def events(self) -> list[dict[str, Any]]:
        return list(json.loads(self.cassette.read_text())["events"])


def make_lab(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kit: str, **env: str
) -> Iterator[Lab]:
    pytester.makepyfile(agentkit=kit)
    pytester.makepyfile(test_agent=INNER_TEST)
    pytester.syspathinsert()
    llm = LLMServer().start()
    monkeypatch.setenv("LLM_URL", llm.url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        yield Lab(pytester, monkeypatch, llm, importlib.import_module("agentkit"))
    finally:
        llm.stop()
        sys.modules.pop("agentkit", None)


def tool_history(events: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(type, tool name, arguments or result) of every tool event, in order."""
    out: list[tuple[str, str, Any]] = []
    for event in events:
        if event["type"] == "tool.call":
            out.append(("call", event["tool"]["name"], event["data"]["arguments"]))
        elif event["type"] == "tool.result":
            ref = event.get("output_ref") or {}
            out.append(("result", event["tool"]["name"], event["data"].get("error") or ref.get("inline")))
    return out


HISTORY_TYPES = frozenset({"model.call", "tool.call", "tool.result", "state.update", "http", "effect"})


def history(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps of the run (without the run header/footer and bookkeeping such as runtime values)."""
    return [e for e in events if e["type"] in HISTORY_TYPES]


def assert_drift(result: pytest.RunResult, patterns: list[str], what: str) -> None:
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for pattern in patterns:
        assert re.search(pattern, out, re.IGNORECASE), f"{what}: /{pattern}/ not in output:\n{out}"
