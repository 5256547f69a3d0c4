"""``@pytest.mark.vcr`` without pytest-recording (issue 12): the marker forms, ``vcr_config`` options,
class-based and parametrized cassette names. Each test writes vcrpy cassettes (format version 1) for a
local 127.0.0.1 service and runs a pytester suite with ``-p no:recording``: the YAML is served in place
(nothing is sent), a request no interaction matches fails (never goes live), ``--agentreplay-update``
converts, ``--agentreplay-record`` writes this plugin's format.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentreplay.intercept import install

pytest.importorskip("vcr")
# The inner suites run in this process (pytester), which drops the modules a run imported when it ends;
# interception state (patched clients, the guard) must not live in modules dropped between runs: import
# the interceptors and the HTTP clients once, here (install, then uninstall at once).
install()()


class _Service(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).hits += 1
        body = json.dumps({"live": True, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


@pytest.fixture
def service() -> Iterator[str]:
    """A live local service: a replayed test must never reach it (``_Service.hits`` stays 0)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Service.hits = 0
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def interaction(
    url: str, body: Any, *, method: str = "GET", request_body: str | None = None
) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "request": {"body": request_body, "headers": {"accept": ["*/*"]}, "method": method, "uri": url},
        "response": {
            "body": {"string": text},
            "headers": {"Content-Type": ["application/json"]},
            "status": {"code": 200, "message": "OK"},
        },
    }


def write_cassette(path: Path, *interactions: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": list(interactions), "version": 1}))
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:recording", "-p", "no:cacheprovider", *args)


def cassettes(pytester: pytest.Pytester, module: str = "test_suite") -> Path:
    return pytester.path / "cassettes" / module


def test_bare_marker_serves_the_yaml_in_place(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(cassettes(pytester) / "test_a.yaml", interaction(f"{service}/a", {"served": "yaml"}))
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            assert httpx.get("{service}/a").json() == {{"served": "yaml"}}
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 0
    assert not list(pytester.path.rglob("*.json")), "replaying never writes a cassette"


def test_unmatched_request_fails_and_never_goes_live(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(cassettes(pytester) / "test_a.yaml", interaction(f"{service}/a", {"served": "yaml"}))
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            httpx.get("{service}/other")
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no recorded vcrpy interaction matches GET*/other*"])
    assert _Service.hits == 0


def test_missing_cassette_fails_and_never_goes_live(pytester: pytest.Pytester, service: str) -> None:
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            httpx.get("{service}/a")
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*no recorded vcrpy interaction matches GET*", "*no cassette:*test_a.yaml does not exist*"]
    )
    assert _Service.hits == 0


def test_extra_cassette_names_and_class_and_parametrized_names(
    pytester: pytest.Pytester, service: str
) -> None:
    folder = cassettes(pytester)
    write_cassette(folder / "TestGroup.test_m.yaml", interaction(f"{service}/m", {"n": "method"}))
    write_cassette(folder / "test_p[one].yaml", interaction(f"{service}/p/one", {"n": 1}))
    write_cassette(folder / "test_p[two-2].yaml", interaction(f"{service}/p/two", {"n": 2}))
    write_cassette(folder / "shared.yaml", interaction(f"{service}/shared", {"n": "shared"}))
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        class TestGroup:
            @pytest.mark.vcr
            def test_m(self):
                assert httpx.get("{service}/m").json() == {{"n": "method"}}

        @pytest.mark.vcr
        @pytest.mark.parametrize("name", ["one", "two/2"], ids=["one", "two/2"])
        def test_p(name):
            path = name.split("/")[0]
            assert httpx.get(f"{service}/p/{{path}}").json()["n"] in (1, 2)

        @pytest.mark.vcr("shared.yaml")
        def test_shared():
            assert httpx.get("{service}/shared").json() == {{"n": "shared"}}
        """
    )
    run(pytester).assert_outcomes(passed=4)
    assert _Service.hits == 0


def test_vcr_config_match_on_and_filter_headers(pytester: pytest.Pytester, service: str) -> None:
    folder = cassettes(pytester)
    write_cassette(
        folder / "test_body.yaml",
        interaction(f"{service}/q", {"answer": 1}, method="POST", request_body='{"q": 1}'),
        interaction(f"{service}/q", {"answer": 2}, method="POST", request_body='{"q": 2}'),
    )
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="module")
        def vcr_config():
            return {
                "match_on": ["method", "uri", "body"],
                "filter_headers": ["x-api-key"],
                "filter_query_parameters": ["key"],
            }
        """
    )
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_body():
            headers = {{"x-api-key": "live-secret"}}
            # Body matching picks the second interaction first, as vcrpy would.
            url = "{service}/q?key=live-secret"  # the recording's URL had its key filtered out
            assert httpx.post(url, content=b'{{"q": 2}}', headers=headers).json() == {{"answer": 2}}
            assert httpx.post(url, content=b'{{"q": 1}}', headers=headers).json() == {{"answer": 1}}
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 0


def test_marker_kwargs_and_overridden_fixtures(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(pytester.path / "elsewhere" / "custom-name.yaml", interaction(f"{service}/r", {"r": 1}))
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="module")
        def vcr_cassette_dir(request):
            return str(request.config.rootpath / "elsewhere")

        @pytest.fixture
        def default_cassette_name():
            return "custom-name"
        """
    )
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr(allow_playback_repeats=True)
        def test_r():
            assert httpx.get("{service}/r").json() == {{"r": 1}}
            assert httpx.get("{service}/r").json() == {{"r": 1}}
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 0


def test_ignore_localhost_lets_the_service_through(pytester: pytest.Pytester, service: str) -> None:
    write_cassette(cassettes(pytester) / "test_i.yaml")
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr(ignore_localhost=True)
        def test_i():
            assert httpx.get("{service}/live").json()["live"] is True
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 1


def test_update_converts_and_record_mode_records_this_format(pytester: pytest.Pytester, service: str) -> None:
    yaml_path = cassettes(pytester) / "test_a.yaml"
    write_cassette(yaml_path, interaction(f"{service}/a", {"v": "yaml"}))
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            assert httpx.get("{service}/a").json()["v"] in ("yaml", "live")

        @pytest.mark.vcr(record_mode="once")
        def test_b():
            assert httpx.get("{service}/b").json()["live"] is True
        """
    )
    run(pytester, "--agentreplay-update").assert_outcomes(passed=2)
    ours = pytester.path / "cassettes" / "test_suite" / "test_a.json"
    assert ours.is_file() and yaml_path.is_file(), "converted into this format; the YAML stays"
    assert (pytester.path / "cassettes" / "test_suite" / "test_b.json").is_file(), "once records (ours)"
    assert _Service.hits == 1
    yaml_path.unlink()
    run(pytester).assert_outcomes(passed=2)
    assert _Service.hits == 1, "both replay from this plugin's cassettes"


def test_recording_a_vcr_test_writes_this_format(pytester: pytest.Pytester, service: str) -> None:
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_a():
            assert httpx.get("{service}/a").json()["live"] is True
        """
    )
    run(pytester, "--agentreplay-record=all").assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "test_suite" / "test_a.json").is_file()
    assert not list(pytester.path.rglob("*.yaml"))
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 1


def test_without_the_plugin_active_the_marker_is_not_ours(pytester: pytest.Pytester) -> None:
    """With a stand-in ``recording`` plugin registered, ``@pytest.mark.vcr`` stays pytest-recording's."""
    pytester.makepyfile(
        recording="",
        test_suite="""
        import pytest

        @pytest.mark.vcr
        def test_a(request):
            assert "agent_replay" not in request.fixturenames
        """,
    )
    pytester.syspathinsert()
    pytester.runpytest("-p", "recording", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_module_and_class_level_markers_and_default_cassette(pytester: pytest.Pytester, service: str) -> None:
    folder = cassettes(pytester)
    write_cassette(folder / "test_module_level.yaml", interaction(f"{service}/m", {"at": "module"}))
    write_cassette(folder / "TestC.test_in_class.yaml", interaction(f"{service}/c", {"at": "class"}))
    write_cassette(folder / "named.yaml", interaction(f"{service}/n", {"at": "named"}))
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        pytestmark = pytest.mark.vcr

        def test_module_level():
            assert httpx.get("{service}/m").json() == {{"at": "module"}}

        @pytest.mark.vcr(record_mode="none")
        class TestC:
            def test_in_class(self):
                assert httpx.get("{service}/c").json() == {{"at": "class"}}

        @pytest.mark.default_cassette("named")
        def test_default_cassette_marker():
            assert httpx.get("{service}/n").json() == {{"at": "named"}}
        """
    )
    result = run(pytester, "-W", "error::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=3)
    assert _Service.hits == 0


def test_before_record_hooks_in_vcr_config(pytester: pytest.Pytester, service: str) -> None:
    """``before_record_request`` rewrites both sides before matching; ``before_record_response`` what is
    served, as under vcrpy."""
    write_cassette(cassettes(pytester) / "test_h.yaml", interaction(f"{service}/v1/x", {"n": 1}))
    pytester.makeconftest(
        """
        import json
        import pytest

        def strip_version(request):
            request.uri = request.uri.replace("/v2/", "/v1/")
            return request

        def bump(response):
            body = json.loads(response["body"]["string"])
            response["body"]["string"] = json.dumps({"n": body["n"] + 1})
            return response

        @pytest.fixture(scope="module")
        def vcr_config():
            return {"before_record_request": strip_version, "before_record_response": bump}
        """
    )
    pytester.makepyfile(
        test_suite=f"""
        import httpx, pytest

        @pytest.mark.vcr
        def test_h():
            assert httpx.get("{service}/v2/x").json() == {{"n": 2}}
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert _Service.hits == 0
