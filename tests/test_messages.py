"""Messages that lead somewhere, through real inner pytest sessions against the local LLM double:

- every report (Markdown, JSON, HTML, JUnit) carries a failure's whole message, escaped and readable;
- one system-prompt change the model calls resend is one regression, named, with a rule for that one
  message (which then passes the test and still catches a changed tool result);
- the network guard says which case it is (a replaying test, or one only --agentreplay-block-network
  guards), and each fix it prints works when followed;
- a cassette missing under pytest's rootdir but present under the project root is named, with fixes that
  make the test replay it.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from servers import LLMServer, ModelReply

from pytest_agentreplay.report import validate_report

AGENT = """
import json
import os

import httpx

SYSTEM = {system!r}
NOTE = {note!r}


def run(question):
    messages = [{{"role": "system", "content": SYSTEM}}, {{"role": "user", "content": question}}]
    url = os.environ["LLM_URL"]
    for _ in range(3):
        body = {{"model": "gpt-4o-mini", "messages": messages}}
        reply = httpx.post(url + "/v1/chat/completions", json=body)
        message = reply.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return message["content"]
        messages.append({{"role": "assistant", "content": None, "tool_calls": calls}})
        for call in calls:
            city = json.loads(call["function"]["arguments"])["city"]
            weather = httpx.get(url + "/tools/weather", params={{"city": city}}).json()
            text = f"{{city}}: {{weather['temp_c']}} C, {{weather['sky']}}" + (NOTE if city == "Oslo" else "")
            messages.append({{"role": "tool", "tool_call_id": call["id"], "content": text}})
    raise RuntimeError("no answer")
"""

TEST = """
import agentchat

def test_support(agent_replay):
    assert agentchat.run("Weather in Oslo and Bergen?")
"""

PROMPT = "You are a weather agent. Be brief."
REWORDED = "You are a <marquee>friendly</marquee> weather agent & brief."
RULE = '"model.call:input_ref.body.json.messages[0].content" = "expected"'


def script(llm: LLMServer) -> None:
    """Three model calls, each resending the conversation (and so the system prompt) so far."""
    llm.queue(
        "chat",
        ModelReply(text=None, tool_calls=[("weather", {"city": "Oslo"})]),
        ModelReply(text=None, tool_calls=[("weather", {"city": "Bergen"})]),
        ModelReply(text="Oslo and Bergen: 21 C, clear."),
    )


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    with LLMServer() as server:
        monkeypatch.setenv("LLM_URL", server.url)
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        yield server


def expect_lines(result: pytest.RunResult, patterns: list[str]) -> None:
    """Each pattern matches a whole output line, in this order; ``*`` is the only wildcard (a message's
    ``[...]`` is literal, unlike in ``fnmatch_lines``). A traceback's ``E       `` prefix is dropped."""
    lines = [re.sub(r"^E {7}", "", line) for line in result.outlines]
    at = 0
    for pattern in patterns:
        regex = re.compile(".*".join(re.escape(part) for part in pattern.split("*")))
        while at < len(lines) and not regex.fullmatch(lines[at]):
            at += 1
        assert at < len(lines), f"no line matches {pattern!r} (in order) in:\n" + "\n".join(lines)
        at += 1


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # Without pytest-randomly: its reseeding would show up as a runtime.values difference.
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


@pytest.fixture
def chat(pytester: pytest.Pytester, llm: LLMServer) -> pytest.Pytester:
    """The conversation recorded once with the original prompt; the agent then rewords it."""
    pytester.makepyfile(agentchat=AGENT.format(system=PROMPT, note=""), test_agent=TEST)
    pytester.syspathinsert()
    script(llm)
    run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    pytester.makepyfile(agentchat=AGENT.format(system=REWORDED, note=""))
    return pytester


# -- 3: one prompt change, one regression, a rule for that one message --------------------------------


def test_a_resent_prompt_change_is_one_named_regression_with_a_narrow_rule(
    chat: pytest.Pytester, llm: LLMServer
) -> None:
    sent = len(llm.log)
    result = run(chat)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    expect_lines(
        result,
        [
            "test_agent.py::test_support: 1 regression, 0 expected differences (cassette *, mode regression)",
            "",
            "seq 1 -> 1  model.call gpt-4o-mini (openai chat.completions)",
            "  system prompt changed; carried by 3 model calls (seq 1, 3, 5)",
            '  input_ref.body.json.messages[0].content: "You are a weather agent. Be brief." -> '
            '"You are a <marquee>friendly</marquee> weather agent & brief."  [regression, default rule *:**]',
            "",
            "How to fix:",
            "  1. If the new behaviour is intended, accept it (rewrites the cassette from this run):",
            "       pytest --agentreplay-update test_agent.py::test_support",
            "  2. If these differences should not fail, mark them expected in pyproject.toml:",
            "       [tool.agentreplay.rules]",
            f"       {RULE}  # system prompt",
            "     (or pass rules= to @pytest.mark.agentreplay for this test only)",
        ],
    )
    assert "messages[*]" not in out
    expect_lines(result, ["*drifted: test_agent.py::test_support -> * (1 regression(s), 0 expected)"])
    assert len(llm.log) == sent, "the replay reached the live service"

    # The suggested rule, as printed, passes the test and reports the change as one expected difference.
    chat.makepyprojecttoml(f"[tool.agentreplay.rules]\n{RULE}\n")
    accepted = run(chat)
    accepted.assert_outcomes(passed=1)
    expect_lines(accepted, ["*replayed with expected drift: *(0 regression(s), 1 expected)"])

    # ... and hides nothing else: a changed tool result still fails, once for the two calls resending it.
    chat.makepyfile(agentchat=AGENT.format(system=REWORDED, note=" (coast)"))
    tool_change = run(chat)
    tool_change.assert_outcomes(failed=1)
    expect_lines(
        tool_change,
        [
            "test_agent.py::test_support: 1 regression, 1 expected difference (cassette *, mode regression)",
            "*system prompt changed; carried by 3 model calls (seq 1, 3, 5)",
            '  input_ref.body.json.messages[0].content: "You are a weather agent. Be brief." -> '
            '"You are a <marquee>friendly</marquee> weather agent & brief."  '
            "[expected, project rule model.call:input_ref.body.json.messages[0].content]",
            "seq 3 -> 3  model.call gpt-4o-mini (openai chat.completions)",
            "  tool result (messages[3]) changed; carried by 2 model calls (seq 3, 5)",
            '  input_ref.body.json.messages[3].content: "Oslo: 21 C, clear" -> "Oslo: 21 C, clear (coast)"'
            "  [regression, default rule *:**]",
            '       "model.call:input_ref.body.json.messages[3].content" = "expected"'
            "  # tool result (messages[3])",
        ],
    )


# -- 1: the whole message in every report --------------------------------------------------------------


class _Pre(HTMLParser):
    """The text of each ``<pre class="message">`` of a page, and every element opened."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.messages: list[str] = []
        self.tags: list[str] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "pre" and ("class", "message") in attrs:
            self._open = True
            self.messages.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            self.messages[-1] += data


def test_every_report_carries_the_whole_message(chat: pytest.Pytester) -> None:
    (chat.path / "out").mkdir()  # a report's folder must exist: none is created for it
    result = run(chat, "--agentreplay-report=out/report.json", "--junitxml=out/junit.xml")
    result.assert_outcomes(failed=1)
    doc = json.loads((chat.path / "out" / "report.json").read_text(encoding="utf-8"))
    assert validate_report(doc) == []
    (test,) = doc["tests"]
    message = test["message"]
    # The message the terminal showed, all of it: headline, evidence, location and fixes.
    assert message.startswith("test_agent.py::test_support: 1 regression, 0 expected differences")
    assert "  system prompt changed; carried by 3 model calls (seq 1, 3, 5)" in message
    assert "How to fix:" in message
    assert message.endswith("(or pass rules= to @pytest.mark.agentreplay for this test only)")
    assert message in result.stdout.str()
    # One change, counted once wherever it is counted.
    assert test["regressions"] == 1 and doc["summary"]["regressions"] == 1
    (change,) = [d for d in test["drift"]["differences"] if d["verdict"] == "regression"]
    assert change["subject"] == "system prompt"
    assert [c["seq_recorded"] for c in change["carried_by"]] == [1, 3, 5]

    junit = ET.parse(chat.path / "out" / "junit.xml")
    (case,) = junit.iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["agentreplay.status"] == "drifted"
    assert props["agentreplay.regressions"] == "1"
    assert props["agentreplay.message"] == message

    run(chat, "--agentreplay-report=out/report.html").assert_outcomes(failed=1)
    page = (chat.path / "out" / "report.html").read_text(encoding="utf-8")
    parsed = _Pre()
    parsed.feed(page)
    assert parsed.messages == [message]
    # The reworded prompt's markup stays text: escaped in the page, never an element.
    assert "marquee" not in parsed.tags
    assert "&lt;marquee&gt;friendly&lt;/marquee&gt; weather agent &amp; brief." in page
    # Each call carrying the change is marked in the run viewer's timeline.
    assert re.findall(r'<li id="t0-ev-(\d+)" class="entry[^"]* drifted"', page) == ["1", "3", "5"]

    run(chat, "--agentreplay-report=out/report.md").assert_outcomes(failed=1)
    text = (chat.path / "out" / "report.md").read_text(encoding="utf-8")
    block = text.split("\n<pre>\n", 1)[1].split("\n</pre>\n", 1)[0]
    assert "<marquee>" not in block and html.unescape(block) == message
    assert "system prompt changed; carried by 3 model calls (seq 1, 3, 5)" in text
    assert "| 1 | 0 |" in text  # the regressions column agrees with the one row shown


# -- 2: the guard says which case it is --------------------------------------------------------------


PLAIN = """
import os
import httpx

def test_plain():
    reply = httpx.get(os.environ["LLM_URL"] + "/tools/weather", params={"city": "Oslo"})
    assert reply.json()["city"] == "Oslo"
"""


def _fix(out: str, number: int) -> str:
    found = re.search(rf"^  {number}\. (.*)$", out, re.MULTILINE)
    assert found is not None, out
    return found.group(1)


def _command(fix: str) -> list[str]:
    """The arguments of the ``pytest ...`` command a fix ends with."""
    words = shlex.split(fix[fix.rindex("pytest ") :])
    assert words[0] == "pytest"
    return words[1:]


def test_a_test_guarded_only_by_block_network_is_told_so_and_each_fix_works(
    pytester: pytest.Pytester, llm: LLMServer
) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    result = run(pytester, "--agentreplay-block-network")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    port = llm.port
    expect_lines(
        result,
        [
            "pytest_agentreplay.exceptions.NetworkBlockedError: "
            f"network access blocked by --agentreplay-block-network: 127.0.0.1:{port}",
            "  this test does not replay (no @pytest.mark.agentreplay, no agent_replay fixture): "
            "--agentreplay-block-network refuses every connection it makes to a host not allowed",
            "at: test test_plain.py::test_plain",
            "How to fix:",
            "  1. to record its calls once and replay them from then on, make the test "
            "(test_plain.py::test_plain) a replaying test: add @pytest.mark.agentreplay or request the "
            "agent_replay fixture, then record it: "
            "pytest --agentreplay-record=missing test_plain.py::test_plain",
            "  2. if it is a local test service, let it through: --agentreplay-allow-hosts=127.0.0.1, "
            'or allow_hosts = ["127.0.0.1"] in [tool.agentreplay] ("loopback" admits every loopback name)',
            "  3. if the test must reach the network, run it without --agentreplay-block-network*",
        ],
    )
    assert "during replay" not in out and "mode: regression" not in out and "re-record" not in out
    assert llm.log == []

    # Fix 2, as printed.
    run(pytester, "--agentreplay-block-network", "--agentreplay-allow-hosts=127.0.0.1").assert_outcomes(
        passed=1
    )
    assert len(llm.log) == 1
    # Fix 1: the marker, then the printed command records it (the flag still on) ...
    pytester.makepyfile(
        test_plain="import pytest\n" + PLAIN.replace("def test_", "@pytest.mark.agentreplay\ndef test_")
    )
    command = _command(_fix(out.replace("E       ", ""), 1))
    run(pytester, *command, "--agentreplay-block-network").assert_outcomes(passed=1)
    assert len(llm.log) == 2
    # ... and from then on it replays under the flag without reaching the service.
    run(pytester, "--agentreplay-block-network").assert_outcomes(passed=1)
    assert len(llm.log) == 2


RAW = """
import os
import urllib.request
import pytest

@pytest.mark.agentreplay
def test_raw():
    url = os.environ["LLM_URL"] + "/tools/weather?city=Oslo"
    assert b"Oslo" in urllib.request.urlopen(url).read()
"""


def test_a_replaying_test_whose_call_goes_around_the_cassette_gets_fixes_that_work(
    pytester: pytest.Pytester, llm: LLMServer
) -> None:
    pytester.makepyfile(test_raw=RAW)
    run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    port = llm.port
    expect_lines(
        result,
        [
            f"network access blocked during replay: 127.0.0.1:{port}",
            "  replay is fail-closed: only the cassette answers, and it records and serves only calls made "
            "through an intercepted client (httpx, httpx2, requests/urllib3, aiohttp) "
            "or inside a @tool function",
            "  this call reached a socket (urllib.request, http.client, a raw socket or another client): "
            "re-recording it as it is would not record it",
            "cassette: *test_raw*test_raw.json",
            "mode: regression",
            "How to fix:",
            "  1. if it is a local test service, let it through: "
            '@pytest.mark.agentreplay(allow_hosts=["127.0.0.1"]), '
            '--agentreplay-allow-hosts=127.0.0.1, or allow_hosts = ["127.0.0.1"] in [tool.agentreplay]*',
            "  2. to have the cassette serve it, make the call through an intercepted client (httpx, httpx2, "
            "requests/urllib3, aiohttp) or inside a @tool function, then re-record the run against the real "
            "services: pytest --agentreplay-record=all test_raw.py::test_raw",
        ],
    )
    rerecord = _command(_fix(out, 2))
    # What the evidence says: re-recording the call as it is does not make it replayable.
    run(pytester, *rerecord).assert_outcomes(passed=1)
    run(pytester).assert_outcomes(failed=1)
    # Fix 1, as printed.
    run(pytester, "--agentreplay-allow-hosts=127.0.0.1").assert_outcomes(passed=1)
    # Fix 2: through httpx, then the printed command; the replay then sends nothing.
    pytester.makepyfile(
        test_raw=RAW.replace("import urllib.request", "import httpx").replace(
            "urllib.request.urlopen(url).read()", "httpx.get(url).content"
        )
    )
    run(pytester, *rerecord).assert_outcomes(passed=1)
    sent = len(llm.log)
    run(pytester, "--agentreplay-block-network").assert_outcomes(passed=1)
    assert len(llm.log) == sent


CHILD = """
import os
import subprocess
import sys

def test_child():
    code = "import os, urllib.request; urllib.request.urlopen(os.environ['LLM_URL'] + '/tools/weather')"
    subprocess.run([sys.executable, "-c", code], check=False, capture_output=True)
"""


def test_a_child_refused_under_block_network_is_not_told_to_record(
    pytester: pytest.Pytester, llm: LLMServer
) -> None:
    pytester.makepyfile(test_child=CHILD)
    result = run(pytester, "--agentreplay-block-network")
    result.assert_outcomes(failed=1)
    expect_lines(
        result,
        [
            "a child process (pid *) was refused network access by --agentreplay-block-network: "
            f"127.0.0.1:{llm.port}",
            "*this test does not replay*",
            "at: test test_child.py::test_child",
            "  1. if it is a local test service, let it through: --agentreplay-allow-hosts=127.0.0.1*",
            "  2. if the child must reach the network, run the test without --agentreplay-block-network",
        ],
    )
    assert "--agentreplay-record" not in result.stdout.str()
    assert llm.log == []
    run(pytester, "--agentreplay-block-network", "--agentreplay-allow-hosts=127.0.0.1").assert_outcomes(
        passed=1
    )
    assert len(llm.log) == 1


# -- 4: a cassette under the project root, pytest started below it -----------------------------------


WEATHER = """
import os
import httpx
import pytest

@pytest.mark.agentreplay
def test_weather():
    reply = httpx.get(os.environ["LLM_URL"] + "/tools/weather", params={"city": "Oslo"})
    assert reply.json()["sky"] == "clear"
"""


def test_a_cassette_under_the_project_root_is_named_with_fixes_that_find_it(
    pytester: pytest.Pytester, llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path / "proj"
    tests = root / "tests"
    tests.mkdir(parents=True)
    (root / ".git").mkdir()  # a project root with no ini file: pytest's rootdir is where it starts
    (tests / "test_agent.py").write_text(WEATHER, encoding="utf-8")
    monkeypatch.chdir(root)
    run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    recorded = root / "cassettes" / "tests" / "test_agent" / "test_weather.json"
    assert recorded.is_file()
    sent = len(llm.log)

    monkeypatch.chdir(tests)
    result = run(pytester, "--agentreplay-report=report.json")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    expect_lines(
        result,
        [
            f"no cassette for test_agent.py::test_weather under the rootdir {tests}, "
            f"but the test has one under {root}",
            f"  looked for: {tests}/cassettes/test_agent/test_weather.json",
            f"  found:      {recorded} (recorded for tests/test_agent.py::test_weather)",
            f"  cassette paths start at pytest's rootdir: here {tests}, there {root} *",
            "How to fix:",
            f'  1. create {root}/pytest.ini holding the line "[pytest]": pytest then takes {root} as its '
            "rootdir wherever it starts, and finds the cassettes",
            "  2. or name the rootdir on the command line: "
            f"pytest --rootdir={root} test_agent.py::test_weather",
            f"  3. only if this test's cassettes belong under {tests} (a second cassette tree beside the one "
            f"under {root}): record it here: pytest --agentreplay-record=missing test_agent.py::test_weather",
            "*failed (cassette-elsewhere: the test's cassette is under a directory above pytest's rootdir)*",
        ],
    )
    assert "--agentreplay-record" not in out.split("next:")[-1] if "next:" in out else True
    doc = json.loads((tests / "report.json").read_text(encoding="utf-8"))
    assert doc["tests"][0]["cause"] == "cassette-elsewhere"
    assert not any("--agentreplay-record" in step for step in doc["next_steps"])
    assert not (tests / "cassettes").exists()

    # Recording what is missing from here finds the cassette is not missing: no second tree, no call.
    again = run(pytester, "--agentreplay-record=missing")
    again.assert_outcomes(failed=1)
    expect_lines(
        again,
        [
            f"no cassette for test_agent.py::test_weather under the rootdir {tests}, "
            f"but the test has one under {root}",
            f"  3. only if this test's cassettes belong under {tests} (a second cassette tree beside the one "
            f"under {root}): record it here: pytest --agentreplay-record=all test_agent.py::test_weather",
        ],
    )
    assert not (tests / "cassettes").exists()
    assert len(llm.log) == sent

    # Fix 2, as printed, replays the cassette under the root.
    run(pytester, *_command(_fix(out, 2))).assert_outcomes(passed=1)
    # Fix 1: with the ini file, plain `pytest` below the root finds it too.
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    run(pytester).assert_outcomes(passed=1)
    assert len(llm.log) == sent
    assert not (tests / "cassettes").exists()


def test_the_walk_for_a_cassette_elsewhere_stops_at_the_project_root(tmp_path: Path) -> None:
    """Bounded: the search ends at the first directory holding a project marker, so a cassette of a
    parent project (or of the same name anywhere above) is never offered."""
    from pytest_agentreplay.core.paths import cassette_elsewhere

    outer, inner = tmp_path / "outer", tmp_path / "outer" / "proj"
    tests = inner / "tests"
    tests.mkdir(parents=True)
    (inner / "setup.cfg").write_text("", encoding="utf-8")
    doc = {"run": {"test": "proj/tests/test_a.py::test_x"}}
    above = outer / "cassettes" / "proj" / "tests" / "test_a" / "test_x.json"
    above.parent.mkdir(parents=True)
    above.write_text(json.dumps(doc), encoding="utf-8")
    looked = tests / "cassettes" / "test_a" / "test_x.json"
    assert cassette_elsewhere(tests, tests / "cassettes", looked, "test_a.py::test_x") is None
    (inner / "setup.cfg").unlink()
    assert cassette_elsewhere(tests, tests / "cassettes", looked, "test_a.py::test_x") == (outer, above)
    # Another test's cassette at that place is not this test's.
    assert cassette_elsewhere(tests, tests / "cassettes", looked, "test_a.py::test_y") is None


def _error_classes() -> list[type[BaseException]]:
    from pytest_agentreplay import exceptions

    root = exceptions.AgentReplayError
    found = [c for c in vars(exceptions).values() if isinstance(c, type) and issubclass(c, root)]
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize("error_class", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_shows_the_location_it_carries_also_one_attached_on_the_way_up(
    error_class: type[BaseException], tmp_path: Path
) -> None:
    """Messages are rendered when shown: a location given when the error is made, or attached later by a
    layer that knows it (``exc.mode = mode``), is in the text every report shows."""
    import inspect

    from pytest_agentreplay.exceptions import AgentReplayError

    params = inspect.signature(error_class.__init__).parameters
    if "tool" in params:  # RecordedToolError: the agent's own tool failure, not the plugin's message
        pytest.skip("a recorded tool's error is re-raised as the tool raised it")
    extra: dict[str, object] = {"found": tmp_path, "root": tmp_path} if "found" in params else {}
    error = error_class("something went wrong", cassette=tmp_path / "c.json", place="a place", **extra)
    assert isinstance(error, AgentReplayError)
    assert error.mode is None and "mode:" not in str(error)
    error.mode = "sandbox"  # attached on the way up
    text = str(error)
    assert text.startswith("something went wrong")
    for line in (f"cassette: {tmp_path / 'c.json'}", "at: a place", "mode: sandbox"):
        assert line in text, (error_class.__name__, text)


def test_a_replaying_test_s_error_names_its_cassette_and_mode_wherever_it_was_raised(
    pytester: pytest.Pytester,
) -> None:
    """An error raised below the run without a location (here a damaged cassette found by the reader) names
    the test's cassette and mode: the run attaches them at its one boundary."""
    pytester.makepyfile(
        test_one="""
        import pytest

        @pytest.mark.agentreplay(mode="sandbox")
        def test_one():
            pass
        """
    )
    folder = pytester.path / "cassettes" / "test_one"
    folder.mkdir(parents=True)
    (folder / "test_one.json").write_text("{not json", encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "mode: sandbox" in out and "test_one.json" in out, out
