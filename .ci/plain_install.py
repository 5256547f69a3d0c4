"""CI leg: the package as users install it (no extras, no pytest-xdist) drives a tiny agent project.

In a fresh virtualenv: ``pip install <checkout> httpx`` (httpx is what the tiny agent itself needs), then
plain ``pytest`` runs an unrelated test, records the agent against a local server, replays it with
nothing reaching the server (with and without ``-p no:xdist``), and fails on drift.

Usage: python .ci/plain_install.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

AGENT_TEST = """
import os

import httpx
import pytest


@pytest.mark.agentreplay
def test_note_agent():
    base = os.environ["AGENT_BASE"]
    created = httpx.post(
        base + "/v1/notes", json={"text": os.environ.get("NOTE", "v1")}, headers={"Idempotency-Key": "n1"}
    )
    assert created.status_code == 201
    assert httpx.get(base + "/v1/notes/" + created.json()["id"]).json()["id"] == created.json()["id"]
"""

SDK_AGENTS_TEST = """
import os

import anthropic
import openai


def test_openai_agent(agent_replay):
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE"] + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "hello"


def test_anthropic_agent(agent_replay):
    client = anthropic.Anthropic(base_url=os.environ["AGENT_BASE"], max_retries=0)
    reply = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=32, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "hello"
"""

# The SDKs' own credential variables: none is set while the SDK agents replay.
CREDENTIALS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_ORG_ID")

CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
MESSAGES_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "hello"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}

UNRELATED_TEST = """
def test_x():
    assert 1
"""


class Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def _reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        Counter.hits.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/v1/chat/completions":
            self._reply(200, CHAT_REPLY)
        elif self.path == "/v1/messages":
            self._reply(200, MESSAGES_REPLY)
        else:
            self._reply(201, {"id": "1"})

    def do_GET(self) -> None:
        Counter.hits.append(self.path)
        self._reply(200, {"id": "1", "text": "stored"})

    def log_message(self, *args: object) -> None:
        pass


def run(cmd: list[str], cwd: Path, env: dict[str, str], expect: int) -> str:
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != expect:
        print(out)
        raise SystemExit(f"expected exit status {expect}, got {proc.returncode}: {' '.join(cmd)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="agentreplay-plain-"))
    work.mkdir(parents=True, exist_ok=True)
    venv = work / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # A copy of the checkout: the build must not leave artefacts in it, and nothing else is installed.
    source = work / "src"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "build", "__pycache__"))
    subprocess.run([python, "-m", "pip", "install", "-q", str(source), "httpx"], check=True)
    shown = subprocess.run([python, "-m", "pip", "show", "pytest-xdist"], capture_output=True)
    if shown.returncode == 0:
        raise SystemExit("pytest-xdist must not be installed in the plain leg")

    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir()
    (project / "test_agent.py").write_text(textwrap.dedent(AGENT_TEST))
    (project / "test_unrelated.py").write_text(textwrap.dedent(UNRELATED_TEST))
    (project / "pytest.ini").write_text("[pytest]\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["AGENT_BASE"] = f"http://127.0.0.1:{server.server_address[1]}"
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider"]
    try:
        # 1. An unrelated suite in an environment where the plugin is installed without extras.
        out = run([*pytest, "test_unrelated.py"], project, env, 0)
        assert "1 passed" in out, out
        out = run([*pytest, "-p", "no:xdist", "test_unrelated.py"], project, env, 0)
        # 2. Record through the marker alone.
        out = run([*pytest, "--agentreplay-record=all"], project, env, 0)
        assert "1 recorded" in out, out
        recorded_hits = len(Counter.hits)
        assert recorded_hits == 2, Counter.hits
        assert (project / "cassettes" / "test_agent" / "test_note_agent.json").is_file()
        # 3. Replay: nothing reaches the server, with and without -p no:xdist.
        for extra in ([], ["-p", "no:xdist"]):
            out = run([*pytest, *extra], project, env, 0)
            assert "1 replayed" in out and "2 passed" in out, out
        assert len(Counter.hits) == recorded_hits, Counter.hits
        # 4. Drift fails the run and says so.
        out = run([*pytest, "--agentreplay-report=drift.json"], project, {**env, "NOTE": "v2"}, 1)
        assert "1 drifted" in out, out
        report = json.loads((project / "drift.json").read_text())
        assert [t["status"] for t in report["tests"]] == ["drifted"], report["tests"]
        assert len(Counter.hits) == recorded_hits, Counter.hits
        # 5. pytest rewrote only the modules loaded before the plugin's own finder was in place (the rest
        # load with the bytecode pip compiled), and a user's failing assertion is still explained. Bytecode
        # written for this run, so that pytest's cache of rewritten modules shows what it rewrote.
        writing = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        out = run([*pytest], project, writing, 0)
        assert "1 replayed" in out, out
        where = run(
            [python, "-c", "import pytest_agentreplay; print(pytest_agentreplay.__file__)"], project, env, 0
        )
        package = Path(where.strip()).parent
        rewritten = sorted(p.name.split(".")[0] for p in package.rglob("*-pytest-*.pyc"))
        assert rewritten == ["__init__", "plain_import", "plugin"], rewritten
        (project / "test_assertion.py").write_text("def test_y():\n    assert [1, 2] == [1, 3]\n")
        out = run([*pytest, "test_assertion.py"], project, writing, 1)
        assert "At index 1 diff: 2 != 3" in out, out
        # 6. The official SDKs (the user's own dependencies): recorded with a key, replayed with none set.
        subprocess.run([python, "-m", "pip", "install", "-q", "openai", "anthropic"], check=True)
        sdk = project / "sdk"
        sdk.mkdir()
        (sdk / "test_sdk_agents.py").write_text(textwrap.dedent(SDK_AGENTS_TEST))
        (sdk / "pytest.ini").write_text("[pytest]\n")
        keyed = {**env, "OPENAI_API_KEY": "sk-plain-leg-recording", "ANTHROPIC_API_KEY": "sk-ant-plain-leg"}
        out = run([*pytest, "--agentreplay-record=all"], sdk, keyed, 0)
        assert "2 recorded" in out, out
        sdk_hits = len(Counter.hits)
        keyless = {k: v for k, v in env.items() if k not in CREDENTIALS}
        out = run([*pytest], sdk, keyless, 0)
        assert "2 replayed" in out and "2 passed" in out, out
        assert "did not run the guard" not in out, out
        assert len(Counter.hits) == sdk_hits, Counter.hits
    finally:
        server.shutdown()
    print(f"plain install leg: ok ({work})")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
