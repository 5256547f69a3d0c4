"""Every setting checked once, at start-up, through real pytest sessions: a wrong type or value in
``[tool.agentreplay]``, an ini key or an option is a usage error naming the key, where it was given, what
was given and what is expected; rules are parsed before any test runs; a marker's or fixture's settings
fail the test that uses them, once; the report's folder must exist and a lost report fails the session."""

from __future__ import annotations

from pathlib import Path

import pytest

# A test body that leaves a trace: a usage error must stop the session before it runs.
TEST = """
from pathlib import Path
from pytest_agentreplay import record_policy

def test_flow(agent_replay):
    Path("body-ran").write_text("yes")
    record_policy("refund-limit", "allow", version="2", reason="under the limit")
"""


def above_short_summary(out: str) -> str:
    """The report without pytest's closing summary, which repeats each message in full where `CI` is set."""
    return out.split("short test summary info")[0]


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    pytester.makepyfile(test_flow=TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "body-ran").exists()
    return result.stderr.str()


@pytest.mark.parametrize(
    ("line", "given", "expected"),
    [
        ("allow_hosts = 5", "given: 5 (an integer)", "expected: a host name or a list of them"),
        ("allow_hosts = [1, 2]", "given: [1, 2] (a list)", "expected: a host name or a list of them"),
        ("cassette_dir = 7", "given: 7 (an integer)", "expected: a folder path (a string)"),
        ('record = "sometimes"', "given: 'sometimes'", "valid values: none, missing, drifted, all"),
        ("mode = 3", "given: 3 (an integer)", "valid values: audit, regression, model-comparison, sandbox"),
        ('update = "maybe"', "given: 'maybe'", "expected: true or false"),
        ("save_on_failure = 2", "given: 2 (an integer)", "expected: true or false"),
        ("fail_on_unused = []", "given: [] (a list)", "expected: true or false"),
        ('block_network = "sure"', "given: 'sure'", "expected: true or false"),
        ("isolate_subprocesses = 1.5", "given: 1.5 (a number)", "expected: true or false"),
        ('report = "drift.txt"', "given: 'drift.txt'", "expected: a file path ending in .md, .json or .html"),
        ("report = 5", "given: 5 (an integer)", "expected: a file path ending in .md, .json or .html"),
        ("model = 5", "given: 5 (an integer)", "expected: a model name"),
        ("redact_headers = 5", "given: 5 (an integer)", "expected: a list of strings"),
        ("redact_keys = [1]", "given: [1] (a list)", "expected: a list of regular expressions"),
        ('redact_patterns = ["("]', "'(' is not valid", "expected: a list of regular expressions"),
        ("idempotency_header = 3", "given: 3 (an integer)", "expected: a header name"),
        ('receipts = ["id"]', "given: ['id'] (a list)", "expected: a table of host = JSON path"),
        (
            'openai_compatible_base_urls = ["gateway.local/v1"]',
            "does not start with http:// or https://",
            "expected: a list of base URLs",
        ),
        ("inline_limit = -1", "given: -1 (an integer)", "expected: a whole number >= 0"),
        ("inline_limit = true", "given: True (a boolean)", "expected: a whole number >= 0"),
        ('runtime_values = "time"', "given: 'time'", "valid values: clock, uuid, random"),
    ],
)
def test_a_wrong_project_value_is_a_usage_error_naming_key_place_given_and_expected(
    pytester: pytest.Pytester, line: str, given: str, expected: str
) -> None:
    pytester.makepyprojecttoml(f"[tool.agentreplay]\n{line}\n")
    err = usage_error(pytester)
    key = line.split(" =", 1)[0]
    place = f"[tool.agentreplay] of {pytester.path / 'pyproject.toml'}"
    assert f"invalid {key} " in err and place in err, err
    assert given in err and expected in err, err
    assert "INTERNALERROR" not in err


def test_a_value_the_command_line_overrides_is_still_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.agentreplay]\nmode = "fast"\n')
    err = usage_error(pytester, "--agentreplay-mode=audit")
    assert "invalid mode 'fast' in [tool.agentreplay] of" in err


@pytest.mark.parametrize(
    ("toml", "unknown", "suggestion"),
    [
        ('[tool.agentreplay]\nrecrod = "all"\n', "recrod", "did you mean 'record'?"),
        (
            '[tool.agentreplay]\nallowed_hosts = ["localhost"]\n',
            "allowed_hosts",
            "did you mean 'allow_hosts'?",
        ),
        ('[tool.agentreplay.rule]\n"*:data.x" = "ignore"\n', "rule", "did you mean 'rules'?"),
    ],
)
def test_an_unknown_project_key_suggests_the_closest_valid_one(
    pytester: pytest.Pytester, toml: str, unknown: str, suggestion: str
) -> None:
    pytester.makepyprojecttoml(toml)
    err = usage_error(pytester)
    assert f"unknown key(s): {unknown} in [tool.agentreplay] of {pytester.path / 'pyproject.toml'}" in err
    assert suggestion in err


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ('"::::" = "ignore"', "'::::' (project): empty event type before ':'"),
        ('":data.request_id" = "ignore"', "empty event type before ':'"),
        ('"model.call::data.x" = "ignore"', "malformed field path ':data.x': a selector is EVENT:PATH"),
        ('"model.call:data.x" = "ignor"', "unknown verdict 'ignor'"),
        ('"model.call:" = "ignore"', "empty field path"),
    ],
)
def test_a_malformed_project_rule_stops_the_session_once_before_any_test(
    pytester: pytest.Pytester, rule: str, problem: str
) -> None:
    pytester.makepyprojecttoml(f"[tool.agentreplay.rules]\n{rule}\n")
    # Recording compares nothing: before, a bad rule surfaced only when a replay compared, once per test.
    err = usage_error(pytester, "--agentreplay-record=all")
    assert err.count(problem) == 1, err
    assert f"at: [tool.agentreplay.rules] of {pytester.path / 'pyproject.toml'}" in err


def test_an_empty_event_in_an_array_of_rule_tables_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        '[[tool.agentreplay.rules]]\nevent = ""\npath = "data.x"\nverdict = "ignore"\n'
    )
    assert "empty event type" in usage_error(pytester)


@pytest.mark.parametrize(
    ("ini", "needles"),
    [
        (
            "agentreplay_update = maybe",
            ["invalid agentreplay_update in [pytest] of", "invalid truth value 'maybe'", "true or false"],
        ),
        (
            "agentreplay_mode = fast",
            ["invalid agentreplay_mode 'fast' in [pytest] of", "valid values: audit, regression"],
        ),
        (
            "agentreplay_report = nowhere/drift.md",
            ["invalid agentreplay_report 'nowhere/drift.md' in [pytest] of", "does not exist"],
        ),
        (
            "agentreplay_runtime_values = clock time",
            ["invalid agentreplay_runtime_values 'clock time'", "valid values: clock, uuid, random"],
        ),
    ],
)
def test_a_wrong_ini_value_is_a_usage_error_naming_the_file(
    pytester: pytest.Pytester, ini: str, needles: list[str]
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    err = usage_error(pytester)
    for needle in needles:
        assert needle in err, err
    assert str(pytester.path / "tox.ini") in err
    assert not (pytester.path / "nowhere").exists()


def test_a_native_toml_ini_value_of_the_wrong_type_names_the_table(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.pytest]\nagentreplay_allow_hosts = ["localhost"]\n')
    err = usage_error(pytester)
    assert "invalid agentreplay_allow_hosts in [tool.pytest] of" in err
    assert "expected: a string of host names separated by spaces or commas" in err


def test_an_override_ini_value_is_named_as_given_on_the_command_line(pytester: pytest.Pytester) -> None:
    err = usage_error(pytester, "-o", "agentreplay_record=sometimes")
    assert "invalid agentreplay_record 'sometimes' on the command line (-o/--override-ini)" in err


def test_a_report_folder_that_does_not_exist_is_a_usage_error_and_is_not_created(
    pytester: pytest.Pytester,
) -> None:
    err = usage_error(pytester, "--agentreplay-report=reports/drift.md")
    assert "invalid --agentreplay-report 'reports/drift.md' on the command line" in err
    assert f"the folder {pytester.path / 'reports'} does not exist" in err
    assert f"mkdir -p {pytester.path / 'reports'}" in err
    assert not (pytester.path / "reports").exists()


def test_a_report_that_cannot_be_written_at_the_end_fails_the_session_and_says_so(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "reports").mkdir()
    pytester.makepyfile(
        test_gone="""
import shutil

def test_removes_the_report_folder():
    shutil.rmtree("reports")
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-report=reports/drift.md")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"FAILED: the agentreplay report was not written: {pytester.path / 'reports' / 'drift.md'}",
            f"*its folder {pytester.path / 'reports'} does not exist*",
        ]
    )
    assert not (pytester.path / "reports").exists()


MARKED = """
import pytest
from pytest_agentreplay import record_policy

@pytest.mark.agentreplay(rules={rules})
def test_bad_a():
    record_policy("p", "allow")

@pytest.mark.agentreplay(rules={rules})
def test_bad_b():
    record_policy("p", "allow")

def test_plain(agent_replay):
    record_policy("p", "allow")
"""


@pytest.mark.parametrize("parallel", [False, True], ids=["one-process", "xdist"])
def test_a_bad_marker_rule_fails_each_test_using_it_once_at_set_up(
    pytester: pytest.Pytester, parallel: bool
) -> None:
    pytester.makepyfile(test_marked=MARKED.format(rules='{"::::": "ignore"}'))
    args = ["-p", "no:cacheprovider", "--agentreplay-record=all"]
    # Recording compares nothing: before, a marker's bad rule was never reported while recording.
    result = pytester.runpytest_subprocess(*args, "-n", "2") if parallel else pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=2)
    out = above_short_summary(result.stdout.str())
    for name in ("test_bad_a", "test_bad_b"):
        place = f"at: rules= of @pytest.mark.agentreplay on test_marked.py::{name}"
        assert out.count(place) == 1, out
    assert out.count("failed (config: invalid agentreplay configuration)") == 2, out
    assert not (pytester.path / "cassettes" / "test_marked" / "test_bad_a.json").exists()


def test_a_bad_project_setting_under_xdist_is_one_usage_error_from_the_controller(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyprojecttoml("[tool.agentreplay]\nallow_hosts = 5\n")
    pytester.makepyfile(test_flow=TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count("invalid allow_hosts 5 in [tool.agentreplay]") == 1, err
    assert "INTERNALERROR" not in err + result.stdout.str()
    assert not (pytester.path / "body-ran").exists()


@pytest.mark.parametrize(
    ("conftest", "needles"),
    [
        (
            'return {"allow_host": ["localhost"]}',
            ["unknown key(s): allow_host in the agentreplay_config fixture", "did you mean 'allow_hosts'?"],
        ),
        ('return {"allow_hosts": 5}', ["invalid allow_hosts 5 in the agentreplay_config fixture"]),
        ('return {"rules": {"::::": "ignore"}}', ["at: rules of the agentreplay_config fixture"]),
        # Base URLs are held to the project file's check wherever they are given.
        *(
            (
                f'return {{"{key}": ["gateway.local/v1"]}}',
                [
                    f"invalid {key} ['gateway.local/v1'] in the agentreplay_config fixture",
                    "'gateway.local/v1' does not start with http:// or https://",
                ],
            )
            for key in ("openai_compatible_base_urls", "anthropic_base_urls")
        ),
    ],
)
def test_a_wrong_fixture_setting_fails_the_test_at_set_up(
    pytester: pytest.Pytester, conftest: str, needles: list[str]
) -> None:
    pytester.makeconftest(f"import pytest\n\n@pytest.fixture\ndef agentreplay_config():\n    {conftest}\n")
    pytester.makepyfile(test_flow=TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-record=all")
    # A fixture's keys are checked when the test sets up (a rule or a run's setting, when its run begins).
    begins = "rules" in conftest or "base_urls" in conftest
    result.assert_outcomes(**({"failed": 1} if begins else {"errors": 1}))
    out = above_short_summary(result.stdout.str())
    for needle in needles:
        assert out.count(needle) == 1, out
    assert not (pytester.path / "body-ran").exists()


@pytest.mark.parametrize(
    ("marker", "needle"),
    [
        ("allow_hosts=5", "invalid allow_hosts 5 in @pytest.mark.agentreplay on test_m.py::test_m"),
        ("model=3", "invalid model 3 in @pytest.mark.agentreplay on test_m.py::test_m"),
        ("cassette=7", "invalid cassette 7 in @pytest.mark.agentreplay on test_m.py::test_m"),
        ('allow_host="localhost"', "did you mean 'allow_hosts'?"),
    ],
)
def test_a_wrong_marker_value_fails_the_test(pytester: pytest.Pytester, marker: str, needle: str) -> None:
    pytester.makepyfile(
        test_m=f"import pytest\n\n@pytest.mark.agentreplay({marker})\ndef test_m():\n    pass\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentreplay-record=all")
    result.assert_outcomes(errors=1)
    assert needle in result.stdout.str(), result.stdout.str()


# Every [tool.agentreplay] key with a valid value: the session records, replays and writes its report.
EVERY_PROJECT_KEY = """
[tool.agentreplay]
record = "missing"
mode = "regression"
cassette_dir = "tapes"
report = "reports/drift.json"
model = "gpt-4o-mini"
update = false
allow_hosts = ["localhost", "*.internal.example"]
save_on_failure = false
fail_on_unused = true
block_network = true
isolate_subprocesses = false
redact_headers = ["x-internal-token"]
redact_keys = ["internal_secret", "session_.*"]
redact_patterns = ["tok_[0-9a-z]{8}"]
idempotency_header = "Idempotency-Key"
receipts = { "api.internal.example" = "data.id" }
openai_compatible_base_urls = ["http://127.0.0.1:9/v1"]
inline_limit = 4096
runtime_values = "clock uuid"

[tool.agentreplay.rules]
"policy.decision:data.reason" = { similarity = 0.85 }
"*:**.request_id" = "ignore"
"""

EVERY_INI_KEY = """
[pytest]
agentreplay_record = missing
agentreplay_mode = regression
agentreplay_cassette_dir = tapes
agentreplay_report = reports/drift.json
agentreplay_model = gpt-4o-mini
agentreplay_allow_hosts = localhost, *.internal.example
agentreplay_update = false
agentreplay_save_on_failure = false
agentreplay_isolate_subprocesses = false
agentreplay_block_network = true
agentreplay_fail_on_unused = true
agentreplay_runtime_values = clock
"""

EVERY_OPTION = [
    "--agentreplay-record=missing",
    "--agentreplay-mode=regression",
    "--agentreplay-cassette-dir=tapes",
    "--agentreplay-report=reports/drift.json",
    "--agentreplay-model=gpt-4o-mini",
    "--agentreplay-allow-hosts=localhost,*.internal.example",
    "--agentreplay-save-on-failure",
    "--agentreplay-block-network",
]


@pytest.mark.parametrize("where", ["pyproject", "ini", "options"])
def test_a_valid_value_for_every_key_still_works(pytester: pytest.Pytester, where: str) -> None:
    args: list[str] = ["-p", "no:cacheprovider"]
    if where == "pyproject":
        pytester.makepyprojecttoml(EVERY_PROJECT_KEY)
    elif where == "ini":
        pytester.makeini(EVERY_INI_KEY)
    else:
        args += EVERY_OPTION
    (pytester.path / "reports").mkdir()
    pytester.makepyfile(test_flow=TEST)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "test_flow" / "test_flow.json").is_file()
    replay = pytester.runpytest(*args)
    replay.assert_outcomes(passed=1)
    replay.stdout.fnmatch_lines(["*1 replayed, 0 recorded*"])
    assert Path(pytester.path / "reports" / "drift.json").is_file()
