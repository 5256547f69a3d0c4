"""One settings table (``core/setting_keys.py``) makes everything that names a setting: the options and
their help, the ini keys, the marker's help line, the keys each place accepts, the valid values a wrong
choice lists, the defaults the help states; the fixture's docstring and the docs pages name what it
holds."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest

from pytest_agentreplay.core import setting_keys as keys
from pytest_agentreplay.core.config import (
    Settings,
    build_settings,
    marker_kwargs,
    read_pyproject_table,
    resolve_test_settings,
)
from pytest_agentreplay.core.run_settings import RunSettings
from pytest_agentreplay.exceptions import ConfigError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _in_place(place: str) -> list[keys.Setting]:
    return [s for s in keys.SETTINGS if place in s.places]


def test_the_marker_help_of_an_inner_session_names_every_marker_keyword(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--markers").stdout.str()
    line = next(line for line in out.splitlines() if line.startswith("@pytest.mark.agentreplay("))
    keywords = re.findall(r"(\w+)=None", line.split(")", 1)[0])
    assert keywords == list(keys.MARKER_KEYS)
    assert "agent" in keywords and "cassette" in keywords


def test_the_options_and_ini_keys_of_an_inner_session_are_the_tables(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--help").stdout.str()
    section = out.split("replay-based regression testing of LLM agents:", 1)[1].split("\n\n", 1)[0]
    options = re.findall(r"^  (--agentreplay-[a-z-]+)", section, flags=re.M)
    assert options == [keys.option_flag(s.name) for s in _in_place(keys.CLI)]
    ini_keys = re.findall(r"^  (agentreplay_\w+) \((\w+)\)", out, flags=re.M)
    assert sorted(ini_keys) == sorted((keys.ini_key(s.name), s.ini_type) for s in _in_place(keys.INI))
    flat = _unwrapped(out)
    for setting in _in_place(keys.CLI):
        if setting.choices:
            assert f"{keys.option_flag(setting.name)}={{{','.join(setting.choices)}}}" in out
        assert _unwrapped(setting.help_text(keys.CLI)) in flat
    for setting in _in_place(keys.INI):
        assert _unwrapped(setting.help_text(keys.INI)) in flat
    assert _unwrapped("(one of none, missing, drifted, all; default none; the command line wins)") in flat


def _unwrapped(text: str) -> str:
    """``text`` without its white space: pytest wraps help text, at spaces and after hyphens."""
    return re.sub(r"\s+", "", text)


def test_a_flag_option_takes_no_value_and_the_others_one() -> None:
    flags = [s for s in _in_place(keys.CLI) if s.flag]
    assert [s.name for s in flags] == [
        "update",
        "pending",
        "save_on_failure",
        "block_network",
        "isolate_subprocesses",
    ]
    for setting in _in_place(keys.CLI):
        arguments = setting.option_arguments()
        assert arguments["dest"] == "agentreplay_" + setting.name and arguments["default"] is None
        assert (arguments.get("action") == "store_true") is setting.flag
        assert setting.flag or setting.choices or arguments["metavar"]


def test_every_place_accepts_the_keys_of_the_table_and_lists_them_for_an_unknown_one(tmp_path: Path) -> None:
    lines = [f"{name} = {'true' if keys.BY_NAME[name].flag else '0'}" for name in keys.PROJECT_KEYS]
    (tmp_path / "pyproject.toml").write_text("[tool.agentreplay]\n" + "\n".join(lines) + "\n")
    assert list(read_pyproject_table(tmp_path)) == list(keys.PROJECT_KEYS)
    (tmp_path / "pyproject.toml").write_text('[tool.agentreplay]\nrecrod = "all"\n')
    with pytest.raises(ConfigError) as project:
        read_pyproject_table(tmp_path)
    assert f"valid keys: {', '.join(keys.PROJECT_KEYS)}" in str(project.value)

    assert list(marker_kwargs([dict.fromkeys(keys.MARKER_KEYS)], "t.py::t")) == list(keys.MARKER_KEYS)
    with pytest.raises(ConfigError) as marker:
        marker_kwargs([{"agnet": "a"}], "t.py::t")
    assert f"valid arguments: {', '.join(keys.MARKER_KEYS)}" in str(marker.value)
    assert "did you mean 'agent'?" in str(marker.value)

    settings = build_settings(rootdir=tmp_path, cli={}, ini={}, project={})
    with pytest.raises(ConfigError) as fixture:
        resolve_test_settings(
            settings, nodeid="t.py::t", marker={}, overrides={"bogus": 1}, default_cassette=tmp_path / "c"
        )
    assert f"valid keys: {', '.join(keys.FIXTURE_KEYS)}" in str(fixture.value)


@pytest.mark.parametrize(
    ("setting", "place"),
    [
        (s, place)
        for s in keys.SETTINGS
        if s.choices
        for place in ("cli", "ini", "project")
        if place in s.places
    ],
    ids=lambda value: value if isinstance(value, str) else value.name,
)
def test_a_wrong_choice_lists_the_tables_choices(tmp_path: Path, setting: keys.Setting, place: str) -> None:
    given: dict[str, dict[str, object]] = {"cli": {}, "ini": {}, "project": {}}
    given[place] = {setting.name: "bogus"}
    with pytest.raises(ConfigError) as exc:
        build_settings(rootdir=tmp_path, cli=given["cli"], ini=given["ini"], project=given["project"])
    message = str(exc.value)
    assert f"valid values: {', '.join(setting.choices)}" in message
    assert f"expected: a {setting.noun}: one of" in message


def test_a_wrong_record_or_mode_of_the_marker_or_fixture_lists_the_tables_choices(tmp_path: Path) -> None:
    settings = build_settings(rootdir=tmp_path, cli={}, ini={}, project={})
    for name in ("record", "mode"):
        setting = keys.BY_NAME[name]
        assert {keys.MARKER, keys.FIXTURE} <= setting.places
        for marker, overrides in (({name: "bogus"}, {}), ({}, {name: "bogus"})):
            with pytest.raises(ConfigError, match=f"valid values: {', '.join(setting.choices)}"):
                resolve_test_settings(
                    settings, nodeid="t.py::t", marker=marker, overrides=overrides, default_cassette=tmp_path
                )


@pytest.mark.parametrize(
    "setting", [s for s in keys.SETTINGS if s.flag and "project" in s.places], ids=lambda s: s.name
)
def test_a_flag_of_the_table_is_checked_as_a_boolean(tmp_path: Path, setting: keys.Setting) -> None:
    with pytest.raises(ConfigError, match="expected: true or false"):
        build_settings(rootdir=tmp_path, cli={}, ini={}, project={setting.name: "maybe"})
    # The word for the other value than the default: read as that boolean.
    other = "off" if setting.default else "on"
    built = build_settings(rootdir=tmp_path, cli={}, ini={}, project={setting.name: other})
    assert getattr(built, setting.name) is (not setting.default)


def test_the_defaults_the_table_states_are_the_settings_defaults() -> None:
    """Where the settings objects have a default of their own, the table (and so the help) states it."""
    compared = 0
    run_settings = RunSettings()
    for setting in keys.SETTINGS:
        for owner in (Settings, run_settings):
            value = getattr(owner, setting.name, None)
            if value is None or (not value and not isinstance(value, bool)):  # no default of its own
                continue
            assert keys.shown_default(setting.default) == keys.shown_default(
                str(value) if isinstance(value, Path) else value
            ), setting.name
            compared += 1
            break
    assert compared >= 12


def _is_a(value: object, hint: object) -> bool:
    """Whether ``value`` is of the type ``hint`` names (the shapes of the settings' fields)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin is types.UnionType:
        return any(_is_a(value, arg) for arg in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(_is_a(item, args[0]) for item in value)
    return isinstance(value, origin or hint)  # type: ignore[arg-type]


def test_the_settings_fields_the_table_gives_a_default_are_of_their_type() -> None:
    """``Settings`` takes its defaults from the table, where mypy cannot see them: held to the field types."""
    hints = typing.get_type_hints(Settings)
    derived = [name for name in hints if name in keys.BY_NAME]
    assert len(derived) >= 15
    for name in derived:
        assert _is_a(getattr(Settings, name), hints[name]), (name, getattr(Settings, name), hints[name])
    assert Settings().record == keys.BY_NAME["record"].default
    assert not _is_a("none", bool | None) and not _is_a(("clock", 1), tuple[str, ...])


def test_a_run_settings_default_the_table_states_wrongly_is_refused_at_import() -> None:
    assert keys.default("model_data_class", str) == RunSettings().model_data_class == "personal"
    with pytest.raises(TypeError, match="default of repeat is not a str: 1"):
        keys.default("repeat", str)


def test_the_fixture_docstring_names_every_fixture_key(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--fixtures", "-v").stdout.str()
    doc = out.split("agentreplay_config -- ", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)*\b", doc))
    assert set(keys.FIXTURE_KEYS) <= named, sorted(set(keys.FIXTURE_KEYS) - named)
    # Made from the table: every key, in its order, and nothing else.
    listed = " ".join(doc.split()).split("Keys: ", 1)[1].split(". ", 1)[0]
    assert listed.split(", ") == list(keys.FIXTURE_KEYS)


def test_the_docs_name_every_setting_where_it_may_be_given() -> None:
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    markers = (DOCS / "markers-fixtures.md").read_text(encoding="utf-8")
    marker_table = markers.split("| argument | what it sets |", 1)[1].split("\n\n", 1)[0]
    fixture_keys = markers.split("\nKeys: ", 1)[1].split("\n\n", 1)[0]
    for setting in keys.SETTINGS:
        name, places = setting.name, setting.places
        if keys.CLI in places:
            assert f"| `{keys.option_flag(name)}" in configuration, name
        if keys.INI in places:
            assert f"`{keys.ini_key(name)}`" in configuration, name
        if keys.PROJECT in places:
            assert f"`{name}`" in configuration, name
        if keys.MARKER in places:
            assert f"`{name}`" in marker_table, name
        if keys.FIXTURE in places:
            assert f"`{name}`" in fixture_keys, name


def test_the_docs_state_the_tables_defaults() -> None:
    """The defaults the options page states are the table's (its rows are prose, written by hand)."""
    rows = [
        line for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines() if "|" in line
    ]
    stated = 0
    for setting in keys.SETTINGS:
        row = next((r for r in rows if f"| `{setting.name}` |" in r or f"| `{setting.name}`," in r), None)
        if row is None or setting.default is None or setting.default is False:
            continue
        shown = keys.shown_default(setting.default)
        if isinstance(setting.default, int) and setting.default >= 1024:  # inline_limit: "2 KiB"
            shown = f"{setting.default // 1024} KiB"
        assert "default" in row and shown in row, (setting.name, shown, row)
        stated += 1
    assert stated >= 10
