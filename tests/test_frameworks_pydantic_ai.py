"""Pydantic AI agents (OpenAI and Anthropic models) without a decorated tool: recorded against the local
LLM double in an inner pytest session, replayed offline, and every drift named in the failure."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("opentelemetry.sdk")

from frameworks_lab import Lab, assert_drift, history, make_lab, preload, tool_history
from servers import ModelReply

preload("pydantic_ai", "pydantic_ai.models.openai", "pydantic_ai.models.anthropic", "openai", "anthropic")

KIT = r'''
import os
from typing import Annotated

from pydantic import AfterValidator
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from pytest_agentreplay.frameworks.pydantic_ai import ReplayTools

RAN = []  # tool bodies that ran (a served read does not run)


def variant():
    return set(filter(None, os.environ.get("AGENT_VARIANT", "").split(",")))


def normalize(order_id):
    return order_id.lower() if "changed_argument" in variant() else order_id.upper()


def build():
    v = variant()
    url = os.environ["LLM_URL"]
    if os.environ["PROVIDER"] == "openai":
        provider = OpenAIProvider(base_url=url + "/v1", api_key="sk-test")
        model = OpenAIChatModel("gpt-4o-mini", provider=provider)
    else:
        provider = AnthropicProvider(base_url=url, api_key="sk-ant-test")
        model = AnthropicModel("claude-sonnet-4-5", provider=provider)
    prompt = "You are a support agent."
    if "changed_prompt" in v:
        prompt = "You are a helpful and chatty support agent."
    capabilities = [ReplayTools(reads={"lookup_order"})] if os.environ.get("SERVE_READS") else []
    agent = Agent(model, system_prompt=prompt, name="support", capabilities=capabilities)

    def lookup_order(order_id: Annotated[str, AfterValidator(normalize)]) -> dict:
        RAN.append(("lookup_order", order_id))
        return {"order_id": order_id, "status": "shipped", "carrier": "DHL"}

    lookup_order.__doc__ = (
        "Find an order in the warehouse system." if "changed_description" in v else "Status of an order."
    )
    agent.tool_plain(retries=2)(lookup_order)

    @agent.tool_plain(retries=2)
    def open_ticket(order_id: str, reason: str) -> dict:
        """Open a support ticket for an order."""
        RAN.append(("open_ticket", reason))
        if reason == "late":
            raise ModelRetry("reason must be a sentence")
        return {"ticket": "T-1", "order_id": order_id}

    return agent


def run(question):
    return build().run_sync(question).output
'''

REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "a1"})]),
    ModelReply(text=None, tool_calls=[("open_ticket", {"order_id": "A1", "reason": "late"})]),
    ModelReply(text=None, tool_calls=[("open_ticket", {"order_id": "A1", "reason": "Parcel is late."})]),
    ModelReply(text="Order A1 has shipped with DHL; ticket T-1 is open."),
]
ENDPOINT = {"openai": "chat", "anthropic": "messages"}


@pytest.fixture(params=["openai", "anthropic"])
def lab(
    request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Lab]:
    provider = request.param
    yield from make_lab(pytester, monkeypatch, KIT, PROVIDER=provider, SERVE_READS="1")


def test_record_replay_offline_and_drifts(lab: Lab) -> None:
    provider = os.environ["PROVIDER"]
    lab.record(ENDPOINT[provider], REPLIES)
    events = lab.events()
    # Every tool execution with its arguments (as the tool ran with them) and its result, the retry too.
    assert tool_history(events) == [
        ("call", "lookup_order", {"order_id": "A1"}),
        ("result", "lookup_order", '{"order_id":"A1","status":"shipped","carrier":"DHL"}'),
        ("call", "open_ticket", {"order_id": "A1", "reason": "late"}),
        ("result", "open_ticket", "ModelRetry: reason must be a sentence"),
        ("call", "open_ticket", {"order_id": "A1", "reason": "Parcel is late."}),
        ("result", "open_ticket", '{"ticket":"T-1","order_id":"A1"}'),
    ]
    calls = [e for e in events if e["type"] == "tool.call"]
    assert [c["data"]["attempt"] for c in calls] == [1, 1, 1]
    assert all(c["data"]["agent"] == "support" for c in calls)
    types = [e["type"] for e in history(events)]
    # Causal order: each tool runs between the model call that chose it and the next one.
    assert types == ["model.call", "tool.call", "tool.result"] * 3 + ["model.call"]
    assert json.loads(lab.cassette.read_text())["run"]["labels"]["agent"] == "support"

    # Replay with nothing listening: 0 requests, the read served from the cassette, the rest re-run.
    sent = len(lab.llm.log)
    lab.llm.stop()
    lab.run().assert_outcomes(passed=1)
    assert len(lab.llm.log) == sent
    assert ("lookup_order", "A1") not in lab.kit.RAN

    drifts = {
        "changed_argument": [
            r"tool call lookup_order\(order_id='a1'\) has no recorded result",
            r"recorded: lookup_order\(order_id='A1'\)",
        ],
        "changed_prompt": [r"model\.call", r"You are a helpful and chatty support agent"],
        "changed_description": [r"model\.call", r"Find an order in the warehouse system"],
    }
    if provider == "anthropic":  # the same adapter: one drift is enough to show the wiring
        drifts = {"changed_prompt": drifts["changed_prompt"]}
    for variant, patterns in drifts.items():
        assert_drift(lab.run(variant=variant), patterns, f"{provider} {variant}")
    assert len(lab.llm.log) == sent


@pytest.fixture
def otel_lab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    yield from make_lab(pytester, monkeypatch, KIT, PROVIDER="openai", SERVE_READS="")


def test_instrumentation_alone_records_tools_and_fails_on_drift(otel_lab: Lab) -> None:
    """No capability on the agent: the automatic span processor records the tools (arguments as the
    model sent them); in replay the tool bodies run again and their events are compared."""
    otel_lab.record("chat", REPLIES)
    assert tool_history(otel_lab.events())[:2] == [
        ("call", "lookup_order", {"order_id": "a1"}),
        ("result", "lookup_order", '{"order_id":"A1","status":"shipped","carrier":"DHL"}'),
    ]
    sent = len(otel_lab.llm.log)
    otel_lab.run().assert_outcomes(passed=1)
    assert ("lookup_order", "A1") in otel_lab.kit.RAN
    result = otel_lab.run(variant="changed_argument")
    assert_drift(
        result, [r"tool\.result lookup_order\n\s+output_ref: .*A1.* -> .*a1"], "otel changed_argument"
    )
    assert len(otel_lab.llm.log) == sent
