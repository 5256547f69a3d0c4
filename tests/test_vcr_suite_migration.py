"""Acceptance harness of issue 12: a real pytest-recording suite (llm-gemini, ``../shared/suites``) runs
under pytest-recording, then with ``-p no:recording`` and this plugin, with zero edits to its files: with
pytest-recording installed, and with it not installed at all.

The suite is installed with its own dependencies (``pip install -e . pytest-asyncio cogapp``: this test
reaches PyPI) into a virtualenv created once per session with ``--system-site-packages``, so the venv sees
this checkout's package as the development environment installed it (no extras, nothing reinstalled).
pytest-recording is installed beside it (``pip install --target``), on the path only of the runs that have
it installed (``PYTHONPATH``). Each run works on a fresh copy of the suite in a temporary folder;
``../shared`` is never written. Skips when ``../shared`` is absent.

A small suite of the shape teams have (``vcr_suites.py``: a ``pytest_recording_configure`` hook, a
``persister`` in ``vcr_config``, ``--block-network --record-mode=none`` in its ``addopts``) runs the same
three ways.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from vcr_suites import PASSING, write_migration_suite

SHARED = Path(__file__).resolve().parents[2] / "shared"
SUITE = SHARED / "suites" / "llm-gemini"
BASELINE = 59  # `59 passed` under pytest-recording, offline (suites/README.md)
INSTALL_TIMEOUT = 300
RUN_TIMEOUT = 240

pytestmark = pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/suites/llm-gemini is absent")
pytest.importorskip("vcr")  # pytest-recording's own dependency, from the development environment


def _copy_suite(dest: Path) -> Path:
    shutil.copytree(SUITE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache"))
    for path in [dest, *dest.rglob("*")]:  # the shared copy is read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AGENTREPLAY_", "LLM_"))}
    env.pop("PYTHONPATH", None)
    # A safety net for the run without pytest-recording: whatever escapes every guard goes to a closed
    # loopback port instead of the network (httpx, which llm-gemini uses, honours these).
    env.update(
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        ALL_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _counts(output: str) -> dict[str, int]:
    tail = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    found: dict[str, int] = {}
    last = tail[-1] if tail else ""
    for count, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", last):
        found[word.rstrip("s") if word.startswith("error") else word] = int(count)
    return found


class Venv:
    def __init__(self, root: Path, suite: Path) -> None:
        self.root = root
        self.suite = suite  # the copy the editable install points at
        self.python = root / "bin" / "python"
        # pytest-recording, installed beside the venv: on the path of the runs that have it installed.
        self.recording = root.parent / "recording"

    def pytest(self, cwd: Path, *args: str, recording: bool = False) -> subprocess.CompletedProcess[str]:
        env = _env()
        if recording:
            env["PYTHONPATH"] = str(self.recording)
        return subprocess.run(
            [str(self.python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *QUIET, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )

    def has_recording(self, recording: bool) -> bool:
        """Whether ``pytest_recording`` imports in a run with (or without) it installed."""
        env = _env()
        if recording:
            env["PYTHONPATH"] = str(self.recording)
        code = "import importlib.util as u; print(u.find_spec('pytest_recording') is not None)"
        out = subprocess.run([str(self.python), "-c", code], env=env, capture_output=True, text=True)
        return out.stdout.strip() == "True"


# Plugins of the development environment these suites never use (each costs start-up time).
QUIET = ("-p", "no:randomly", "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest")


@pytest.fixture(scope="session")
def gemini_venv(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Venv]:
    """One virtualenv per session with llm-gemini and its test dependencies installed; pytest-xdist
    workers share it (the first one installs under a lock, the others wait for it)."""
    if worker_id == "master":
        yield _install(tmp_path_factory.mktemp("llm-gemini-venv"))
        return
    import fcntl

    base = tmp_path_factory.getbasetemp().parent / "llm-gemini-venv"
    base.mkdir(exist_ok=True)
    with (base / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, before any test runs
        ready = base / "ready"
        if ready.exists():
            venv = Venv(base / "venv", base / "src")
        else:
            venv = _install(base)
            ready.touch()
    yield venv


@pytest.fixture(scope="session")
def worker_id(request: pytest.FixtureRequest) -> str:
    """pytest-xdist's worker id ("master" without xdist), without requiring xdist."""
    workerinput = getattr(request.config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "master"


def _install(base: Path) -> Venv:
    shutil.rmtree(base / "src", ignore_errors=True)  # left by a worker whose install was skipped
    suite = _copy_suite(base / "src")
    root = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(root)],
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT,
    )
    venv = Venv(root, suite)
    _pip_install(venv, "llm-gemini's dependencies", "-e", str(suite), "pytest", "pytest-asyncio", "cogapp")
    # Its dependencies (pytest, vcrpy) are the development environment's, seen through the venv.
    _pip_install(venv, "pytest-recording", "--no-deps", "--target", str(venv.recording), "pytest-recording")
    return venv


def _pip_install(venv: Venv, what: str, *args: str) -> None:
    """``pip install`` into the venv; skips the test when it cannot (PyPI unreachable)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    install = subprocess.run(
        [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        env=env,
    )
    if install.returncode != 0:
        pytest.skip(f"cannot install {what} (PyPI unreachable?): {install.stderr[-600:]}")


def test_baseline_under_pytest_recording(gemini_venv: Venv, tmp_path: Path) -> None:
    """The suite as its authors run it: pytest-recording replays its 31 cassettes offline."""
    suite = _copy_suite(tmp_path / "llm-gemini")
    # This plugin stays out of the baseline: the numbers are pytest-recording's alone.
    result = gemini_venv.pytest(suite, "-q", "-p", "no:pytest_agentreplay", recording=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert _counts(output) == {"passed": BASELINE}, output[-3000:]


@pytest.mark.parametrize("installed", [False, True], ids=["recording-not-installed", "recording-disabled"])
def test_same_suite_through_agentreplay(gemini_venv: Venv, tmp_path: Path, installed: bool) -> None:
    """pytest-recording not installed, or installed and disabled: this plugin reads the same cassettes in
    place, the same tests pass, zero edits to the suite, and no request leaves the process (the network
    guard covers every test)."""
    assert gemini_venv.has_recording(installed) is installed
    suite = _copy_suite(tmp_path / "llm-gemini")
    before = {p.relative_to(suite): p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    result = gemini_venv.pytest(
        suite, "-q", "-p", "no:recording", "--agentreplay-block-network", recording=installed
    )
    output = result.stdout + result.stderr
    after = {p.relative_to(suite): p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    assert after == before, "the run changed the suite's files"
    assert result.returncode == 0, output[-3000:]
    assert _counts(output) == {"passed": BASELINE}, output[-3000:]


def test_removed_cassette_fails_and_never_goes_live(gemini_venv: Venv, tmp_path: Path) -> None:
    """Without pytest-recording, a vcr-marked test whose cassette is gone fails; it is not sent live."""
    suite = _copy_suite(tmp_path / "llm-gemini")
    (suite / "tests" / "cassettes" / "test_gemini" / "test_prompt.yaml").unlink()
    result = gemini_venv.pytest(
        suite, "-q", "-p", "no:recording", "--agentreplay-block-network", "tests/test_gemini.py::test_prompt"
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert _counts(output) == {"failed": 1}, output[-3000:]
    assert not (suite / "tests" / "cassettes" / "test_gemini" / "test_prompt.yaml").exists()


@pytest.mark.parametrize(
    ("recording", "args"),
    [
        (True, ("-p", "no:pytest_agentreplay")),  # pytest-recording alone: the reference
        (True, ()),  # both installed: pytest-recording's options and hook stay its own, no clash
        (False, ()),  # pytest-recording not installed: this plugin honours them
        (True, ("-p", "no:recording")),  # installed, disabled
    ],
    ids=["pytest-recording", "both-active", "recording-not-installed", "recording-disabled"],
)
def test_hook_persister_and_addopts_suite(
    gemini_venv: Venv, tmp_path: Path, recording: bool, args: tuple[str, ...]
) -> None:
    """The same small suite passes the same tests under pytest-recording and under this plugin."""
    suite = write_migration_suite(tmp_path / "suite", "http://127.0.0.1:9")  # a closed port
    result = gemini_venv.pytest(suite, "-q", *args, recording=recording)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert _counts(output) == {"passed": PASSING}, output[-3000:]
