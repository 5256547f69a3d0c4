"""Each setting's value checked where it is read: a wrong one is a ``ConfigError`` naming the key as
written and its place, what was given and expected, and what to write instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path

from ..exceptions import ConfigError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def option_flag(name: str) -> str:
    return "--agentreplay-" + name.replace("_", "-")


def ini_key(name: str) -> str:
    """The ini key of a setting, also the ``dest`` of its option: ``config.getoption`` reads it by that."""
    return "agentreplay_" + name


class Origin:
    """Where one value was given: the key as the user wrote it and the place holding it. The place may be
    worked out lazily: naming the table of a pyproject.toml reads the file, which only an error needs."""

    __slots__ = ("_place", "key", "preposition")

    def __init__(self, key: str, place: str | Callable[[], str], preposition: str = "in") -> None:
        self.key = key
        self._place = place
        self.preposition = preposition

    @property
    def place(self) -> str:
        if callable(self._place):
            self._place = self._place()
        return self._place

    def __str__(self) -> str:
        return f"{self.key} {self.preposition} {self.place}"


class Places:
    """The places of one session's sources: the command line, the ini file, ``[tool.agentreplay]``."""

    def __init__(
        self,
        *,
        ini_file: Path | None = None,
        ini_overrides: Collection[str] = (),
        pyproject: Path | None = None,
    ) -> None:
        self.ini_file = ini_file
        # ini keys given with -o/--override-ini: they come from the command line, not from the file.
        self.ini_overrides = frozenset(ini_overrides)
        self.pyproject = pyproject

    def origin(self, source: str, name: str) -> Origin:
        if source == "cli":
            return Origin(option_flag(name), "the command line", "on")
        if source == "ini":
            key = ini_key(name)
            if key in self.ini_overrides:
                return Origin(key, "the command line (-o/--override-ini)", "on")
            ini_file = self.ini_file
            if ini_file is None:
                return Origin(key, "the ini file")
            return Origin(key, lambda: f"{pytest_table(ini_file)} of {ini_file}")
        return Origin(name, project_place(self.pyproject))


def project_place(pyproject: Path | None) -> str:
    return f"[tool.agentreplay] of {pyproject or 'pyproject.toml'}"


def pytest_table(ini_file: Path) -> str:
    """The table of ``ini_file`` pytest reads its settings from (only called to word an error)."""
    if ini_file.name == "setup.cfg":
        return "[tool:pytest]"
    if ini_file.name != "pyproject.toml":
        return "[pytest]"
    import tomllib  # heavy for start-up: only an error message reads the ini file's TOML

    try:
        with ini_file.open("rb") as fh:
            tool_pytest = tomllib.load(fh).get("tool", {}).get("pytest", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "[tool.pytest.ini_options]"
    # pytest 9 also reads a native [tool.pytest] table.
    has_ini_options = isinstance(tool_pytest, dict) and "ini_options" in tool_pytest
    return "[tool.pytest.ini_options]" if has_ini_options else "[tool.pytest]"


def _kind(value: object) -> str:
    for kind, noun in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (Mapping, "a table"),
        (list | tuple, "a list"),
    ):
        if isinstance(value, kind):
            return noun
    return "None" if value is None else f"a {type(value).__name__}"


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def invalid(
    origin: Origin,
    value: object,
    expected: str,
    *,
    valid: Sequence[str] = (),
    detail: str | None = None,
    fixes: Sequence[str] = (),
) -> ConfigError:
    """The error for a value of the wrong type or range: key, place, what was given and what is expected."""
    evidence = [f"given: {shown(value)} ({_kind(value)})", f"expected: {expected}"]
    if detail:
        evidence.append(detail)
    if valid:
        evidence.append(f"valid values: {', '.join(valid)}")
    return ConfigError(
        f"invalid {origin.key} {shown(value)} {origin.preposition} {origin.place}",
        evidence=evidence,
        place=origin.place,
        fixes=tuple(fixes) or (f"set {origin.key} to {expected}", f"or remove {origin.key}"),
    )


def unreadable(origin: Origin, problem: str, expected: str) -> ConfigError:
    """An ini value pytest itself refused to convert (a bool that is not one, a TOML list for a string)."""
    return ConfigError(
        f"invalid {origin}",
        evidence=[f"pytest cannot read it: {problem}", f"expected: {expected}"],
        place=origin.place,
        fixes=(f"set {origin.key} to {expected}", f"or remove {origin.key}"),
    )


def refuse_unknown(given: Iterable[object], valid: Sequence[str], what: str, noun: str, place: str) -> None:
    """A ``ConfigError`` naming every name of ``given`` that ``valid`` lacks, with the closest valid one."""
    unknown = sorted(str(name) for name in given if name not in valid)
    if not unknown:
        return
    import difflib  # heavy for start-up: only a misspelt name needs it

    fixes = []
    for name in unknown:
        for match in difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6):
            fixes.append(f"did you mean {match!r}? rename {name!r} to {match!r}")
    fixes.append(f"remove the {noun}{'s' if len(unknown) > 1 else ''} or use one of the valid {noun}s")
    raise ConfigError(
        f"unknown {what}: {', '.join(unknown)} in {place}",
        evidence=[f"valid {noun}s: {', '.join(valid)}"],
        place=place,
        fixes=fixes,
    )


def choice(value: object, origin: Origin, choices: Sequence[str], what: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise invalid(origin, value, f"a {what}: one of {', '.join(choices)}", valid=choices)


def boolean(value: object, origin: Origin) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise invalid(origin, value, "true or false")


def text(value: object, origin: Origin, expected: str) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise invalid(origin, value, expected)


def folder(value: object, origin: Origin, base: Path) -> Path:
    """A folder path (relative to ``base``); it may not exist yet, but it must not be a file."""
    if isinstance(value, PathLike):
        value = str(Path(value))
    path = base / text(value, origin, "a folder path (a string), e.g. cassettes")  # an absolute one stays
    if path.is_file():
        raise invalid(origin, value, "a folder path", detail=f"{path} is a file")
    return path


def hosts(value: object, origin: Origin) -> tuple[str, ...]:
    """Host names: a string (comma- or space-separated) or a list of strings."""
    expected = 'a host name or a list of them, e.g. ["localhost", "*.internal.example"]'
    if isinstance(value, str):
        return tuple(part for part in value.replace(",", " ").split() if part)
    if isinstance(value, list | tuple) and all(isinstance(h, str) and h.strip() for h in value):
        return tuple(h.strip() for h in value)
    raise invalid(origin, value, expected)


def strings(value: object, origin: Origin, *, regex: bool = False, urls: bool = False) -> list[str]:
    """A list of strings (one string counts as a list of it); regular expressions or URLs when asked."""
    noun = "regular expression" if regex else "base URL" if urls else "string"
    expected = f'a list of {noun}s, e.g. {origin.key} = ["..."]'
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise invalid(origin, value, expected)
    for item in items:
        if regex:
            try:
                re.compile(item)
            except re.error as exc:
                raise invalid(origin, value, expected, detail=f"{item!r} is not valid: {exc}") from None
        if urls and not item.startswith(("http://", "https://")):
            raise invalid(origin, value, expected, detail=f"{item!r} does not start with http:// or https://")
    return list(items)


def string_map(value: object, origin: Origin, expected: str) -> dict[str, str]:
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    raise invalid(origin, value, expected)


EFFECT_MAP_EXPECTED = 'a table of tool name (or "server/tool") = "read" or "write"'


def effect_map(value: object, origin: Origin) -> dict[str, str]:
    """Tool name (or ``server/tool``) -> ``read`` or ``write``: the effect class of MCP tools, overriding
    their annotations. Also ``"name=read other=write"`` (an ini line)."""
    if isinstance(value, str):
        pairs: dict[str, object] = {}
        for item in value.replace(",", " ").split():
            name, sep, kind = item.partition("=")
            if not sep or not name:
                raise invalid(
                    origin, value, EFFECT_MAP_EXPECTED, detail=f"not name=read or name=write: {item!r}"
                )
            pairs[name] = kind
        value = pairs
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise invalid(origin, value, EFFECT_MAP_EXPECTED)
    for name, kind in value.items():
        if kind not in ("read", "write"):
            raise invalid(
                origin,
                value,
                EFFECT_MAP_EXPECTED,
                valid=("read", "write"),
                detail=f"the effect of {name!r} is {shown(kind)}",
            )
    return {str(k): str(v) for k, v in value.items()}


def count(
    value: object,
    origin: Origin,
    low: int = 0,
    high: int | None = None,
    expected: str = "a whole number >= 0",
) -> int:
    """A whole number from ``low`` (to ``high``), a string of digits too: ini values are strings."""
    number = value.strip() if isinstance(value, str) else value
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if isinstance(number, int) and not isinstance(number, bool) and low <= number <= (high or number):
        return number
    raise invalid(origin, value, expected)


# More runs than this is a benchmark, not a test: a typo (1000 for 10) would call the model a thousand times.
MAX_REPEAT = 200


def repeat(value: object, origin: Origin) -> int:
    return count(value, origin, 1, MAX_REPEAT, f"a whole number of runs from 1 to {MAX_REPEAT}")


def share(value: object, origin: Origin) -> float:
    """A rate from 0 to 1 (``0.9``; ``"90%"`` too)."""
    number: object = value
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            number = None
    if isinstance(number, int | float) and not isinstance(number, bool) and 0 <= number <= 1:
        return float(number)
    raise invalid(origin, value, 'a rate from 0 to 1, e.g. 0.9 (or "90%")')


def report_path(value: object, origin: Origin, base: Path, *, check_folder: bool) -> Path:
    """The session report: ``.md``, ``.json`` or ``.html``, in a folder that exists (no folder is created
    for it: a typo would otherwise put the report where nobody looks)."""
    if isinstance(value, PathLike):
        value = str(Path(value))
    path = Path(text(value, origin, "a file path ending in .md, .json or .html"))
    if path.suffix.lower() not in (".md", ".json", ".html"):
        raise invalid(
            origin,
            value,
            "a file path ending in .md, .json or .html",
            detail="the report path must end in .md, .json or .html: the suffix chooses the format",
            fixes=(f"use e.g. {origin.key}=drift.md",),
        )
    path = base / path  # an absolute one stays as it is
    if check_folder and not path.parent.is_dir():
        raise invalid(
            origin,
            value,
            "a file path in a folder that exists",
            detail=f"the folder {path.parent} does not exist (it is not created for the report)",
            fixes=(f"create the folder: mkdir -p {path.parent}", "or name a path in an existing folder"),
        )
    if check_folder and path.is_dir():
        raise invalid(origin, value, "a file path", detail=f"{path} is a folder")
    return path
