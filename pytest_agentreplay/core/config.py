"""Settings: where each value comes from and which source wins (plain Python, no pytest import):
command line > marker > ``agentreplay_config`` fixture > ini ``agentreplay_<name>`` > ``[tool.agentreplay]``
> default; a marker never overrides a record mode given explicitly on the command line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..exceptions import ConfigError
from . import prices, setting_keys
from . import settings_check as check
from .constants import DEFAULT_CASSETTE_DIR, DEFAULT_SOURCES, SOURCES
from .documents import Document
from .run_settings import RunSettings


class _Fields:
    """Keyword-only value object. Not a dataclass: generating its methods costs milliseconds at every
    pytest start, and this module is imported even by sessions that never replay."""

    def __init__(self, **values: object) -> None:
        unknown = sorted(set(values) - set(type(self).__annotations__))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(unknown)}")
        self.__dict__.update(values)


def _table_defaults(cls: type[Settings]) -> type[Settings]:
    """A field named after a setting, with no default of its own, defaults to the settings table's: the
    table is the one list of defaults (tests/test_setting_keys.py holds each to the field's type)."""
    for name in cls.__annotations__:
        if name in setting_keys.BY_NAME and name not in vars(cls):
            setattr(cls, name, setting_keys.BY_NAME[name].default)
    return cls


@_table_defaults
class Settings(_Fields):
    """The session's settings; a field named after a setting means what the settings table says of it."""

    record: str
    mode: str
    # What a test's marker or fixture cannot change: the record mode, replay mode and repeat count the
    # command line gave, and a model given anywhere.
    overriding: frozenset[str] = frozenset()
    update: bool
    # None is "not given": on unless the CI variable is set (:func:`pending_enabled`).
    pending: bool | None
    cassette_dir: Path = Path(DEFAULT_CASSETTE_DIR)
    report: Path | None
    model: str | None
    allow_hosts: tuple[str, ...] = ()
    save_on_failure: bool
    fail_on_unused: bool
    block_network: bool
    isolate_subprocesses: bool
    isolate: str
    rules: Any  # raw from the config, parsed by diff.rules (a layer above)
    # Read-only by convention: the shared empty mapping is never mutated.
    redaction: Mapping[str, object] = MappingProxyType({})
    # The project's run settings: each test's run starts from them.
    http: RunSettings = RunSettings()
    inline_limit: int
    transport_headers: str
    runtime_values: tuple[str, ...]
    repeat: int
    min_agreement: float
    live_reads: bool
    prices: Mapping[str, object] = MappingProxyType({})


def read_pyproject_table(rootdir: Path) -> Document:
    """The raw ``[tool.agentreplay]`` table of ``rootdir/pyproject.toml``; an unknown key is an error."""
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    import tomllib  # heavy for start-up: only a project with a pyproject.toml pays for the TOML parser

    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", fixes=["fix the TOML syntax"]) from exc
    table = data.get("tool", {}).get("agentreplay", {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"[tool.agentreplay] in {path} must be a table",
            evidence=[f"given: {check.shown(table)}"],
            place=str(path),
            fixes=['write it as a table: [tool.agentreplay] then key = value lines, e.g. record = "none"'],
        )
    check.refuse_unknown(table, setting_keys.PROJECT_KEYS, "key(s)", "key", check.project_place(path))
    return table


def settings_from_pytest(config: Any, *, early: bool = False) -> Settings:
    """The session settings from a pytest ``Config`` (duck-typed), every value checked; raises
    ``ConfigError``. ``early``: at pytest's earliest hook, before the command line is fully parsed (the
    options of the known-args parse hold this plugin's options as the full parse will). An xdist worker
    skips the file-system checks: the controller made them."""
    known = config.known_args_namespace if early else None

    def getoption(name: str) -> Any:
        return getattr(known, name, None) if early else config.getoption(name)

    pyproject = config.rootpath / "pyproject.toml"
    overrides = [str(o).split("=", 1)[0].strip() for o in getoption("override_ini") or ()]
    places = check.Places(ini_file=config.inipath, ini_overrides=overrides, pyproject=pyproject)
    cli = {name: getoption(setting_keys.ini_key(name)) for name in setting_keys.OPTION_NAMES}
    ini: dict[str, object] = {}
    for name in setting_keys.INI_NAMES:
        try:
            ini[name] = config.getini(setting_keys.ini_key(name))
        except Exception as exc:  # pytest >= 9.2 raises its own UsageError; older ones TypeError/ValueError
            flag = setting_keys.BY_NAME[name].flag
            expected = _INI_EXPECTED.get(name, "true or false" if flag else "a string")
            raise check.unreadable(places.origin("ini", name), str(exc), expected) from None
    project = read_pyproject_table(config.rootpath)
    return build_settings(
        rootdir=config.rootpath,
        cli=cli,
        ini=ini,
        project=project,
        places=places,
        base_dir=Path(config.invocation_params.dir),
        check_paths=getattr(config, "workerinput", None) is None,
    )


# What an ini value pytest could not read should be instead (ini values are strings or booleans).
_INI_EXPECTED = {
    "allow_hosts": "a string of host names separated by spaces or commas",
    "tolerated_hosts": "a string of host names separated by spaces or commas",
    "runtime_values": 'a string: any of clock, uuid, random, or "" to turn it off',
}


def build_settings(
    *,
    rootdir: Path,
    cli: Mapping[str, object],
    ini: Mapping[str, object],
    project: Mapping[str, object],
    places: check.Places | None = None,
    base_dir: Path | None = None,
    check_paths: bool = True,
) -> Settings:
    """Merge the given command line, ini and pyproject values, checking each, whichever wins. ``base_dir``:
    where a relative report path is (the current folder when None). Raises ``ConfigError``."""
    places = places or check.Places()
    base = base_dir if base_dir is not None else Path.cwd()
    sources = (("cli", cli), ("ini", ini), ("project", project))

    def given(name: str) -> list[tuple[object, check.Origin]]:
        """Every value given for ``name``, the winning one first."""
        return [
            (source[name], places.origin(where, name))
            for where, source in sources
            if source.get(name) is not None and source.get(name) != ""
        ]

    values: dict[str, object] = {}
    http: dict[str, object] = {}
    paths: dict[str, setting_keys.Check] = {
        "cassette_dir": lambda v, o: check.folder(v, o, rootdir),
        "report": lambda v, o: check.report_path(v, o, base, check_folder=False),
    }
    for setting in setting_keys.SETTINGS:
        name = setting.name
        checker = setting.check or paths.get(name)
        if checker is None or setting_keys.PROJECT not in setting.places:
            continue
        if name in Settings.__annotations__:
            # A value that loses to another is still checked: it is wrong wherever it stands.
            checked = [checker(v, o) for v, o in given(name)]
            if checked:
                values[name] = checked[0]
        elif setting_keys.INI not in setting.places:
            if name in project:
                http[name] = checker(project[name], places.origin("project", name))
        else:
            for v, o in reversed(given(name)):  # each checked; the ini value wins
                http[name] = checker(v, o)
    report = given("report")
    if report and check_paths:  # only the winner's folder must exist: an overridden path is never written
        check.report_path(*report[0], base, check_folder=True)
    if "prices" in project:
        values["prices"] = prices.parse_prices(project["prices"], places.origin("project", "prices"))
    overriding = {name for name in ("record", "mode", "repeat") if cli.get(name) is not None}
    if values.get("model") is not None:
        overriding.add("model")
    values["overriding"] = frozenset(overriding)
    values.setdefault("cassette_dir", rootdir / DEFAULT_CASSETTE_DIR)
    # ini > project, each checked; an empty value (which ``given`` skips) turns them off.
    runtime = [
        runtime_sources(source["runtime_values"], places.origin(where, "runtime_values"))
        for where, source in (("ini", ini), ("project", project))
        if source.get("runtime_values") is not None
    ]
    values["runtime_values"] = runtime[0] if runtime else Settings.runtime_values
    # Parsed by the caller (diff.rules is a layer above): the plugin does it once, at start-up.
    values["rules"] = project.get("rules")
    values["redaction"] = {
        k: check.strings(project[k], places.origin("project", k), regex=k != "redact_headers")
        for k in ("redact_headers", "redact_keys", "redact_patterns")
        if k in project
    }
    if "live_reads" in values:
        http["live_reads"] = values["live_reads"]
    # Run settings reach the network guard through each run's settings.
    http["isolate_subprocesses"] = bool(values.get("isolate_subprocesses"))
    values["http"] = RunSettings().with_overrides(http, check.project_place(places.pyproject))
    return Settings(**values)


def pending_enabled(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Whether drifting tests write pending files: as set, else on outside CI (``CI`` unset or empty)."""
    if settings.pending is not None:
        return settings.pending
    return not environ.get("CI")


class TestSettings(_Fields):
    """The settings of one test after the marker and the ``agentreplay_config`` fixture are applied."""

    record: str
    mode: str
    cassette: Path
    rules: Any
    marker_rules: Any
    allow_hosts: tuple[str, ...]
    model: str | None
    extra: Mapping[str, object]
    runtime_values: tuple[str, ...]


def marker_kwargs(marks: list[Mapping[str, object]], nodeid: str) -> dict[str, object]:
    """Merge the kwargs of the test's ``agentreplay`` marks (closest mark wins) and validate them."""
    merged = {key: value for kwargs in reversed(marks) for key, value in kwargs.items()}
    place = f"@pytest.mark.agentreplay on {nodeid}"
    check.refuse_unknown(merged, setting_keys.MARKER_KEYS, "argument(s)", "argument", place)
    return merged


def marker_cassette(cassette_dir: Path, named: object) -> Path:
    """The path a marker's ``cassette=`` names: relative to the cassette folder, ``.json`` added."""
    cassette = cassette_dir / str(named)  # an absolute one stays as it is
    if cassette.suffix != ".json":
        cassette = cassette.with_name(cassette.name + ".json")
    return cassette


def resolve_test_settings(
    settings: Settings,
    *,
    nodeid: str,
    marker: Mapping[str, object],
    overrides: Mapping[str, object],
    default_cassette: Path,
) -> TestSettings:
    """Apply a test's marker and ``agentreplay_config`` overrides on top of the session settings, each
    value checked even when the command line overrides it; ``rules`` are parsed when the run begins."""
    fixture_place = "the agentreplay_config fixture"
    if not isinstance(overrides, Mapping):
        raise check.invalid(
            check.Origin("agentreplay_config", "a conftest.py"), overrides, "a dict of settings"
        )
    check.refuse_unknown(overrides, setting_keys.FIXTURE_KEYS, "key(s)", "key", fixture_place)
    marker_place = f"@pytest.mark.agentreplay on {nodeid}"
    # Per key, the fixture's value then the marker's: the marker wins.
    layers = ((overrides, fixture_place), (marker, marker_place))

    def given(key: str) -> list[tuple[object, check.Origin]]:
        return [
            (where[key], check.Origin(key, place)) for where, place in layers if where.get(key) is not None
        ]

    # The session's overriding values win; the test's value is checked all the same.
    chosen = {key: getattr(settings, key) for key in ("record", "mode", "model")}
    for key in chosen:
        checker = setting_keys.BY_NAME[key].check
        assert checker is not None
        for value, origin in given(key):
            checked = checker(value, origin)
            if key not in settings.overriding:
                chosen[key] = checked
    cassette = default_cassette
    for value, origin in given("cassette"):
        if not isinstance(value, str | PathLike) or not str(value).strip():
            raise check.invalid(origin, value, "a cassette name or path (a string)")
        cassette = marker_cassette(settings.cassette_dir, value)
    allow_hosts = settings.allow_hosts
    for value, origin in given("allow_hosts"):
        allow_hosts += check.hosts(value, origin)
    runtime_values = settings.runtime_values
    for value, origin in given("runtime_values"):
        parsed = runtime_sources(value, origin)
        runtime_values = runtime_values if parsed is None else parsed
    # The keys naming its fields are read above; the others go to its run, the marker's over the fixture's.
    own = TestSettings.__annotations__
    extra = {k: v for layer in (overrides, marker) for k, v in layer.items() if k not in own}
    return TestSettings(
        **chosen,
        cassette=cassette,
        rules=overrides.get("rules", settings.rules),
        marker_rules=marker.get("rules"),
        allow_hosts=allow_hosts,
        extra=extra,
        runtime_values=runtime_values,
    )


def runtime_sources(value: object, origin: check.Origin) -> tuple[str, ...] | None:
    """The sources a setting names (``"clock uuid random"``, a list, ``true``: all), ``()`` when it turns
    them off (``false``/``""``/``[]``/``"none"``/``"off"``), ``None`` when not given."""
    if value is None:
        return None
    if isinstance(value, bool):
        return DEFAULT_SOURCES if value else ()
    items = [value] if isinstance(value, str) else value
    unknown: list[str] = []
    if isinstance(items, Iterable) and not isinstance(items, bytes | Mapping):
        items = list(items)
        if all(isinstance(item, str) for item in items):
            parts = [p for item in items for p in item.replace(",", " ").split()]
            if len(parts) == 1 and parts[0].lower() in ("none", "off", "false", "0"):
                return ()
            unknown = [p for p in parts if p not in SOURCES]
            if not unknown:
                return tuple(s for s in SOURCES if s in parts)
    raise check.invalid(
        origin,
        value,
        'any of clock, uuid, random (a string or a list), or "" to turn it off',
        valid=SOURCES,
        detail=f"not a runtime value: {', '.join(map(repr, unknown))}" if unknown else None,
        fixes=(f'use e.g. {origin.key} = "clock uuid random", "clock", or "" to turn it off',),
    )
