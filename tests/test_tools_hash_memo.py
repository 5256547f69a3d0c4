"""A model call's tools are hashed from the run's digest memo (the texts its body's objects were hashed with):
the same ``tools_hash`` as hashing the tools afresh, whatever the tools hold."""

from __future__ import annotations

import copy
import json
import random
from typing import Any, cast

import pytest

from pytest_agentreplay.core.canonical import DigestMemo, hash_value, items_hash, request_digest
from pytest_agentreplay.http.providers import BUILTIN, request_fields_of
from pytest_agentreplay.http.providers import openai as openai_provider


def tool(name: str, description: str = "Look an item up.", **properties: Any) -> dict[str, Any]:
    params = {"type": "object", "properties": properties or {"item": {"type": "integer"}}}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS = [tool("lookup_item"), tool("estimate_delivery", "Days left.")]
ODD_TOOLS: list[list[Any]] = [
    TOOLS,
    # Same names, other definitions.
    [tool("lookup_item", "Another description."), tool("estimate_delivery", "Days left.", days={"max": 5})],
    # Keys in another order (the hash is of the sorted text).
    [{"function": t["function"], "type": t["type"]} for t in TOOLS],
    # Numbers equal across types are not the same JSON.
    [{"name": "a", "n": 1}, {"name": "a", "n": 1.0}, {"name": "a", "n": True}],
    [{"name": "é\u2028\x7f", "x": None, "nested": [[], {}, [{"k": -0.0}]]}],
    # Not only objects: strings, numbers and lists are hashed as they are.
    ["lookup_item", 3, [tool("x")], {"name": "y"}],
    [{}],
]


@pytest.mark.parametrize("tools", ODD_TOOLS)
def test_items_hash_is_hash_value(tools: list[Any]) -> None:
    memo = DigestMemo()
    assert items_hash(tools, memo) == hash_value(tools)
    assert items_hash(tools, memo) == hash_value(tools)  # from the memo this time
    # The objects' texts the body's digest wrote are the ones reused.
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    memo = DigestMemo()
    assert request_digest(body, memo) == hash_value(body)
    assert items_hash(tools, memo) == hash_value(tools)


def test_items_hash_on_random_lists() -> None:
    rng = random.Random(41)

    def value(depth: int) -> Any:
        kind = rng.randrange(7 if depth < 3 else 4)
        if kind == 0:
            return rng.choice([0, 1, -3, 2**70, 1.5, -0.0, 1e300])
        if kind == 1:
            return rng.choice(["", "a", "é", "\x00", "\ud800x", '"\\'])
        if kind == 2:
            return rng.choice([None, True, False])
        if kind == 3:
            return rng.choice(["name", "type"])
        if kind == 4:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        keys = rng.sample(["name", "type", "b", "a", "é"], rng.randrange(4))
        return {k: value(depth + 1) for k in keys}

    def outcome(hasher: Any, *args: Any) -> Any:
        try:
            return hasher(*args)
        except UnicodeEncodeError:  # a lone surrogate: neither hashes it
            return UnicodeEncodeError

    memo = DigestMemo()
    for _ in range(300):
        tools = [value(3) if rng.random() < 0.2 else value(1) for _ in range(rng.randrange(1, 4))]
        expected = outcome(hash_value, tools)
        assert outcome(items_hash, tools, memo) == expected
        assert outcome(items_hash, tools, memo) == expected
        assert outcome(items_hash, copy.deepcopy(tools), memo) == expected


def bodies(stream: bool) -> list[dict[str, Any]]:
    """The requests of a conversation: the tools resent as the same objects (as parsing shares them), then
    tools of other content under the same names, then the first tools again as new objects."""
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    out = []
    for tools in (TOOLS, TOOLS, ODD_TOOLS[1], ODD_TOOLS[2], json.loads(json.dumps(TOOLS))):
        body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": list(messages), "tools": tools}
        if stream:
            body["stream"] = True
        out.append(body)
        messages.append({"role": "assistant", "content": f"turn {len(messages)}"})
    return out


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("provider", BUILTIN, ids=lambda p: p.NAME)
def test_memoised_request_fields_equal_the_public_ones(provider: Any, stream: bool) -> None:
    endpoints = {"bedrock": ["converse", "invoke:anthropic"], "gemini": ["generateContent"]}
    memo = DigestMemo()
    for endpoint in endpoints.get(provider.NAME, ["chat.completions"]):
        for body in bodies(stream):
            request_digest(body, memo)
            expected = provider.request_fields(endpoint, copy.deepcopy(body))
            assert request_fields_of(provider, endpoint, body, memo) == expected
            assert request_fields_of(provider, endpoint, body, None) == expected


def test_a_provider_of_its_own_is_asked_as_the_interface_says() -> None:
    class Own:
        NAME = "openai"  # replaces the built-in one: its request_fields takes two arguments

        def request_fields(self, endpoint: str, body: object) -> dict[str, Any]:
            return {"seen": (endpoint, body)}

    assert request_fields_of(cast(Any, Own()), "chat", {"tools": TOOLS}, DigestMemo()) == {
        "seen": ("chat", {"tools": TOOLS})
    }
    fields = request_fields_of(openai_provider, "chat.completions", {"tools": TOOLS}, DigestMemo())
    assert fields["tools_hash"] == hash_value(TOOLS)
