"""Frameworks imported during a run (inside the agent function, or by a test importing its agent module in
its body) hook into that run: their tool calls are in the history, replay reproduces it, and a recording
made with the framework imported early replays with it imported late.

Inner sessions run in a subprocess: this process has the frameworks imported already (the other
tests/test_frameworks_*.py preload them), and an in-process inner session would not import them late.
Each inner test asserts that its framework is not imported when its body starts, so a variant that
stopped importing late would fail rather than prove nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
import threading
import types
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from frameworks_lab import history, tool_history
from servers import LLMServer, ModelReply

from pytest_agentreplay import frameworks
from pytest_agentreplay.core.patching import AfterImport, Owner, Patches

# The tool every agent below calls, a plain function (no framework needed to define it).
TOOL = '''
import os


def lookup_order(order_id: str) -> dict:
    """Status of an order."""
    return {"order_id": order_id, "status": "in transit" if os.environ.get("CHANGED") else "shipped"}
'''


@dataclass(frozen=True)
class Framework:
    name: str
    # Modules absent from sys.modules until the agent imports them (the inner test checks).
    markers: tuple[str, ...]
    imports: str
    body: str
    endpoint: str

    def kit(self, late: bool) -> str:
        """The agent module: the framework imported inside ``run`` (late) or at its top."""
        run = "def run(question):\n"
        if late:
            run += _indent(self.imports)
        else:
            run = self.imports + "\n\n" + run
        return TOOL + "\n\n" + run + _indent(self.body)


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in text.strip("\n").splitlines())


PYDANTIC_AI = Framework(
    name="pydantic_ai",
    markers=("pydantic_ai",),
    imports="""
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
""",
    body="""
provider = OpenAIProvider(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test")
model = OpenAIChatModel("gpt-4o-mini", provider=provider)
agent = Agent(model, system_prompt="You are a support agent.", name="support")
agent.tool_plain(lookup_order)
return agent.run_sync(question).output
""",
    endpoint="chat",
)

LANGGRAPH = Framework(
    name="langgraph",
    markers=("langchain_core", "langgraph"),
    imports="""
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
""",
    body="""
lookup = tool(lookup_order)
model = ChatOpenAI(
    model="gpt-4o-mini", base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0
).bind_tools([lookup])

def agent(state):
    return {"messages": [model.invoke(state["messages"])]}

graph = StateGraph(MessagesState)
graph.add_node("agent", agent)
graph.add_node("tools", ToolNode([lookup]))
graph.add_edge(START, "agent")
graph.add_conditional_edges("agent", tools_condition)
graph.add_edge("tools", "agent")
return graph.compile().invoke({"messages": [("user", question)]})["messages"][-1].content
""",
    endpoint="chat",
)

# No set_trace_processors([]) here: called after the import it would drop this package's processor too
# (the adapter's documented limit); the SDK's own trace export is refused without failing the test
# (tests/test_agents_trace_export.py).
OPENAI_AGENTS = Framework(
    name="openai_agents",
    markers=("agents",),
    imports="""
import openai
from agents import Agent, Runner, function_tool, set_default_openai_client
""",
    body="""
client = openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test", max_retries=0)
set_default_openai_client(client, use_for_tracing=False)
agent = Agent(
    name="orders", instructions="You answer order questions.", tools=[function_tool(lookup_order)],
    model="gpt-4o-mini",
)
return Runner.run_sync(agent, question).final_output
""",
    endpoint="responses",
)

FRAMEWORKS = {f.name: f for f in (PYDANTIC_AI, LANGGRAPH, OPENAI_AGENTS)}

INNER_TEST = """
import os
import sys

{top}

MARKERS = {markers!r}


def test_support(agent_replay):
    imported = [m for m in MARKERS if m in sys.modules]
    if os.environ.get("EARLY") == "1":
        assert imported == list(MARKERS), "conftest.py imports the framework before the run"
    else:
        assert imported == [], "the framework must not be imported before the test body"
    {body}
    assert "shipped" in {kit}.run("Where is my order A1?")
"""

# Imports the frameworks before any run, when EARLY=1: the set-up that always worked.
CONFTEST = """
import importlib
import os

if os.environ.get("EARLY") == "1":
    for name in {modules!r}:
        importlib.import_module(name)
"""

REPLIES = [
    ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "A1"})]),
    ModelReply(text="Order A1 has shipped."),
]


def _tools(events: list[dict[str, object]]) -> list[tuple[str, str, object]]:
    """The tool events, results reduced to their status (each framework words them its own way: text
    as the model saw it, or the returned object)."""
    out: list[tuple[str, str, object]] = []
    for kind, name, value in tool_history(events):
        if kind == "result":
            value = "shipped" if "shipped" in json.dumps(value) else value
        out.append((kind, name, value))
    return out


TOOLS = [("call", "lookup_order", {"order_id": "A1"}), ("result", "lookup_order", "shipped")]


def _early_modules(framework: Framework) -> list[str]:
    return [line.split()[1] for line in framework.imports.strip().splitlines()]


@dataclass
class LateLab:
    """An inner project with one test per installed framework (``test_<name>.py``), run in subprocesses.

    One session covers every framework (a session costs seconds): each framework is still imported for
    the first time by its own test, and each test checks it was not imported before."""

    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    llm: LLMServer
    frameworks: list[Framework]

    def cassette(self, framework: Framework) -> Path:
        return self.pytester.path / "cassettes" / f"test_{framework.name}" / "test_support.json"

    def run(self, *args: str, **env: str) -> pytest.RunResult:
        for key in ("EARLY", "CHANGED"):
            self.monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)
        return self.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def record(self, **env: str) -> dict[str, list[dict[str, object]]]:
        for framework in self.frameworks:
            self.llm.queue(framework.endpoint, *REPLIES)
        result = self.run("--agentreplay-record=all", **env)
        result.assert_outcomes(passed=len(self.frameworks))
        # A framework imported in the middle of an import statement hooks in whole (pydantic_ai's
        # adapter imports the OpenTelemetry SDK, whose own adapter waits for it).
        assert "could not hook in" not in result.stdout.str() + result.stderr.str()
        return {f.name: json.loads(self.cassette(f).read_text())["events"] for f in self.frameworks}


def _make_lab(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *, in_body: bool
) -> Iterator[LateLab]:
    """The agents import their framework inside ``run`` or, ``in_body``, the tests import the agent
    modules (which import it at their top) in the test body."""
    found = [f for f in FRAMEWORKS.values() if all(map(_installed, _early_modules(f)))]
    if not found:
        pytest.skip("no framework installed")
    modules: list[str] = []
    for framework in found:
        kit = f"kit_{framework.name}"
        top, body = ("", f"import {kit}") if in_body else (f"import {kit}", "")
        pytester.makepyfile(
            **{
                kit: framework.kit(late=not in_body),
                f"test_{framework.name}": INNER_TEST.format(
                    top=top, body=body, kit=kit, markers=framework.markers
                ),
            }
        )
        modules += _early_modules(framework)
    pytester.makeconftest(CONFTEST.format(modules=modules))
    for key in ("OPENAI_API_KEY", "OPENAI_AGENTS_DISABLE_TRACING"):
        monkeypatch.delenv(key, raising=False)
    llm = LLMServer().start()
    monkeypatch.setenv("LLM_URL", llm.url)
    try:
        yield LateLab(pytester, monkeypatch, llm, found)
    finally:
        llm.stop()


def _installed(name: str) -> bool:
    try:  # the top-level package: a dotted name would import its parents
        return importlib.util.find_spec(name.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _shape(events: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """A history without what differs between two recordings (ids, timestamps, response bodies)."""
    out: list[tuple[object, ...]] = []
    for event in history(events):
        tool = event.get("tool")
        data = event.get("data")
        name = tool.get("name") if isinstance(tool, dict) else None
        arguments = data.get("arguments") if isinstance(data, dict) else None
        out.append((event["type"], name, json.dumps(arguments, sort_keys=True)))
    return out


def test_imported_inside_the_agent_function(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for lab in _make_lab(pytester, monkeypatch, in_body=False):
        early = lab.record(EARLY="1")
        recorded_early = {f.name: lab.cassette(f).read_bytes() for f in lab.frameworks}
        late = lab.record()
        for name in late:
            # The framework's tool calls are in the history, as when it is imported before the run.
            assert _tools(late[name]) == TOOLS, name
            assert _shape(late[name]) == _shape(early[name]), name

        # Replay imports the frameworks late again: served with nothing listening, the same history.
        sent = len(lab.llm.log)
        lab.llm.stop()
        lab.run().assert_outcomes(passed=len(lab.frameworks))
        # The hooked tools are compared: a changed result is drift, naming the tool.
        changed = lab.run(CHANGED="1")
        changed.assert_outcomes(failed=len(lab.frameworks))
        out = changed.stdout.str()
        assert len(re.findall(r"tool\.result lookup_order\n.*in transit", out)) >= len(lab.frameworks), out

        # Recorded with the frameworks imported before the run, replayed with them imported during it.
        for framework in lab.frameworks:
            lab.cassette(framework).write_bytes(recorded_early[framework.name])
        lab.run().assert_outcomes(passed=len(lab.frameworks))
        assert len(lab.llm.log) == sent


def test_agent_module_imported_in_the_test_body(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for lab in _make_lab(pytester, monkeypatch, in_body=True):
        for name, events in lab.record().items():
            assert _tools(events) == TOOLS, name
        sent = len(lab.llm.log)
        lab.llm.stop()
        lab.run().assert_outcomes(passed=len(lab.frameworks))
        assert len(lab.llm.log) == sent


NO_FRAMEWORK_TEST = """
import sys

from pytest_agentreplay import tool

# (The OpenTelemetry SDK is no framework: langsmith's pytest plugin imports it in every session.)
HEAVY = ("pydantic_ai", "langchain_core", "langgraph", "agents") + tuple(
    "pytest_agentreplay.frameworks." + name for name in ("pydantic_ai", "langchain", "openai_agents")
)


@tool
def add(a: int, b: int) -> int:
    return a + b


def test_run(agent_replay):
    assert add(1, 2) == 3
    assert [m for m in HEAVY if m in sys.modules] == []


def test_after_the_run():
    assert [m for m in HEAVY if m in sys.modules] == []
    assert [f for f in sys.meta_path if type(f).__name__ == "AfterImport"] == []
"""


def test_a_project_without_frameworks_imports_none_of_them(pytester: pytest.Pytester) -> None:
    """The frameworks are installed here: waiting for them imports none, and the finder leaves with the
    run."""
    pytester.makepyfile(test_plain=NO_FRAMEWORK_TEST)
    args = ("-p", "no:cacheprovider", "-p", "no:randomly")
    pytester.runpytest_subprocess(*args, "--agentreplay-record=all").assert_outcomes(passed=2)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)


# -- the mechanism, with a stand-in framework and adapter -------------------------------------------------


@dataclass
class Stand:
    """A framework module on disk nobody has imported, and the adapter ``frameworks`` hooks in for it: each
    hook-in appends to ``hooked``, each unhook to ``unhooked``."""

    name: str
    adapter: types.ModuleType
    hooked: list[object]
    unhooked: list[object]

    def import_it(self) -> None:
        __import__(self.name)


@pytest.fixture
def stand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stand]:
    name = f"late_framework_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooked: list[object] = []
    unhooked: list[object] = []

    def install(patches: Patches) -> None:
        hooked.append(sys.modules[name])
        patches.add(lambda: unhooked.append(sys.modules.get(name)))

    adapter = types.ModuleType(f"{frameworks.__name__}.{name}")
    adapter.install = install  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, adapter.__name__, adapter)
    monkeypatch.setattr(frameworks, "ADAPTERS", ((name, name),))
    monkeypatch.setattr(frameworks, "OWNER", Owner(frameworks._library(name, name)))
    yield Stand(name, adapter, hooked, unhooked)
    sys.modules.pop(name, None)


def _waiting(name: str) -> bool:
    return any(isinstance(f, AfterImport) and name in f.callbacks for f in sys.meta_path)


def test_imported_during_the_run_hooks_in_and_the_finder_leaves_with_it(stand: Stand) -> None:
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    assert _waiting(stand.name) and stand.hooked == []  # waiting imports nothing
    stand.import_it()
    assert stand.hooked == [sys.modules[stand.name]]
    deactivate()
    deactivate()
    assert len(stand.unhooked) == 1 and not _waiting(stand.name)


def test_a_run_that_ended_first_hooks_nothing(stand: Stand) -> None:
    frameworks.activate(object())()  # type: ignore[arg-type]
    assert not _waiting(stand.name)
    stand.import_it()
    assert stand.hooked == []


def test_nested_runs_share_one_hook_until_the_last_ends(stand: Stand) -> None:
    end_outer = frameworks.activate(object())  # type: ignore[arg-type]
    frameworks.activate(object())()  # type: ignore[arg-type]  # a nested run over before the import
    end_inner = frameworks.activate(object())  # type: ignore[arg-type]
    stand.import_it()
    assert len(stand.hooked) == 1
    end_inner()
    assert stand.unhooked == []
    end_outer()
    assert len(stand.unhooked) == 1


def test_an_import_in_another_thread_hooks_the_run_in(stand: Stand) -> None:
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    worker = threading.Thread(target=stand.import_it)
    worker.start()
    worker.join()
    assert len(stand.hooked) == 1
    deactivate()
    assert len(stand.unhooked) == 1


def test_imported_before_the_run_hooks_in_at_once(stand: Stand) -> None:
    stand.import_it()
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    assert len(stand.hooked) == 1
    deactivate()
    assert len(stand.unhooked) == 1


def test_a_framework_imported_again_hooks_into_the_runs_after(stand: Stand) -> None:
    """pytester drops the modules an inner session imported: the next session imports them again."""
    end_first = frameworks.activate(object())  # type: ignore[arg-type]
    stand.import_it()
    first = sys.modules.pop(stand.name)
    stand.import_it()  # again within the run: hooked in anew
    end_first()
    del sys.modules[stand.name]
    end_second = frameworks.activate(object())  # type: ignore[arg-type]
    stand.import_it()
    end_second()
    assert stand.hooked[0] is first and len(stand.hooked) == 3 and len(set(map(id, stand.hooked))) == 3
    assert len(stand.unhooked) == 3


def test_an_adapter_failing_late_warns_and_the_import_goes_on(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(patches: Patches) -> None:
        raise RuntimeError("no tracer provider")

    monkeypatch.setattr(stand.adapter, "install", broken)
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    with pytest.warns(RuntimeWarning, match=f"the {stand.name} adapter could not hook in"):
        stand.import_it()
    assert stand.name in sys.modules
    deactivate()


def test_each_run_ends_in_the_adapters_that_keep_per_run_state(stand: Stand) -> None:
    ended: list[object] = []
    stand.adapter.end_run = ended.append  # type: ignore[attr-defined]
    ctx = object()
    stand.import_it()
    frameworks.activate(ctx)()  # type: ignore[arg-type]
    assert ended == [ctx]


def test_each_run_starts_in_the_adapters_even_while_an_earlier_run_holds_the_hooks(stand: Stand) -> None:
    started: list[object] = []
    stand.adapter.start_run = started.append  # type: ignore[attr-defined]
    outer, inner = object(), object()
    stand.import_it()
    end_outer = frameworks.activate(outer)  # type: ignore[arg-type]
    frameworks.activate(inner)()  # type: ignore[arg-type]
    end_outer()
    assert started == [outer, inner] and len(stand.hooked) == 1


def test_a_run_adds_the_agents_processor_again_after_the_project_dropped_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A project's ``set_trace_processors`` replaces the SDK's list while an earlier run still holds the
    hooks: the next run must not lose the agent's tool and hand-off events."""
    pytest.importorskip("agents.tracing")
    from agents import set_trace_processors

    from pytest_agentreplay.frameworks import openai_agents

    # Only this adapter: the others' end_run would read a real run.
    monkeypatch.setattr(frameworks, "ADAPTERS", (("agents.tracing", "openai_agents"),))
    monkeypatch.setattr(frameworks, "OWNER", Owner(frameworks._library("agents.tracing", "openai_agents")))

    end_outer = frameworks.activate(object())  # type: ignore[arg-type]
    try:
        assert openai_agents._registered()
        set_trace_processors([])
        assert not openai_agents._registered()
        frameworks.activate(object())()  # type: ignore[arg-type]
        assert openai_agents._registered()
    finally:
        end_outer()


ADAPTER_A = """
from pytest_agentreplay.frameworks import {b}  # as .pydantic_ai imports .otel

HOOKED = []


def install(patches):
    HOOKED.append(1)
"""

ADAPTER_B = """
import {framework}  # as .otel imports the OpenTelemetry SDK: its own trigger, while this module is half run

HOOKED = []


def install(patches):
    HOOKED.append(1)
"""


def test_an_adapter_importing_another_framework_hooks_both_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uid = uuid.uuid4().hex[:8]
    fw_a, fw_b, ad_a, ad_b = (f"late_{kind}_{uid}" for kind in ("fw_a", "fw_b", "adapter_a", "adapter_b"))
    for name in (fw_a, fw_b):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / f"{ad_a}.py").write_text(ADAPTER_A.format(b=ad_b))
    (adapters / f"{ad_b}.py").write_text(ADAPTER_B.format(framework=fw_b))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(frameworks, "__path__", [*frameworks.__path__, str(adapters)])
    monkeypatch.setattr(frameworks, "ADAPTERS", ((fw_a, ad_a), (fw_b, ad_b)))
    monkeypatch.setattr(
        frameworks, "OWNER", Owner(frameworks._library(fw_a, ad_a), frameworks._library(fw_b, ad_b))
    )
    deactivate = frameworks.activate(object())  # type: ignore[arg-type]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "the ... adapter could not hook in" would fail here
            importlib.import_module(fw_a)
        hooked = [sys.modules[f"{frameworks.__name__}.{name}"].HOOKED for name in (ad_a, ad_b)]
        assert hooked == [[1], [1]]
    finally:
        deactivate()
        for name in (fw_a, fw_b, f"{frameworks.__name__}.{ad_a}", f"{frameworks.__name__}.{ad_b}"):
            sys.modules.pop(name, None)
