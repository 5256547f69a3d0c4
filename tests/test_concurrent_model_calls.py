"""Model calls made from threads are served by their request, not by the order they arrive in.

Four threads ask the model four different prompts. Recording, they start in one order; replaying, in the
reverse order (forced with events, not left to the scheduler). Each thread must get the answer recorded for
its own prompt, the replay shows no drift, and an update leaves the cassette as it was: an update never
pairs one call's request with another call's response. A call no recorded call equals is still served by
its position, so its drift is reported against the call recorded there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from json_server import JsonHandler, JsonServer

pytest.importorskip("openai")


class EchoModel(JsonHandler):
    """An OpenAI-shaped chat endpoint answering ``echo: <last user message>``; GET /read/<n> answers ``n``."""

    calls = 0  # per class: each test makes its own subclass (see ``project``)

    def do_GET(self) -> None:
        type(self).calls += 1
        self.send_json({"read": self.path.rsplit("/", 1)[-1]})

    def do_POST(self) -> None:
        n = type(self).calls = type(self).calls + 1
        req = json.loads(self.body())
        prompt = req["messages"][-1]["content"]
        self.send_json(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1700000000 + n,
                "model": req.get("model", "gpt-test"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"echo: {prompt}", "refusal": None},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            }
        )


INNER = """
import json, os, threading

import httpx
import openai
import pytest

N = 4


def started_in(order, work):
    # Thread order[k] starts its call only after thread order[k-1] got its answer: the order is forced.
    gates = {n: threading.Event() for n in order}
    results, errors = {}, []

    def run(n):
        try:
            assert gates[n].wait(20), f"thread {n} was never let go"
            results[n] = work(n)
        except BaseException as exc:  # reported by the test body, not lost in the thread
            errors.append(exc)
        finally:
            later = order.index(n) + 1
            if later < len(order):
                gates[order[later]].set()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(N)]
    for t in threads:
        t.start()
    gates[order[0]].set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


def order():
    return list(reversed(range(N))) if os.environ.get("REVERSED") else list(range(N))


def prompt(n):
    return os.environ.get("PROMPT_" + str(n), "p" + str(n))


def test_model_calls_from_threads(agent_replay):
    client = openai.OpenAI(base_url=os.environ["MODEL_URL"] + "/v1", api_key="sk-test", max_retries=0)

    def ask(n):
        # VOLATILE: a field the comparison ignores (``created``), new on every run, in every request.
        extra = {"created": os.urandom(4).hex()} if os.environ.get("VOLATILE") else None
        r = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt(n)}], extra_body=extra
        )
        return r.choices[0].message.content

    answers = started_in(order(), ask)
    with open(os.environ["OUT"], "a") as fh:
        fh.write(json.dumps({str(k): v for k, v in sorted(answers.items())}) + "\\n")
    # Each thread got the answer recorded for its own prompt (a changed prompt: the call in its place).
    assert answers == {n: "echo: p" + str(n) for n in range(N)}


def test_reads_from_threads(agent_replay):
    def read(n):
        return httpx.get(os.environ["MODEL_URL"] + "/read/" + str(n)).json()

    answers = started_in(order(), read)
    assert answers == {n: {"read": str(n)} for n in range(N)}
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    pytester.makepyfile(test_threads=INNER)
    monkeypatch.setenv("OUT", str(pytester.path / "out.jsonl"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with JsonServer(type("Echo", (EchoModel,), {})) as server:
        monkeypatch.setenv("MODEL_URL", server.url)
        yield pytester


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _answers(pytester: pytest.Pytester) -> list[dict[str, str]]:
    lines = (pytester.path / "out.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("volatile", ["", "1"], ids=["same bodies", "a volatile field in each body"])
def test_threads_in_another_order_get_their_own_answers(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, volatile: str
) -> None:
    monkeypatch.setenv("VOLATILE", volatile)
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    cassettes = project.path / "cassettes"
    before = _files(cassettes)
    monkeypatch.setenv("REVERSED", "1")
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["*2 replayed, 0 recorded, 0 drifted*"])
    assert _answers(project)[-1] == {str(n): f"echo: p{n}" for n in range(4)}
    updated = project.runpytest("-p", "no:randomly", "--agentreplay-update")
    updated.assert_outcomes(passed=2)
    updated.stdout.fnmatch_lines(["*0 drifted, 0 failed, 0 updated*"])
    assert _files(cassettes) == before


def test_a_changed_prompt_drifts_against_its_own_position(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No recorded call equals the changed one: it is served the call recorded in its position (the one
    # its thread made while recording) and the drift names its prompt.
    project.runpytest("-p", "no:randomly", "--agentreplay-record=all").assert_outcomes(passed=2)
    monkeypatch.setenv("PROMPT_2", "p2 changed")
    replayed = project.runpytest("-p", "no:randomly", "-k", "model_calls")
    replayed.assert_outcomes(failed=1)
    out = replayed.stdout.str()
    # One change, on the call its thread made: the other threads' calls are their own recorded calls.
    assert "1 regression, 0 expected differences" in out
    assert 'input_ref.body.json.messages[0].content: "p2" -> "p2 changed"' in out


# -- the queues, without HTTP -------------------------------------------------------------------------


def _calls(*digests: str | None) -> tuple[Any, list[Any]]:
    from types import SimpleNamespace

    from pytest_agentreplay.replay.model_calls import ModelCalls
    from pytest_agentreplay.replay.recorded import RecordedExchange

    calls = ModelCalls()
    recs = []
    for n, digest in enumerate(digests):
        event = SimpleNamespace(data={"request_hash": digest, "n": n}, input_ref=n)
        rec = RecordedExchange(event, "model", "POST", "", "", None, None)  # type: ignore[arg-type]
        calls.add("openai:chat.completions", rec)
        recs.append(rec)
    calls.built()
    return calls, recs


def test_equal_requests_are_served_in_order_and_the_rest_by_position() -> None:
    calls, recs = _calls("a", "b", "a", "c")
    endpoint = "openai:chat.completions"
    assert calls.take_exact(endpoint, "a") is recs[0]
    assert calls.take_exact(endpoint, "c") is recs[3]
    # No recorded request equals this one: the first call not yet played, in recorded order.
    assert calls.take_exact(endpoint, "x") is None
    assert calls.take_in_order(endpoint) is recs[1]
    # "b" was served by position: its queue passes it over, and the second "a" is still there.
    assert calls.take_exact(endpoint, "b") is None
    assert calls.take_exact(endpoint, "a") is recs[2]
    assert calls.take_in_order(endpoint) is None
    assert calls.total(endpoint) == 4


def test_bodies_equal_but_for_what_the_comparison_ignores_match() -> None:
    from pytest_agentreplay.replay.model_calls import ignored_names, normalised_key

    names = ignored_names("regression")
    assert {"created", "latency_ms"} <= names
    stored = {
        0: {
            "json": {"messages": [{"content": "p0"}], "metadata": {"created": 1}},
            "content_type": "application/json",
        },
        1: {
            "json": {"messages": [{"content": "p1"}], "metadata": {"created": 2}},
            "content_type": "application/json",
        },
    }
    calls, recs = _calls(None, None)
    live = {
        "json": {"messages": [{"content": "p1"}], "metadata": {"created": 99}},
        "content_type": "application/json",
    }
    found = calls.take_normalised(
        "openai:chat.completions", normalised_key(live, names), names, lambda rec: stored[rec.event.input_ref]
    )
    assert found is recs[1]
    # The key leaves the body itself as it was.
    assert live["json"]["metadata"] == {"created": 99}
