"""The README's first screen, run as a user would: its files written into a fresh project, recorded
against a local OpenAI-compatible server, replayed with the server stopped, a reworded prompt failing
with the command that accepts it, and the accepted cassette replaying green.

The README is the landing page and the documentation is a MkDocs site (``mkdocs.yml``, ``docs/``): the
quickstart stays in the README (the site's home page includes it from there), the rest moved to the docs
pages. Also checked here: the README stays short and keeps the development set-up commands, ``nav`` lists
every page and nothing else, the README's links to the pages resolve, and every Python and TOML example
of the README and the pages parses (their ``[tool.agentreplay]`` keys known to the plugin)."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from servers import LLMServer, ModelReply

pytest.importorskip("openai")
pytest.importorskip("pytest_asyncio")

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
# Where the quickstart's files live: the README ("Test your own agent"); docs/index.md includes that section.
QUICKSTART = README
README_MAX_LINES = 250
SYSTEM_PROMPT = "You are a support agent."


def readme_files() -> dict[str, str]:
    """The fenced blocks of "Test your own agent" whose first line names a file (``# agent.py``)."""
    text = QUICKSTART.read_text(encoding="utf-8")
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
    pending = cassette.with_name("test_late_parcel.pending.json")
    assert pending.is_file(), "the README names the pending file a drifting test leaves"
    assert "agentreplay review" in out
    before = cassette.read_text(encoding="utf-8")
    pytester.runpytest("--agentreplay-update", "tests/test_agent.py::test_late_parcel").assert_outcomes(
        passed=1
    )
    assert not pending.exists(), "an accepted update drops the pending drift"
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

    # Step 5's third way: re-record from the drift, the summary line the README quotes.
    agent.write_text(
        files["agent.py"].replace(SYSTEM_PROMPT, "You are a kind support agent."), encoding="utf-8"
    )
    server = LLMServer().start()
    server.queue(
        "chat",
        ModelReply(text=None, tool_calls=[("lookup_order", {"order_id": "A1"})]),
        ModelReply(text="Order A1 has shipped, kindly."),
    )
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    try:
        rerecorded = pytester.runpytest("--agentreplay-record=drifted", "tests/test_agent.py")
    finally:
        server.stop()
    rerecorded.assert_outcomes(passed=1)
    line = re.search(
        r"drifted at seq \d+ \(model\.call [^)]+\): \d+ events kept, \d+ recorded live",
        rerecorded.stdout.str(),
    )
    assert line is not None, rerecorded.stdout.str()
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert f"`{line.group(0)}`" in readme, line.group(0)
    assert len(server.log) == 2, "both model calls changed: both were sent"
    pytester.runpytest("tests/test_agent.py").assert_outcomes(passed=1)


# ------------------------------------------------------------------------------ the landing page and the site


def _doc_pages() -> set[str]:
    return {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}


def _nav_entries(nav: object) -> list[str]:
    """The page paths of mkdocs.yml's ``nav`` (sections nest lists of ``{title: page}``)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for entry in nav for page in _nav_entries(entry)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_entries(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def test_the_readme_is_a_short_landing_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move text to docs/"


def test_the_readme_keeps_the_development_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = (
        "# 1. the main job: the example support agent's regression suite (no network, no services needed)\n"
        'python -m pip install -c constraints/dev.txt -e ".[dev]" && python -m pytest example_project/tests '
        "-p no:cacheprovider\n"
        "\n"
        "# 2. install and run the test suite (both cores; inner sessions use pytester)\n"
        'python -m pip install -c constraints/dev.txt -e ".[dev]" && python -m pytest -n 2\n'
    )
    assert block in text
    assert "## Developing this plugin" in text
    assert "**Refreshing the pins**" in text  # constraints/dev.txt points there


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))
    entries = _nav_entries(config["nav"])
    assert len(entries) == len(set(entries)), "a page is listed twice in nav"
    pages = _doc_pages()
    assert pages, "no pages under docs/"
    assert sorted(pages - set(entries)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(entries) - pages) == [], "nav entries without a page under docs/"


def test_the_readme_links_to_docs_pages_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {link.split("#", 1)[0] for link in re.findall(r"\]\((docs/[^)\s]+)\)", text)}
    assert targets, "the README links to no docs page"
    assert sorted(t for t in targets if not (ROOT / t).is_file()) == []
    linked = {t.removeprefix("docs/") for t in targets}
    assert sorted(_doc_pages() - linked) == [], "docs pages the README's Documentation list does not name"


def test_the_docs_home_page_includes_the_readme_sections_it_shows() -> None:
    readme = README.read_text(encoding="utf-8")
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    for name in ("intro", "quickstart"):
        assert f'--8<-- "README.md:{name}"' in home
    contributing = (DOCS / "contributing.md").read_text(encoding="utf-8")
    assert '--8<-- "README.md:developing"' in contributing
    for name in ("intro", "quickstart", "developing"):
        start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
        assert readme.count(start) == 1 and readme.count(end) == 1
        assert readme.index(start) < readme.index(end)
    quickstart = readme.split("[start:quickstart]", 1)[1].split("[end:quickstart]", 1)[0]
    assert "## Test your own agent" in quickstart and "# tests/test_agent_async.py" in quickstart


def _fenced_blocks(language: str) -> list[tuple[str, str]]:
    """(file, body) of every fenced block in that language in the README and the docs pages (indented
    fences inside list items included)."""
    blocks: list[tuple[str, str]] = []
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for indent, body in re.findall(rf"^( *)```{language}\n(.*?)^\1```", text, flags=re.S | re.M):
            lines = [line.removeprefix(indent) for line in body.splitlines()]
            blocks.append((path.relative_to(ROOT).as_posix(), "\n".join(lines) + "\n"))
    return blocks


def test_the_python_examples_of_the_readme_and_the_docs_compile() -> None:
    blocks = _fenced_blocks("python")
    assert len(blocks) >= 10
    for where, body in blocks:
        compile(body, where, "exec")  # a SyntaxError names the file and the line


def test_the_toml_examples_of_the_readme_and_the_docs_parse_with_known_keys() -> None:
    from pytest_agentreplay.core.setting_keys import PROJECT_KEYS

    blocks = _fenced_blocks("toml")
    assert len(blocks) >= 5
    seen = 0
    for where, body in blocks:
        data = tomllib.loads(body)
        table = data.get("tool", {}).get("agentreplay")
        if table is None:
            continue
        seen += 1
        unknown = sorted(set(table) - set(PROJECT_KEYS))
        assert unknown == [], f"{where}: keys the plugin refuses: {unknown}"
    assert seen >= 4
