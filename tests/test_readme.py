"""The README's first screen, run as a user would: its files written into a fresh project, recorded
against a local OpenAI-compatible server, replayed with the server stopped, a reworded prompt failing
with the command that accepts it, and the accepted cassette replaying green."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
from servers import LLMServer, ModelReply

pytest.importorskip("openai")
pytest.importorskip("pytest_asyncio")

README = Path(__file__).resolve().parents[1] / "README.md"
SYSTEM_PROMPT = "You are a support agent."


def readme_files() -> dict[str, str]:
    """The fenced blocks of "Test your own agent" whose first line names a file (``# agent.py``)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Test your own agent", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for body in re.findall(r"```(?:python|toml)\n(.*?)```", section, flags=re.S):
        first, _, rest = body.partition("\n")
        name = re.fullmatch(r"# ([\w./]+\.(?:py|toml))", first.strip())
        if name:
            files[name.group(1)] = rest
    return files


def test_the_readme_names_the_files_it_shows() -> None:
    assert set(readme_files()) == {
        "pyproject.toml",
        "agent.py",
        "tests/test_agent.py",
        "tests/test_agent_async.py",
    }


def _write(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    for name, body in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")


def test_the_readme_workflow_records_replays_and_accepts_a_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = readme_files()
    assert SYSTEM_PROMPT in files["agent.py"]
    _write(pytester, files)
    server = LLMServer().start()
    server.queue(
        "chat",
        ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "A1"})]),
        ModelReply(text="Order A1 has shipped."),
        ModelReply(text="Your order is on its way."),
    )
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-readme-0000000000000000")
    try:
        # Step 3: record once (one file at a time, so the scripted replies meet the test they are for).
        pytester.runpytest("--agentreplay-record=missing", "tests/test_agent.py").assert_outcomes(passed=1)
        pytester.runpytest("--agentreplay-record=missing", "tests/test_agent_async.py").assert_outcomes(
            passed=1
        )
    finally:
        server.stop()
    sent = len(server.log)
    assert sent == 3
    cassette = pytester.path / "cassettes" / "tests" / "test_agent" / "test_late_parcel.json"
    assert cassette.is_file(), "the README names this cassette path"
    assert "sk-test-readme" not in cassette.read_text(encoding="utf-8")

    # Step 4: plain pytest replays with nothing listening.
    pytester.runpytest().assert_outcomes(passed=2)
    assert len(server.log) == sent

    # Step 5: a reworded prompt fails, naming the command that accepts it; the update makes it green.
    agent = pytester.path / "agent.py"
    agent.write_text(
        files["agent.py"].replace(SYSTEM_PROMPT, "You are a friendly support agent."), encoding="utf-8"
    )
    drifted = pytester.runpytest("tests/test_agent.py")
    drifted.assert_outcomes(failed=1)
    out = drifted.stdout.str()
    assert "tests/test_agent.py::test_late_parcel: 1 regression, 0 expected differences" in out
    assert "system prompt changed; carried by 2 model calls (seq 1, 4)" in out
    assert "How to fix" in out
    assert "pytest --agentreplay-update tests/test_agent.py::test_late_parcel" in out
    before = cassette.read_text(encoding="utf-8")
    pytester.runpytest("--agentreplay-update", "tests/test_agent.py::test_late_parcel").assert_outcomes(
        passed=1
    )
    after = cassette.read_text(encoding="utf-8")
    assert "You are a friendly support agent." in after and after != before
    # Step 6: the pull request shows the reworded line, the changed event's digest and the seal.
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert len(changed) == 6, changed
    assert sum('"content": "You are a friendly support agent."' in line for line in changed) == 1
    assert sum('"head_hash"' in line for line in changed) == 2
    pytester.runpytest().assert_outcomes(passed=2)
    assert len(server.log) == sent
