"""Values replay hands back keep their recorded key order; comparison stays order-insensitive; an update
with nothing changed writes nothing.

A cassette stores objects with sorted keys. A ``@tool`` result, a write tool's receipt and a
``record_value`` value are handed back to the agent in replay, and ``list(result)`` or
``json.dumps(result)`` (which an agent sends to its model) see their key order: recorded
``{"refund_id": ..., "amount": ...}`` must not come back as ``{"amount": ..., "refund_id": ...}``.
Inner pytest sessions (pytester) record an agent against the local tools service (tests/servers.py) and
replay it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from servers import LLMServer

from pytest_agentreplay.core.canonical import dumps_pretty

AGENT = """
import json, os, random

import httpx

from pytest_agentreplay import record_policy, record_value, tool

BIG = "x" * 3000  # over the inline limit: the result lives in the blob store


@tool(name="refund")
def refund(order):
    if os.environ.get("SORTED_RESULTS"):  # the same result, keys built in another order
        return {"amount": 5, "nested": {"a": [{"b": 2, "y": 1}], "z": 1}, "note/~": "n", "refund_id": "R-1"}
    return {"refund_id": "R-1", "amount": 5, "nested": {"z": 1, "a": [{"y": 1, "b": 2}]}, "note/~": "n"}


@tool(name="catalog")
def catalog():
    return {"zeta": BIG, "alpha": [{"z": 1, "a": 2}]}


@tool(name="create_ticket", effect="write", idempotency_key="key")
def create_ticket(subject, key):
    return {"ticket_id": "T-9", "status": "open", "created": True}


def run():
    record_policy("note", os.environ.get("NOTE", "v1"), version="1")
    refunded = refund("A1")
    big = catalog()
    ticket = create_ticket("late parcel", key="k-1")
    flag = record_value("flag", lambda: {"variant": "b", "bucket": 3, "meta": {"y": 1, "x": 2}})
    weather = httpx.get(os.environ["TOOLS_URL"] + "/tools/weather", params={"city": "Oslo"}).json()
    pick = random.choice(["a", "b", "c", "d"])
    # What the agent read, as text, goes out in a write: a key order or a draw replay changed is a drift.
    title = json.dumps({"refund": refunded, "catalog": big["alpha"], "flag": flag, "pick": pick})
    headers = {"Idempotency-Key": "k-2"}
    httpx.post(os.environ["TOOLS_URL"] + "/tools/tickets", json={"title": title}, headers=headers)
    return {
        "refund": [list(refunded), list(refunded["nested"]), list(refunded["nested"]["a"][0])],
        "refund_json": json.dumps(refunded),
        "catalog": [list(big), list(big["alpha"][0])],
        "ticket": list(ticket),
        "flag": [list(flag), list(flag["meta"])],
        "weather": list(weather),
        "pick": pick,
    }
"""

INNER = """
import json, os, random

import pytest

import agent_order


@pytest.fixture
def agentreplay_config():
    url = os.environ["TOOLS_URL"]
    return {"sandbox": {url: url}}  # sandbox mode runs the tools against the local service


@pytest.fixture
def reseeded():
    random.seed(int(os.environ.get("FIXTURE_SEED", "0")))


def test_agent(agent_replay, reseeded):
    out = agent_order.run()
    with open(os.environ["OUT"], "a") as fh:
        fh.write(json.dumps(out) + "\\n")
"""

RECORDED_ORDER = {
    "refund": [["refund_id", "amount", "nested", "note/~"], ["z", "a"], ["y", "b"]],
    "refund_json": json.dumps(
        {"refund_id": "R-1", "amount": 5, "nested": {"z": 1, "a": [{"y": 1, "b": 2}]}, "note/~": "n"}
    ),
    "catalog": [["zeta", "alpha"], ["z", "a"]],
    "ticket": ["ticket_id", "status", "created"],
    "flag": [["variant", "bucket", "meta"], ["y", "x"]],
    "weather": ["city", "temp_c", "sky"],
}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Any:
    pytester.makepyfile(agent_order=AGENT, test_agent=INNER)
    pytester.syspathinsert()
    monkeypatch.setenv("OUT", str(pytester.path / "out.jsonl"))
    with LLMServer() as server:
        monkeypatch.setenv("TOOLS_URL", server.url)
        yield pytester
    import sys

    sys.modules.pop("agent_order", None)


def _outputs(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (pytester.path / "out.jsonl").read_text().splitlines()]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("randomly", ["no:randomly", "randomly"])
def test_replay_hands_back_the_recorded_key_order(project: pytest.Pytester, randomly: str) -> None:
    project.runpytest("-p", randomly, "--agentreplay-record=all").assert_outcomes(passed=1)
    replayed = project.runpytest("-p", randomly, "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted*"])
    recorded, served = _outputs(project)
    for key, order in RECORDED_ORDER.items():
        assert recorded[key] == order, key
        assert served[key] == order, key
    assert served["pick"] == recorded["pick"]
    # On disk the objects keep their sorted keys (stable bytes), the order stands beside them.
    doc = json.loads((project.path / "cassettes" / "test_agent" / "test_agent.json").read_text())
    refund = next(e for e in doc["events"] if e["type"] == "tool.result" and e["tool"]["name"] == "refund")
    assert list(refund["output_ref"]["inline"]) == sorted(refund["output_ref"]["inline"])
    assert refund["output_ref"]["key_order"][""] == ["refund_id", "amount", "nested", "note/~"]


@pytest.mark.parametrize("randomly", ["no:randomly", "randomly"])
def test_an_update_with_nothing_changed_leaves_every_file_byte_identical(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, randomly: str
) -> None:
    project.runpytest("-p", randomly, "--agentreplay-record=all").assert_outcomes(passed=1)
    cassettes = project.path / "cassettes"
    before = _files(cassettes)
    # Another fixture seed and, under pytest-randomly, another session seed: nothing the agent reads changes.
    monkeypatch.setenv("FIXTURE_SEED", "99")
    updated = project.runpytest("-p", randomly, "--agentreplay-update")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 drifted, 0 failed, 0 updated*"])
    assert _files(cassettes) == before


def test_an_accepted_change_rewrites_only_its_own_event(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write that carries the tool results as text is sent again in replay: served in another key order,
    # it would be rewritten by the update of an unrelated change (compared as JSON, it shows no drift).
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=1)
    cassette = project.path / "cassettes" / "test_agent" / "test_agent.json"
    before = json.loads(cassette.read_text())
    monkeypatch.setenv("NOTE", "v2")
    updated = project.runpytest("-p", "no:randomly", "--agentreplay-update")
    updated.stdout.fnmatch_lines(["*1 updated*"])
    after = json.loads(cassette.read_text())
    changed = [i for i, (a, b) in enumerate(zip(before["events"], after["events"], strict=True)) if a != b]
    assert [after["events"][i]["type"] for i in changed] == ["policy.decision"]
    assert after["events"][changed[0]]["data"]["verdict"] == "v2"


def test_a_result_in_another_key_order_is_no_drift(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sandbox mode runs the tools: the live result has the same content with its keys built in another
    # order. Objects compare order-insensitively; the served order is not the comparison's business.
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=1)
    monkeypatch.setenv("SORTED_RESULTS", "1")
    sandbox = project.runpytest("-p", "no:randomly", "--agentreplay-mode=sandbox")
    sandbox.assert_outcomes(passed=1)
    sandbox.stdout.fnmatch_lines(["*0 drifted*"])
    regression = project.runpytest("-p", "no:randomly")
    regression.assert_outcomes(passed=1)
    _, live, served = _outputs(project)
    assert live["refund"][0] == ["amount", "nested", "note/~", "refund_id"]
    assert served["refund"][0] == ["refund_id", "amount", "nested", "note/~"]


# -- the key order itself ------------------------------------------------------------------------------


def test_key_order_round_trips_through_sorted_json() -> None:
    from pytest_agentreplay.core.canonical import in_key_order, key_order

    value = {"b": 1, "a": {"~c": {"n": 1, "m": 2}, "d/e": [{"y": 0, "x": 1}, 3]}, "": {"k": 1, "j": 2}}
    order = key_order(value)
    assert order == {
        "": ["b", "a", ""],
        "/a": ["~c", "d/e"],
        "/a/d~1e/0": ["y", "x"],
        "/a/~0c": ["n", "m"],
        "/": ["k", "j"],
    }
    stored = json.loads(dumps_pretty(value))
    back = in_key_order(stored, json.loads(json.dumps(order)))
    assert json.dumps(back) == json.dumps(value)
    assert key_order({"a": 1, "b": [{"c": 1}]}) is None


def test_an_edited_order_still_serves_the_value() -> None:
    from pytest_agentreplay.core.canonical import in_key_order

    stored = {"a": 1, "b": 2, "c": 3}
    # A key the value lacks is skipped, one the order lacks follows; a malformed entry is ignored.
    served = in_key_order(stored, {"": ["c", "gone", "a"], "/nope/0": ["x"], "bad": ["y"]})
    assert list(served) == ["c", "a", "b"] and served == stored
    assert list(stored) == ["a", "b", "c"]  # the loaded value itself is not changed
