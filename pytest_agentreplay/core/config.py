"""Settings: where each value comes from and which source wins. Plain Python, no pytest import.

Precedence for every setting: command line > marker (per test) > ini key ``agentreplay_<name>`` >
``[tool.agentreplay]`` in pyproject.toml > default. A marker never overrides a record mode given
explicitly on the command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..exceptions import ConfigError
from .constants import (
    DEFAULT_CASSETTE_DIR,
    DEFAULT_RECORD_MODE,
    DEFAULT_REPLAY_MODE,
    RECORD_MODES,
    REPLAY_MODES,
)

MARKER_KEYS = (
    "cassette",
    "mode",
    "rules",
    "record",
    "allow_hosts",
    "sandbox",
    "faults",
    "model",
    "agent",
    "runtime_values",
)
PROJECT_KEYS = (
    "record",
    "mode",
    "cassette_dir",
    "report",
    "model",
    "update",
    "allow_hosts",
    "save_on_failure",
    "fail_on_unused",
    "block_network",
    "isolate_subprocesses",
    "rules",
    "redact_headers",
    "redact_keys",
    "redact_patterns",
    "idempotency_header",
    "receipts",
    "openai_compatible_base_urls",
    "inline_limit",
    "runtime_values",
)


class _Fields:
    """Keyword-only value object. Not a dataclass: generating its methods costs milliseconds at every
    pytest start, and this module is imported even by sessions that never replay."""

    def __init__(self, **values: Any) -> None:
        names = _field_names(type(self))
        unknown = sorted(set(values) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(unknown)}")
        missing = sorted(n for n in names if n not in values and not hasattr(type(self), n))
        if missing:
            raise TypeError(f"{type(self).__name__} needs {', '.join(missing)}")
        for name, value in values.items():
            setattr(self, name, value)


def _field_names(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__annotations__", {}))
    return names


class Settings(_Fields):
    record: str = DEFAULT_RECORD_MODE
    record_explicit: bool = False
    mode: str = DEFAULT_REPLAY_MODE
    mode_explicit: bool = False
    update: bool = False
    cassette_dir: Path = Path(DEFAULT_CASSETTE_DIR)
    report: Path | None = None
    model: str | None = None
    allow_hosts: tuple[str, ...] = ()
    save_on_failure: bool = False
    fail_on_unused: bool = True
    block_network: bool = False
    # Children of a replaying test get their own empty network namespace (Linux): covers non-Python ones.
    isolate_subprocesses: bool = False
    rules: Any = None
    # Read-only by convention: the shared empty mapping is never mutated.
    redaction: Mapping[str, Any] = MappingProxyType({})
    http: Mapping[str, Any] = MappingProxyType({})
    inline_limit: int | None = None
    # The runtime values recorded and served (runtime_values.py): clock, uuid, random; () is off.
    runtime_values: tuple[str, ...] = ("clock", "uuid", "random")


def check_choice(name: str, value: str, choices: tuple[str, ...], source: str) -> str:
    if value not in choices:
        raise ConfigError(
            f"invalid {name} {value!r} in {source}",
            evidence=[f"valid values: {', '.join(choices)}"],
            fixes=[f"use one of: {', '.join(choices)}"],
        )
    return value


def read_pyproject_table(rootdir: Path) -> dict[str, Any]:
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    import tomllib

    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", fixes=["fix the TOML syntax"]) from exc
    table = data.get("tool", {}).get("agentreplay", {})
    if not isinstance(table, dict):
        raise ConfigError(f"[tool.agentreplay] in {path} must be a table")
    _refuse_unknown(table, PROJECT_KEYS, f"key(s) in [tool.agentreplay] of {path}", "key")
    return table


def _as_bool(name: str, value: Any, source: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
        "0",
        "false",
        "no",
        "off",
    ):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ConfigError(f"{name} in {source} must be true or false, not {value!r}", fixes=["use true or false"])


def _as_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part for part in value.replace(",", " ").split() if part)
    return tuple(str(v) for v in value)


def build_settings(
    *,
    rootdir: Path,
    cli: Mapping[str, Any],
    ini: Mapping[str, Any],
    project: Mapping[str, Any],
) -> Settings:
    """Merge command line, ini and pyproject values (each mapping holds only values that were given)."""

    def pick(name: str) -> tuple[Any, str] | None:
        for source_name, source in (
            ("the command line", cli),
            ("the ini file", ini),
            ("pyproject.toml", project),
        ):
            value = source.get(name)
            if value is not None and value != "":
                return value, source_name
        return None

    values: dict[str, Any] = {}
    if (got := pick("record")) is not None:
        values["record"] = check_choice("record mode", str(got[0]), RECORD_MODES, got[1])
        values["record_explicit"] = cli.get("record") is not None
    if (got := pick("mode")) is not None:
        values["mode"] = check_choice("replay mode", str(got[0]), REPLAY_MODES, got[1])
        values["mode_explicit"] = cli.get("mode") is not None
    if (got := pick("update")) is not None:
        values["update"] = _as_bool("update", got[0], got[1])
    if (got := pick("cassette_dir")) is not None:
        cassette_dir = Path(str(got[0]))
        values["cassette_dir"] = cassette_dir if cassette_dir.is_absolute() else rootdir / cassette_dir
    else:
        values["cassette_dir"] = rootdir / DEFAULT_CASSETTE_DIR
    if (got := pick("report")) is not None:
        report = Path(str(got[0]))
        if report.suffix not in (".md", ".json", ".html"):
            raise ConfigError(
                f"report path {report} must end in .md, .json or .html",
                evidence=["the report format is chosen by the suffix"],
                fixes=["use e.g. --agentreplay-report=drift.md"],
            )
        values["report"] = report
    if (got := pick("model")) is not None:
        values["model"] = str(got[0])
    if (got := pick("allow_hosts")) is not None:
        values["allow_hosts"] = _as_list(got[0])
    if (got := pick("save_on_failure")) is not None:
        values["save_on_failure"] = _as_bool("save_on_failure", got[0], got[1])
    if (got := pick("block_network")) is not None:
        values["block_network"] = _as_bool("block_network", got[0], got[1])
    if (got := pick("isolate_subprocesses")) is not None:
        values["isolate_subprocesses"] = _as_bool("isolate_subprocesses", got[0], got[1])
    if (got := pick("fail_on_unused")) is not None:
        values["fail_on_unused"] = _as_bool("fail_on_unused", got[0], got[1])
    values["runtime_values"] = _runtime_values(ini, project)
    if (got := pick("inline_limit")) is not None:
        try:
            values["inline_limit"] = int(got[0])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"inline_limit in {got[1]} must be an integer, not {got[0]!r}") from exc
    values["rules"] = project.get("rules")
    values["redaction"] = {
        k: project[k] for k in ("redact_headers", "redact_keys", "redact_patterns") if k in project
    }
    values["http"] = {
        k: project[k]
        for k in ("idempotency_header", "receipts", "openai_compatible_base_urls")
        if k in project
    }
    if values.get("isolate_subprocesses"):
        # Run settings reach the network guard through the HTTP settings of each run.
        values["http"] = {**values["http"], "isolate_subprocesses": True}
    return Settings(**values)


def _runtime_values(ini: Mapping[str, Any], project: Mapping[str, Any]) -> tuple[str, ...]:
    """ini ``agentreplay_runtime_values`` > ``[tool.agentreplay] runtime_values`` > all sources; an empty
    value (set, but empty) turns it off, which ``pick`` would read as not given."""
    default: tuple[str, ...] = Settings.runtime_values
    if ini.get("runtime_values") is None and project.get("runtime_values") is None:
        return default
    from .runtime_values import parse_sources

    for where, source in (("the ini file", ini), ("pyproject.toml", project)):
        parsed = parse_sources(source.get("runtime_values"), where)
        if parsed is not None:
            return parsed
    return default


class TestSettings(_Fields):
    """The settings of one test after the marker and the ``agentreplay_config`` fixture are applied."""

    record: str
    mode: str
    update: bool
    cassette: Path
    rules: Any
    marker_rules: Any
    allow_hosts: tuple[str, ...]
    model: str | None
    extra: Mapping[str, Any]
    runtime_values: tuple[str, ...] = ("clock", "uuid", "random")


def marker_kwargs(marks: list[Mapping[str, Any]], nodeid: str) -> dict[str, Any]:
    """Merge the kwargs of the test's ``agentreplay`` marks (closest mark wins) and validate them."""
    merged: dict[str, Any] = {}
    for kwargs in reversed(marks):
        merged.update(kwargs)
    _refuse_unknown(merged, MARKER_KEYS, f"argument(s) to @pytest.mark.agentreplay on {nodeid}", "argument")
    return merged


def _refuse_unknown(given: Iterable[str], valid: Sequence[str], what: str, noun: str) -> None:
    """A ``ConfigError`` naming every name of ``given`` that ``valid`` lacks, and listing the valid ones."""
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown {what}: {', '.join(unknown)}",
            evidence=[f"valid {noun}s: {', '.join(valid)}"],
            fixes=[f"remove or rename the {noun}"],
        )


def marker_cassette(cassette_dir: Path, named: Any) -> Path:
    """The path a marker's ``cassette=`` names: relative to the cassette folder, ``.json`` added."""
    cassette = Path(str(named))
    if not cassette.is_absolute():
        cassette = cassette_dir / cassette
    if cassette.suffix != ".json":
        cassette = cassette.with_name(cassette.name + ".json")
    return cassette


def resolve_test_settings(
    settings: Settings,
    *,
    nodeid: str,
    marker: Mapping[str, Any],
    overrides: Mapping[str, Any],
    default_cassette: Path,
) -> TestSettings:
    """Apply a test's marker and fixture overrides (``agentreplay_config``) on top of the session settings."""
    source = f"@pytest.mark.agentreplay on {nodeid}"
    record = settings.record
    if not settings.record_explicit:
        for given, where in ((overrides.get("record"), "agentreplay_config"), (marker.get("record"), source)):
            if given is not None:
                record = check_choice("record mode", str(given), RECORD_MODES, where)
    mode = settings.mode
    if not settings.mode_explicit:
        for given, where in ((overrides.get("mode"), "agentreplay_config"), (marker.get("mode"), source)):
            if given is not None:
                mode = check_choice("replay mode", str(given), REPLAY_MODES, where)
    cassette = default_cassette
    if marker.get("cassette") is not None:
        cassette = marker_cassette(settings.cassette_dir, marker["cassette"])
    allow_hosts = (
        settings.allow_hosts + _as_list(overrides.get("allow_hosts")) + _as_list(marker.get("allow_hosts"))
    )
    model = settings.model if settings.model is not None else marker.get("model", overrides.get("model"))
    extra = {
        k: v
        for k, v in overrides.items()
        if k not in ("record", "mode", "allow_hosts", "model", "rules", "runtime_values")
    }
    runtime_values = settings.runtime_values
    if "runtime_values" in overrides or "runtime_values" in marker:
        from .runtime_values import parse_sources

        for given, where in (
            (overrides.get("runtime_values"), "agentreplay_config"),
            (marker.get("runtime_values"), source),
        ):
            parsed = parse_sources(given, where)
            if parsed is not None:
                runtime_values = parsed
    for key in ("sandbox", "faults", "agent"):
        if key in marker:
            extra = {**extra, key: marker[key]}
    return TestSettings(
        record=record,
        mode=mode,
        update=settings.update,
        cassette=cassette,
        rules=overrides.get("rules", settings.rules),
        marker_rules=marker.get("rules"),
        allow_hosts=allow_hosts,
        model=model,
        extra=extra,
        runtime_values=runtime_values,
    )
