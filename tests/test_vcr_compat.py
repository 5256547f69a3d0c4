"""``vcr_compat``: pytest-recording's cassette paths and config merging, and replay of vcrpy cassettes read
in place with vcrpy's own serializer, request model and ``match_on`` semantics. The replay tests use
llm-gemini's real cassettes from ``../shared/suites`` and skip when it is absent."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentreplay.exceptions import ConfigError
from pytest_agentreplay.http.exchange import HttpRequest
from pytest_agentreplay.interop.vcr_compat import (
    VcrCassettePaths,
    VcrReplay,
    agentreplay_record_mode,
    allowed_hosts,
    cassette_paths,
    default_cassette_dir,
    default_cassette_name,
    merge_vcr_config,
    resolve_record_mode,
    vcr_options,
)
from pytest_agentreplay.interop.vcr_format import VcrCassetteError, load_vcr

SUITE = Path(__file__).resolve().parents[2] / "shared" / "suites" / "llm-gemini"
TEST_FILE = SUITE / "tests" / "test_gemini.py"
CASSETTES = SUITE / "tests" / "cassettes" / "test_gemini"
needs_shared = pytest.mark.skipif(not CASSETTES.is_dir(), reason="../shared/suites/llm-gemini is absent")
CONFIG = {"filter_headers": ["x-goog-api-key"]}  # llm-gemini's vcr_config


def live_requests(name: str, key: str = "live-key") -> list[HttpRequest]:
    """The requests a test sends again, as this project's interceptors hand them over."""
    out = []
    for item in load_vcr(CASSETTES / name):
        req = item.request
        out.append(HttpRequest(req.method, req.url, {**req.headers, "x-goog-api-key": key}, req.body))
    return out


# -- paths ----------------------------------------------------------------------------------------------


def test_default_names_follow_pytest_recording() -> None:
    assert default_cassette_name("test_x") == "test_x"
    assert default_cassette_name("test_x", "TestA") == "TestA.test_x"
    assert default_cassette_name('test_p[a/b:c?"d"]') == "test_p[a-b-c--d-]"
    assert default_cassette_dir("tests/unit/test_m.py") == Path("tests/unit/cassettes/test_m")


def test_cassette_paths_default_class_and_extras(tmp_path: Path) -> None:
    test_file = tmp_path / "tests" / "test_m.py"
    paths = cassette_paths(
        test_file,
        "test_x[1]",
        class_name="TestA",
        marker_args=["shared.yaml", str(tmp_path / "abs.yaml"), "shared.yaml"],
    )
    folder = tmp_path / "tests" / "cassettes" / "test_m"
    assert paths.directory == folder
    assert paths.primary == folder / "TestA.test_x[1].yaml"
    assert paths.extras == (folder / "shared.yaml", tmp_path / "abs.yaml", folder / "shared.yaml")
    assert paths.all == (folder / "TestA.test_x[1].yaml", folder / "shared.yaml", tmp_path / "abs.yaml")


def test_cassette_paths_fixture_overrides_and_serializer(tmp_path: Path) -> None:
    paths = cassette_paths(
        tmp_path / "test_m.py",
        "test_x",
        vcr_cassette_dir=tmp_path / "elsewhere",
        default_cassette_name="custom.json",
        config={"serializer": "json"},
    )
    assert paths.primary == tmp_path / "elsewhere" / "custom.json"  # suffix already there: kept
    long = cassette_paths(tmp_path / "test_m.py", "test_" + "x" * 400)
    name = long.primary.name
    assert len(name) <= 255 and name.endswith(".yaml") and "..." in name


@needs_shared
def test_paths_of_the_real_suite() -> None:
    paths = cassette_paths(TEST_FILE, "test_embedding[gemini-embedding-001-768]")
    assert paths.primary == CASSETTES / "test_embedding[gemini-embedding-001-768].yaml"
    assert paths.existing() == (paths.primary,)


# -- config ---------------------------------------------------------------------------------------------


def test_merge_closest_marker_wins_and_config_is_not_mutated() -> None:
    config: dict[str, Any] = {"filter_headers": ["authorization"], "record_mode": "once", "match_on": ["uri"]}
    merged = merge_vcr_config(config, [{"record_mode": "none"}, {"record_mode": "all", "match_on": ["body"]}])
    assert merged == {"filter_headers": ["authorization"], "record_mode": "none", "match_on": ["body"]}
    merged["filter_headers"].append("x")
    assert config["filter_headers"] == ["authorization"]
    assert vcr_options(merged | {"allowed_hosts": ["a"], "serializer": "json"}) == {
        "filter_headers": ["authorization", "x"],
        "match_on": ["body"],
    }


def test_record_mode_command_line_is_never_overridden() -> None:
    assert resolve_record_mode({}) == "none"
    assert resolve_record_mode({"record_mode": "once"}) == "once"
    assert resolve_record_mode({"record_mode": "all"}, cli_record_mode="none") == "none"
    with pytest.raises(ConfigError, match="unknown vcr record_mode 'sometimes'"):
        resolve_record_mode({"record_mode": "sometimes"})
    assert [agentreplay_record_mode(m) for m in ("none", "once", "new_episodes", "all", "rewrite")] == [
        "none",
        "missing",
        "missing",
        "all",
        "all",
    ]


def test_allowed_hosts_list_or_string() -> None:
    assert allowed_hosts({"allowed_hosts": "localhost, 127.0.0.1"}) == ("localhost", "127.0.0.1")
    assert allowed_hosts({"allowed_hosts": ["example.com"]}) == ("example.com",)
    assert allowed_hosts({}) == ()


def test_module_imports_neither_pytest_nor_vcr() -> None:
    code = (
        "import sys, pytest_agentreplay.interop.vcr_compat as m; "
        "print(sorted(n for n in ('pytest', '_pytest', 'vcr') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- replay --------------------------------------------------------------------------------------------


@needs_shared
def test_replays_a_real_cassette_in_order_each_interaction_once() -> None:
    replay = VcrReplay(cassette_paths(TEST_FILE, "test_tools"), merge_vcr_config(CONFIG))
    assert len(replay.interactions()) == 3 and replay.found
    recorded = load_vcr(CASSETTES / "test_tools.yaml")
    requests = live_requests("test_tools.yaml")
    # The default match_on (method, scheme, host, port, path, query) cannot tell the three apart: vcrpy
    # serves them in recorded order, each once.
    for n, req in enumerate(requests):
        match = replay.play(req)
        assert match is not None and match.index == n
        assert match.response.status == 200
        assert match.response.body == recorded[n].response.body  # decoded, library-neutral shape
        assert "content-encoding" not in match.response.headers
    assert replay.unplayed() == []
    assert replay.play(requests[0]) is None
    assert any("already played" in line for line in replay.closest(requests[0]))


@needs_shared
def test_allow_playback_repeats() -> None:
    replay = VcrReplay(
        cassette_paths(TEST_FILE, "test_prompt"), merge_vcr_config(CONFIG, [{"allow_playback_repeats": True}])
    )
    (req,) = live_requests("test_prompt.yaml")
    assert all(replay.play(req) is not None for _ in range(3))
    assert replay._cassette.play_counts[0] == 3


@needs_shared
def test_match_on_body_and_closest_explains() -> None:
    replay = VcrReplay(
        cassette_paths(TEST_FILE, "test_prompt"),
        merge_vcr_config(CONFIG, [{"match_on": ["method", "uri", "body"]}]),
    )
    (req,) = live_requests("test_prompt.yaml")
    changed = HttpRequest(req.method, req.url, req.headers, req.body.replace(b"pelican", b"walrus"))
    assert replay.play(changed) is None
    assert replay.closest(changed) and "differs in body" in replay.closest(changed)[0]
    assert replay.play(req) is not None
    other = HttpRequest("POST", req.url.replace("generativelanguage", "other"), req.headers, req.body)
    assert replay.play(other) is None


@needs_shared
def test_headers_matcher_sees_filtered_headers_as_vcrpy_does() -> None:
    """match_on headers compares the live request after filter_headers, as vcrpy does."""
    config = merge_vcr_config(CONFIG, [{"match_on": ["method", "uri", "headers"]}])
    replay = VcrReplay(cassette_paths(TEST_FILE, "test_prompt"), config)
    (req,) = live_requests("test_prompt.yaml", key="any-key-at-all")
    assert replay.play(req) is not None


@needs_shared
def test_before_record_response_and_ignore_localhost() -> None:
    def teapot(response: dict[str, Any]) -> dict[str, Any]:
        response["status"]["code"] = 418
        return response

    config = merge_vcr_config(CONFIG, [{"before_record_response": teapot, "ignore_localhost": True}])
    replay = VcrReplay(cassette_paths(TEST_FILE, "test_prompt"), config)
    (req,) = live_requests("test_prompt.yaml")
    match = replay.play(req)
    assert match is not None and match.response.status == 418
    assert replay.ignored(HttpRequest("GET", "http://localhost:8000/x", {}, b""))
    assert not replay.ignored(req)


@needs_shared
def test_extra_cassettes_are_read_after_the_primary(tmp_path: Path) -> None:
    folder = tmp_path / "tests" / "cassettes" / "test_m"
    folder.mkdir(parents=True)
    shutil.copy(CASSETTES / "test_prompt.yaml", folder / "test_x.yaml")
    shutil.copy(CASSETTES / "test_tools.yaml", folder / "shared.yaml")
    paths = cassette_paths(tmp_path / "tests" / "test_m.py", "test_x", marker_args=["shared.yaml"])
    replay = VcrReplay(paths, merge_vcr_config(CONFIG))
    assert len(replay.interactions()) == 4 and replay.found == (
        folder / "test_x.yaml",
        folder / "shared.yaml",
    )
    match = replay.play(live_requests("test_tools.yaml")[0])
    assert match is not None and match.index == 1  # the first of shared.yaml's, after the primary's one


def test_missing_cassette_serves_nothing(tmp_path: Path) -> None:
    replay = VcrReplay(VcrCassettePaths(tmp_path, tmp_path / "absent.yaml"), {})
    assert not replay.found and replay.interactions() == []
    assert replay.play(HttpRequest("GET", "https://example.com/", {}, b"")) is None


def test_undecodable_cassette_is_an_error_not_empty(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions: [unclosed", encoding="utf-8")
    with pytest.raises(VcrCassetteError, match=r"cannot read the vcrpy cassette bad\.yaml"):
        VcrReplay([bad], {})
    assert bad.read_text(encoding="utf-8") == "interactions: [unclosed"


def test_unknown_matcher_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown vcrpy matcher"):
        VcrReplay([tmp_path / "absent.yaml"], {"match_on": ["nonsense"]})


@needs_shared
def test_every_llm_gemini_cassette_replays_fully() -> None:
    for path in sorted(CASSETTES.glob("*.yaml")):
        replay = VcrReplay([path], merge_vcr_config(CONFIG))
        for req in live_requests(path.name):
            assert replay.play(req) is not None, path.name
        assert replay.unplayed() == [], path.name


def test_yaml_alias_bomb_is_refused_before_vcrpy_expands_it(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join([*lines, "interactions: []", "version: 1"]) + "\n", encoding="utf-8")
    with pytest.raises(VcrCassetteError, match="alias"):
        VcrReplay([bomb], {})


@needs_shared
def test_interactions_feed_the_recorded_history() -> None:
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.interop.vcr_format import interactions_to_events

    replay = VcrReplay(cassette_paths(TEST_FILE, "test_tools"), merge_vcr_config(CONFIG))
    interactions = replay.interactions()
    assert [i.request.method for i in interactions] == ["POST"] * 3
    assert all(i.request.json()["contents"] for i in interactions)
    events = interactions_to_events(interactions, run=RunMeta(run_id="r", labels={"source": "vcr"}))
    calls = [e for e in events if e.type == "model.call"]
    assert [c.data["decision"]["stop_reason"] for c in calls] == ["STOP"] * 3
    assert len(replay.unplayed()) == 3  # reading them plays nothing


# -- one reader for every vcr path ---------------------------------------------------------------------

# What old vcrpy versions wrote: Python tags vcrpy's own loader knows, a safe loader alone does not.
TAGGED_CASSETTE = """\
interactions:
- request:
    body: !!python/unicode '{"q": "status"}'
    headers:
      Content-Type: [!!python/unicode 'application/json']
    method: !!python/unicode 'POST'
    uri: !!python/unicode 'http://api.example.test/v1/status'
  response:
    body: {string: !!python/unicode '{"ok": true}'}
    headers:
      Content-Type: [application/json]
    status: {code: 200, message: OK}
version: 1
"""


def test_import_reads_what_replay_in_place_reads(tmp_path: Path) -> None:
    """``import-vcr`` and a vcr-marked test read a cassette through the same reader: a cassette vcrpy
    loads (its Python tags included) is imported with the interactions replay serves from it."""
    path = tmp_path / "tagged.yaml"
    path.write_text(TAGGED_CASSETTE, encoding="utf-8")
    served = VcrReplay([path], {}).interactions()
    imported = load_vcr(path)
    assert [(i.request.method, i.request.url, i.request.body) for i in imported] == [
        ("POST", "http://api.example.test/v1/status", b'{"q": "status"}')
    ]
    assert [(i.request.method, i.request.url, i.request.body) for i in served] == [
        (i.request.method, i.request.url, i.request.body) for i in imported
    ]
    assert [i.response for i in served] == [i.response for i in imported]


def test_replay_in_place_reads_a_bounded_regular_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-place reader has the importer's bound: a cassette over the size limit is refused, said as
    such, before vcrpy reads it (a FIFO or a device would block it the same way)."""
    from pytest_agentreplay.exceptions import CassetteError
    from pytest_agentreplay.interop import vcr_format

    path = tmp_path / "big.yaml"
    path.write_text(TAGGED_CASSETTE, encoding="utf-8")
    monkeypatch.setattr(vcr_format, "MAX_VCR_BYTES", 64)
    with pytest.raises(CassetteError, match=r"big\.yaml"):
        VcrReplay([path], {})
    with pytest.raises(CassetteError, match=r"big\.yaml"):
        load_vcr(path)


# -- every vcrpy option: applied, nothing to apply, or refused -----------------------------------------


def _vcrpy_option_names() -> set[str]:
    """The options vcrpy's VCR takes (its constructor) and reads from use_cassette's keywords."""
    import inspect
    import re

    from vcr.config import VCR

    names = set(inspect.signature(VCR.__init__).parameters) - {"self"}
    source = inspect.getsource(VCR)
    names |= set(re.findall(r'(?:kwargs|options)\.get\(\s*"(\w+)"', source))
    return names


def test_every_vcrpy_option_is_applied_accepted_or_refused() -> None:
    """A vcrpy release adding an option fails here until the option is placed in one of the tables."""
    from pytest_agentreplay.interop.vcr_options import APPLIED, NOTHING_TO_APPLY, REFUSED

    tables = [set(APPLIED), set(NOTHING_TO_APPLY), set(REFUSED)]
    assert not any(a & b for i, a in enumerate(tables) for b in tables[i + 1 :]), "an option in two tables"
    unplaced = _vcrpy_option_names() - set().union(*tables)
    assert unplaced == set(), f"vcrpy options nobody decided on: {sorted(unplaced)}"


def test_refused_options_name_themselves_and_their_fixes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        VcrReplay([tmp_path / "absent.yaml"], {"skip_patchers": ["httpx"]})
    text = str(caught.value)
    assert "skip_patchers=['httpx']" in text and "How to fix:" in text and "1. " in text
    with pytest.raises(ConfigError, match=r"sets path="):
        VcrReplay([tmp_path / "absent.yaml"], {"path": "x.yaml"})
    # Options of vcrpy's saving side are accepted: a replayed cassette is never saved.
    VcrReplay([tmp_path / "absent.yaml"], {"record_on_exception": False, "before_save_interaction": print})


def _cassette(path: Path, url: str, body: str) -> Path:
    import yaml

    interaction = {
        "request": {"body": None, "headers": {"x-case": ["one"]}, "method": "GET", "uri": url},
        "response": {"body": {"string": body}, "headers": {}, "status": {"code": 200, "message": "OK"}},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": [interaction], "version": 1}), encoding="utf-8")
    return path


def test_a_persister_in_vcr_config_loads_the_cassette(tmp_path: Path) -> None:
    """vcr_config's persister loads the test's cassette (vcrpy's get_merged_config raised a TypeError)."""
    from vcr.persisters.filesystem import FilesystemPersister

    stored = _cassette(tmp_path / "kept" / "test_x.yaml", "http://svc.test/x", '{"x": 1}')
    asked: list[str] = []

    class Elsewhere:
        @staticmethod
        def load_cassette(cassette_path: str, serializer: object) -> Any:
            asked.append(cassette_path)
            return FilesystemPersister.load_cassette(str(stored), serializer)

    replay = VcrReplay([tmp_path / "cassettes" / "test_x.yaml"], {"persister": Elsewhere})
    assert asked == [str(tmp_path / "cassettes" / "test_x.yaml")]
    assert replay.found and len(replay.interactions()) == 1
    assert replay.play(HttpRequest("GET", "http://svc.test/x", {}, b"")) is not None

    class Broken:
        @staticmethod
        def load_cassette(cassette_path: str, serializer: object) -> Any:
            raise RuntimeError("disk on fire")

    with pytest.raises(VcrCassetteError, match=r"persister Broken cannot load test_x\.yaml: RuntimeError"):
        VcrReplay([tmp_path / "cassettes" / "test_x.yaml"], {"persister": Broken})


def test_the_session_vcr_lends_its_matchers_and_persister(tmp_path: Path) -> None:
    """What pytest_recording_configure registers on the session's VCR applies to a served cassette."""
    from vcr import VCR

    path = _cassette(tmp_path / "test_x.yaml", "http://svc.test/x", "one")
    vcr = VCR(record_mode="none")
    vcr.register_matcher("case", lambda r1, r2: r1.headers.get("x-case") == r2.headers.get("x-case"))
    replay = VcrReplay([path], {"match_on": ["uri", "case"]}, vcr=vcr)
    assert replay.play(HttpRequest("GET", "http://svc.test/x", {"x-case": "two"}, b"")) is None
    assert replay.play(HttpRequest("GET", "http://svc.test/x", {"x-case": "one"}, b"")) is not None
    with pytest.raises(ConfigError, match="unknown vcrpy matcher"):
        VcrReplay([path], {"match_on": ["uri", "case"]})  # vcrpy's own VCR does not know it
    from vcr.persisters.filesystem import FilesystemPersister

    assert vcr.persister is FilesystemPersister, "the session's VCR is read, never changed"


def test_cassette_library_dir_and_path_transformer(tmp_path: Path) -> None:
    from vcr import VCR

    base = cassette_paths(
        tmp_path / "test_m.py", "test_x", config={"cassette_library_dir": str(tmp_path / "lib")}
    )
    assert base.primary == tmp_path / "lib" / "test_x.yaml"
    gz = cassette_paths(
        tmp_path / "test_m.py", "test_x", config={"path_transformer": VCR.ensure_suffix(".yml")}
    )
    assert gz.primary == tmp_path / "cassettes" / "test_m" / "test_x.yml"
    with pytest.raises(ConfigError, match="path_transformer is not callable"):
        cassette_paths(tmp_path / "test_m.py", "test_x", config={"path_transformer": ".yml"})


def test_allowed_host_patterns_as_host_names() -> None:
    from pytest_agentreplay.interop.vcr_options import host_names

    assert host_names(["localhost", r"127\.0\.0\.1", r"^api\.internal\.example$"], "x") == (
        "localhost",
        "127.0.0.1",
        "api.internal.example",
    )
    assert host_names([r".*\.internal\.example", ".+.svc"], "x") == ("*.internal.example", "*.svc")
    for pattern in (".*", "127.*", "(a|b).example"):
        with pytest.raises(ConfigError, match="is not a host name"):
            host_names([pattern], "--allowed-hosts")
