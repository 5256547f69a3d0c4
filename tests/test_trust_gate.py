"""The gate users trust: activation by marker, one truthful status per test in every view, cassette
identity, unused cassettes under xdist, the classify hook, threads, and commands that work as printed."""

from __future__ import annotations

import json
import os
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_agentreplay"
XDIST = [[], ["-n", "2"]]


class _Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self) -> None:
        type(self).hits.append(f"{self.command} {self.path}")
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"id": "1", "path": self.path}).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A 127.0.0.1 service counting every request it receives; its URL is in ``$GATE_BASE``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Counter.hits = []
    monkeypatch.setenv("GATE_BASE", f"http://127.0.0.1:{httpd.server_address[1]}")
    yield _Counter.hits
    httpd.shutdown()
    httpd.server_close()


MARKED = """
import os
import httpx
import pytest

pytestmark = pytest.mark.agentreplay

def test_module_marked():
    r = httpx.get(os.environ["GATE_BASE"] + "/m")
    assert r.json()["path"] == "/m"

@pytest.mark.agentreplay(allow_hosts=[])
class TestClassMarked:
    def test_in_class(self):
        assert httpx.post(os.environ["GATE_BASE"] + "/c", json={"a": 1}).status_code == 201
"""


@pytest.mark.parametrize("xdist", XDIST, ids=["plain", "xdist"])
def test_marker_alone_records_and_replays(
    pytester: pytest.Pytester, server: list[str], xdist: list[str]
) -> None:
    pytester.makepyfile(test_marked=MARKED)
    pytester.runpytest("--agentreplay-record=all", *xdist).assert_outcomes(passed=2)
    assert sorted(server) == ["GET /m", "POST /c"]
    cassettes = sorted(p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.json"))
    assert cassettes == [
        "cassettes/test_marked/TestClassMarked.test_in_class.json",
        "cassettes/test_marked/test_module_marked.json",
    ]
    result = pytester.runpytest(*xdist)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 replayed, 0 recorded, 0 drifted, 0 failed*"])
    assert len(server) == 2, "replay must not reach the service"


SAME_NAMES = """
import os
import httpx
import pytest

@pytest.mark.agentreplay
class TestA:
    def test_x(self):
        assert httpx.get(os.environ["GATE_BASE"] + "/a").json()["path"] == "/a"

@pytest.mark.agentreplay
class TestB:
    def test_x(self):
        assert httpx.get(os.environ["GATE_BASE"] + "/b").json()["path"] == "/b"
"""


@pytest.mark.parametrize("xdist", XDIST, ids=["plain", "xdist"])
def test_same_method_names_in_two_classes_replay_their_own_runs(
    pytester: pytest.Pytester, server: list[str], xdist: list[str]
) -> None:
    pytester.makepyfile(test_same=SAME_NAMES)
    pytester.runpytest("--agentreplay-record=all", *xdist).assert_outcomes(passed=2)
    result = pytester.runpytest(*xdist)
    result.assert_outcomes(passed=2)
    assert len(server) == 2
    a = json.loads((pytester.path / "cassettes/test_same/TestA.test_x.json").read_text())
    assert a["run"]["test"] == "test_same.py::TestA::test_x"


COPIED = """
import os
import httpx
import pytest

@pytest.mark.agentreplay
def test_first():
    httpx.get(os.environ["GATE_BASE"] + "/same")

@pytest.mark.agentreplay
def test_second():
    httpx.get(os.environ["GATE_BASE"] + "/same")
"""


def test_a_copied_cassette_fails_naming_both_tests_and_is_not_adopted(
    pytester: pytest.Pytester, server: list[str]
) -> None:
    pytester.makepyfile(test_copy=COPIED)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    folder = pytester.path / "cassettes" / "test_copy"
    (folder / "test_second.json").write_bytes((folder / "test_first.json").read_bytes())
    for args in ([], ["--agentreplay-update"]):
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(
            [
                "*the cassette of test_copy.py::test_second was recorded for another test: "
                "test_copy.py::test_first*",
                "*failed (wrong-test*",
            ]
        )
    still = json.loads((folder / "test_second.json").read_text())
    assert still["run"]["test"] == "test_copy.py::test_first", "--agentreplay-update adopted the copy"


FAILURES = """
import os
import socket
import httpx
import pytest
from pytest_agentreplay import tool

PHASE = os.environ.get("PHASE", "record")

@tool(name="lookup")
def lookup(order_id):
    return {"order_id": order_id}

@pytest.mark.agentreplay
def test_unmatched():
    httpx.get(os.environ["GATE_BASE"] + ("/one" if PHASE == "record" else "/other"))

@pytest.mark.agentreplay
def test_tool_without_result():
    lookup("a" if PHASE == "record" else "b")

@pytest.mark.agentreplay
def test_network_blocked_and_swallowed():
    if PHASE != "record":
        try:
            socket.create_connection(("192.0.2.1", 9), timeout=0.5)
        except Exception:
            pass  # the agent swallows it: the test must still fail

@pytest.mark.agentreplay
def test_missing_cassette():
    pass

@pytest.mark.agentreplay
def test_corrupted_cassette():
    pass

@pytest.mark.agentreplay
def test_drift():
    httpx.post(os.environ["GATE_BASE"] + "/notes", json={"text": "v1" if PHASE == "record" else "v2"})

@pytest.mark.agentreplay
def test_assertion():
    assert PHASE == "record", "the agent's answer changed"

@pytest.mark.agentreplay
def test_fine():
    httpx.get(os.environ["GATE_BASE"] + "/fine")
"""

EXPECTED = {
    "test_unmatched": ("failed", "unmatched-call"),
    "test_tool_without_result": ("failed", "tool-without-result"),
    "test_network_blocked_and_swallowed": ("failed", "network-blocked"),
    "test_missing_cassette": ("failed", "missing-cassette"),
    "test_corrupted_cassette": ("failed", "corrupted-cassette"),
    "test_drift": ("drifted", None),
    "test_assertion": ("failed", "test"),
    "test_fine": ("replayed", None),
}


@pytest.mark.parametrize("xdist", XDIST, ids=["plain", "xdist"])
def test_every_failure_cause_is_failed_in_every_view(
    pytester: pytest.Pytester, server: list[str], monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    pytester.makepyfile(test_causes=FAILURES)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=8)
    recorded = len(server)
    folder = pytester.path / "cassettes" / "test_causes"
    (folder / "test_missing_cassette.json").unlink()
    (folder / "test_corrupted_cassette.json").write_text('{"format": "pytest-agentreplay", "version": ')
    monkeypatch.setenv("PHASE", "replay")
    args = [
        *xdist,
        "--agentreplay-report=r.md",
        "--junitxml=junit.xml",
        "-p",
        "no:cacheprovider",
    ]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=7)
    pytester.runpytest(*xdist, "--agentreplay-report=r.json").assert_outcomes(passed=1, failed=7)
    pytester.runpytest(*xdist, "--agentreplay-report=r.html").assert_outcomes(passed=1, failed=7)

    # Terminal
    text = result.stdout.str()
    assert "1 replayed, 0 recorded, 1 drifted, 6 failed" in text
    for name, (status, cause) in EXPECTED.items():
        if status == "failed":
            assert re.search(rf"failed \({cause}: [^)]*\): test_causes.py::{name} ", text), (name, text)
    # JSON
    doc = json.loads((pytester.path / "r.json").read_text())
    got = {t["nodeid"].split("::")[1]: (t["status"], t["cause"]) for t in doc["tests"]}
    assert got == EXPECTED
    assert doc["summary"]["failed"] == 6 and doc["summary"]["drifted"] == 1
    # Markdown: red headline, each failure in the table with its cause.
    md = (pytester.path / "r.md").read_text()
    assert md.splitlines()[2].startswith("❌")
    for name, (status, cause) in EXPECTED.items():
        if status == "failed":
            assert f"failed ({cause})" in md and name in md, name
        assert not re.search(rf"✅[^\n]*{name}", md), name
    # HTML
    html = (pytester.path / "r.html").read_text()
    for name, (status, cause) in EXPECTED.items():
        label = f"failed ({cause})" if cause else status
        assert re.search(rf"<td>{re.escape(label)}</td><td class=mono>[^\n]*{name}", html), name
    # JUnit
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    for name, (status, cause) in EXPECTED.items():
        props = {p.get("name"): p.get("value") for p in cases[name].iter("property")}
        assert props["agentreplay.status"] == status, name
        assert props.get("agentreplay.cause") == cause, name
        assert (cases[name].find("failure") is not None) == (status != "replayed"), name
    assert len(server) == recorded == 3, "replay reached the service"


def test_skipped_and_failing_recording_have_their_status(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_s="""
import pytest

@pytest.mark.agentreplay
@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

@pytest.mark.agentreplay
def test_fails_while_recording():
    assert False
"""
    )
    result = pytester.runpytest("--agentreplay-record=all", "--agentreplay-report=r.json")
    result.assert_outcomes(skipped=1, failed=1)
    doc = json.loads((pytester.path / "r.json").read_text())
    got = {t["nodeid"].split("::")[1]: (t["status"], t["cause"]) for t in doc["tests"]}
    assert got == {"test_skipped": ("skipped", None), "test_fails_while_recording": ("failed", "not-saved")}
    assert not (pytester.path / "cassettes" / "test_s" / "test_fails_while_recording.json").exists()


PLACED = """
import os
from pathlib import Path
import httpx
import pytest

@pytest.fixture
def agentreplay_cassette_path(request):
    return Path(str(request.config.rootpath)) / "fixture_place" / (request.node.name + ".json")

@pytest.mark.agentreplay
def test_fixture_placed():
    httpx.get(os.environ["GATE_BASE"] + "/f")
"""

HOOKED = """
import os
import httpx
import pytest

@pytest.mark.agentreplay
def test_hook_placed():
    httpx.get(os.environ["GATE_BASE"] + "/h")

@pytest.mark.agentreplay
@pytest.mark.skipif("os.environ.get('SKIP_ONE') == '1'")
def test_sometimes_skipped():
    httpx.get(os.environ["GATE_BASE"] + "/s")

@pytest.mark.agentreplay
def test_default():
    httpx.get(os.environ["GATE_BASE"] + "/d")
"""

HOOK_CONFTEST = """
from pathlib import Path

def pytest_agentreplay_cassette_path(item, default):
    if item.name == "test_hook_placed":
        return Path(str(item.config.rootpath)) / "cassettes" / "hooked" / "placed.json"
    return None
"""


@pytest.mark.parametrize("xdist", XDIST, ids=["plain", "xdist"])
def test_hook_and_fixture_placed_cassettes_are_never_unused(
    pytester: pytest.Pytester, server: list[str], monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    pytester.makeconftest(HOOK_CONFTEST)
    pytester.makepyfile(test_placed=PLACED, test_hooked=HOOKED)
    pytester.runpytest("--agentreplay-record=all", *xdist).assert_outcomes(passed=4)
    written = {p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.json")}
    assert written == {
        "fixture_place/test_fixture_placed.json",
        "cassettes/hooked/placed.json",
        "cassettes/test_hooked/test_sometimes_skipped.json",
        "cassettes/test_hooked/test_default.json",
    }
    # A stale cassette beside them is the only unused one, even with a skipped and a deselected test.
    stale = pytester.path / "cassettes" / "test_hooked" / "test_gone.json"
    stale.write_bytes((pytester.path / "cassettes" / "test_hooked" / "test_default.json").read_bytes())
    monkeypatch.setenv("SKIP_ONE", "1")
    result = pytester.runpytest(*xdist, "-k", "not test_default")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("skipped"), outcomes.get("failed")) == (2, 1, None)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*unused: *test_hooked/test_gone.json*", "*1 unused cassettes (failed)*"])
    assert "placed.json" not in result.stdout.str().split("unused:", 1)[1]
    result = pytester.runpytest(*xdist, "--agentreplay-update")
    assert result.ret == 0, result.stdout.str()
    after = {p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.json")}
    assert after == written, "--agentreplay-update removed a cassette a collected test maps to"


def test_unused_only_failure_is_explained_on_the_last_line(
    pytester: pytest.Pytester, server: list[str]
) -> None:
    pytester.makepyfile(test_u=COPIED)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=2)
    folder = pytester.path / "cassettes" / "test_u"
    (folder / "test_removed.json").write_bytes(next(folder.glob("*.json")).read_bytes())
    result = pytester.runpytest()
    assert result.ret == 1
    last = [line for line in result.stdout.lines if line.strip()][-1]
    assert "2 passed" in last and "1 unused cassettes (failed)" in last, last
    result.stdout.fnmatch_lines(["*session FAILED only because of 1 unused cassette(s)*"])


def test_a_deleted_modules_cassette_is_reported(pytester: pytest.Pytester, server: list[str]) -> None:
    pytester.makepyfile(test_keep=COPIED, test_gone=COPIED)
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=4)
    (pytester.path / "test_gone.py").unlink()
    result = pytester.runpytest()
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*unused: *test_gone/test_first.json*", "*unused: *test_gone/test_second.json*"]
    )


def test_block_network_guards_tests_without_replay(pytester: pytest.Pytester, server: list[str]) -> None:
    pytester.makepyfile(
        test_plain="""
import os
import httpx

def test_live_call():
    httpx.get(os.environ["GATE_BASE"] + "/live")

def test_allowed_by_name():
    httpx.get(os.environ["GATE_BASE"].replace("127.0.0.1", "localhost") + "/ok")
"""
    )
    result = pytester.runpytest("--agentreplay-block-network")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*network access blocked*"])
    assert server == []
    result = pytester.runpytest("--agentreplay-block-network", "--agentreplay-allow-hosts=localhost")
    result.assert_outcomes(passed=1, failed=1)
    assert server == ["GET /ok"]
    pytester.runpytest().assert_outcomes(passed=2)


def test_an_allowed_name_resolved_by_one_test_does_not_admit_its_ip_for_the_next(
    pytester: pytest.Pytester, server: list[str]
) -> None:
    # What "localhost" resolved to is remembered for the test that allowed it, not for the session:
    # the next test connecting to 127.0.0.1 by address is still refused, even while a thread the first
    # test left behind keeps the guard installed between the two.
    pytester.makepyfile(
        test_order="""
import os
import threading
import httpx

STOP = threading.Event()
LEFT = []

def test_first_by_name():
    httpx.get(os.environ["GATE_BASE"].replace("127.0.0.1", "localhost") + "/ok")
    LEFT.append(threading.Thread(target=STOP.wait, args=(30,), daemon=True))
    LEFT[0].start()

def test_then_by_address():
    try:
        httpx.get(os.environ["GATE_BASE"] + "/live")
    finally:
        # Ended before the session does: a guard kept installed would outlive it in this process.
        STOP.set()
        LEFT[0].join()
"""
    )
    result = pytester.runpytest("--agentreplay-block-network", "--agentreplay-allow-hosts=localhost")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_then_by_address*", "*network access blocked*"])
    assert server == ["GET /ok"]


def test_classify_hook_is_called_for_each_request(pytester: pytest.Pytester, server: list[str]) -> None:
    pytester.makeconftest(
        """
SEEN = []

def pytest_agentreplay_classify_exchange(request, response):
    SEEN.append(request["method"] + " " + request["url"].rsplit("/", 1)[1])
    # A POST that only reads (a search endpoint): served from the cassette like any read.
    return "read" if request["url"].endswith("/search") else None
"""
    )
    pytester.makepyfile(
        test_c="""
import os
import httpx
import pytest
import conftest

@pytest.mark.agentreplay
def test_search(agent_replay):
    httpx.post(os.environ["GATE_BASE"] + "/search", json={"q": "x"})
    httpx.post(os.environ["GATE_BASE"] + "/notes", json={"t": "x"})
    kinds = [
        (e.type, (e.effect.kind if e.effect else None))
        for e in agent_replay.events
        if e.type in ("http", "effect")
    ]
    assert kinds[0] == ("http", None), kinds
    assert kinds[1][0] == "effect", kinds
    assert "POST search" in conftest.SEEN and "POST notes" in conftest.SEEN
"""
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)


def test_a_run_moved_to_one_worker_thread_replays_clean(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_t="""
import os
from concurrent.futures import ThreadPoolExecutor
import pytest
from pytest_agentreplay import record_state, tool

@tool(name="lookup")
def lookup(n):
    return {"n": n}

def run_agent():
    for n in range(3):
        lookup(n)
        record_state({"n": n})

@pytest.mark.agentreplay
def test_agent():
    if os.environ.get("IN_THREAD") == "1":
        with ThreadPoolExecutor(1) as pool:
            pool.submit(run_agent).result()
    else:
        run_agent()
"""
    )
    pytester.runpytest("--agentreplay-record=all").assert_outcomes(passed=1)
    os.environ["IN_THREAD"] = "1"
    try:
        result = pytester.runpytest()
    finally:
        del os.environ["IN_THREAD"]
    result.assert_outcomes(passed=1)


def test_installs_without_xdist_hooks_failing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    assert 1\n")
    pytester.runpytest("-p", "no:xdist").assert_outcomes(passed=1)


def test_no_placeholder_or_hand_written_command_in_messages() -> None:
    """Every command a message prints comes from ``commands.py``; no message prints ``<test>``."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "commands.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            placeholder = re.search(r"[\"']<test>[\"']|agentreplay-(record|update)\S*\s+<", line)
            if placeholder or re.search(r"pytest --agentreplay-(record|update)\b[^\"']*\{", line):
                offenders.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert offenders == []


LATE_IMPORTS = """
import asyncio
import os
import pytest

pytestmark = pytest.mark.agentreplay

def test_late():
    # Neither client is imported before the test runs: each is patched as it is first imported.
    import aiohttp
    import requests

    base = os.environ["GATE_BASE"]
    assert requests.get(base + "/requests").json()["path"] == "/requests"

    async def fetch():
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/aiohttp") as response:
                return (await response.json())["path"]

    assert asyncio.run(fetch()) == "/aiohttp"
"""


def test_clients_first_imported_inside_a_replaying_test_are_served(
    pytester: pytest.Pytester, server: list[str]
) -> None:
    pytester.makepyfile(test_late=LATE_IMPORTS)
    # Own processes: in this one the clients are imported already.
    pytester.runpytest_subprocess("--agentreplay-record=all", "-p", "no:cacheprovider").assert_outcomes(
        passed=1
    )
    assert sorted(server) == ["GET /aiohttp", "GET /requests"]
    server.clear()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentreplay-block-network")
    result.assert_outcomes(passed=1)
    assert server == []


RELEASED = """
import gc
import os

import httpx
import pytest

from pytest_agentreplay.core.capture import RunContext
from pytest_agentreplay.cassette.read import LoadedCassette


@pytest.mark.agentreplay
def test_replayed():
    assert httpx.get(os.environ["GATE_BASE"] + "/r").json()["path"] == "/r"


def test_after():
    gc.collect()
    # Only this session's: pytester runs it inside a process that may hold other sessions' runs.
    runs = [o for o in gc.get_objects() if isinstance(o, RunContext)]
    cassettes = [o for o in gc.get_objects() if isinstance(o, LoadedCassette)]
    assert [r for r in runs if r.settings.nodeid == "test_released.py::test_replayed"] == []
    assert [c for c in cassettes if c.path.parts[-2:] == ("test_released", "test_replayed.json")] == []
"""


def test_a_judged_test_does_not_keep_its_run_alive_for_the_rest_of_the_session(
    pytester: pytest.Pytester, server: list[str]
) -> None:
    """Its loaded cassette and replayed history are freed once the test is judged: kept by the item, every
    later full garbage collection of the session (pytest runs several at its end) would walk them again."""
    pytester.makepyfile(test_released=RELEASED)
    pytester.runpytest("--agentreplay-record=all", "-p", "no:randomly").assert_outcomes(passed=2)
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert server == ["GET /r"]
