"""The settings table: every setting once, with the places it may be given, its values, default and help;
the options, ini twins, marker help and the keys ``config.py`` accepts are made from it. Plain Python (no
pytest, no dataclass: it loads at every pytest start)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final, Literal, TypeVar

from . import settings_check as checks
from .constants import (
    DEFAULT_CASSETTE_DIR,
    DEFAULT_ISOLATE_MODE,
    DEFAULT_RECORD_MODE,
    DEFAULT_REPLAY_MODE,
    DEFAULT_SOURCES,
    DEFAULT_TRANSPORT_HEADERS,
    INLINE_PAYLOAD_LIMIT,
    ISOLATE_MODES,
    RECORD_MODES,
    REPLAY_MODES,
    TRANSPORT_HEADER_CHOICES,
)
from .settings_check import ini_key as ini_key
from .settings_check import option_flag as option_flag

# Where a setting may be given: the option ``--agentreplay-<name with dashes>``; the key
# ``agentreplay_<name>`` of pytest's ini file; the key ``<name>`` of ``[tool.agentreplay]`` in
# pyproject.toml; the keyword ``<name>=`` of ``@pytest.mark.agentreplay``; the key ``<name>`` of the dict
# the ``agentreplay_config`` fixture returns.
CLI: Final = "cli"
INI: Final = "ini"
PROJECT: Final = "project"
MARKER: Final = "marker"
FIXTURE: Final = "fixture"
PLACES: Final = (CLI, INI, PROJECT, MARKER, FIXTURE)


# A value's check: (value, where it was given) -> the value as read; raises ``ConfigError``.
Check = Callable[[object, checks.Origin], object]


class Setting:
    """One setting. ``places``: where it may be given (names of :data:`PLACES`, space-separated);
    ``choices``: its valid values when it takes one of a few, which errors call a ``noun``; ``flag``: a
    boolean (a store_true option, a bool ini key); ``metavar``: its value in ``--help``; ``default``: the
    value when nothing is given (None: none, or nothing to say); ``check``: the check of a value given
    (a choice's and a flag's are made from them; ``config.py`` checks the others itself)."""

    __slots__ = ("check", "choices", "default", "flag", "help", "metavar", "name", "noun", "places")

    def __init__(
        self,
        name: str,
        places: str,
        help: str,
        *,
        default: object = None,
        choices: tuple[str, ...] = (),
        noun: str = "",
        flag: bool = False,
        metavar: str | None = None,
        check: Check | None = None,
    ) -> None:
        self.name = name
        self.places = frozenset(places.split())
        unknown = self.places - set(PLACES)
        if unknown:
            raise ValueError(f"setting {name}: unknown place(s) {', '.join(sorted(unknown))}")
        self.help = help
        self.default = default
        self.choices = choices
        self.noun = noun
        self.flag = flag
        self.metavar = metavar
        if choices:
            check = partial(checks.choice, choices=choices, what=noun)
        elif flag:
            check = checks.boolean
        self.check = check

    def help_text(self, place: str = CLI) -> str:
        """The help of the option, or of the ini key (``place=INI``): values, default, who wins."""
        notes = []
        if self.choices and place != CLI:  # argparse shows an option's choices itself
            notes.append("one of " + ", ".join(self.choices))
        if self.default is not None and self.default is not False:
            notes.append(f"default {shown_default(self.default)}")
        if place == INI and CLI in self.places:
            notes.append("the command line wins")
        return f"{self.help} ({'; '.join(notes)})" if notes else self.help

    def option_arguments(self) -> dict[str, object]:
        """The keyword arguments of ``parser.addoption``. No default: None means not given."""
        arguments: dict[str, object] = {"dest": ini_key(self.name), "default": None, "help": self.help_text()}
        if self.flag:
            arguments["action"] = "store_true"
        if self.choices:
            arguments["choices"] = self.choices
        if self.metavar:
            arguments["metavar"] = self.metavar
        return arguments

    @property
    def ini_type(self) -> Literal["bool", "string"]:
        """The type of its ini key (``parser.addini``): ini values are strings, or booleans for a flag."""
        return "bool" if self.flag else "string"


def shown_default(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return " ".join(map(str, value))
    return str(value)


_ANYWHERE = "cli ini project marker fixture"
_SESSION = "cli ini project"

# In the order ``--help`` lists the options and the docs the settings.
# fmt: off
SETTINGS: Final[tuple[Setting, ...]] = (
    Setting("cassette", MARKER,
            "the cassette this test replays, named explicitly (in the cassette folder, .json added)"),
    Setting("record", _ANYWHERE, "record cassettes: the missing ones, or all, or from each test's first "
            "changed call on (drifted); none replays only",
            default=DEFAULT_RECORD_MODE, choices=RECORD_MODES, noun="record mode"),
    Setting("mode", _ANYWHERE, "replay mode",
            default=DEFAULT_REPLAY_MODE, choices=REPLAY_MODES, noun="replay mode"),
    Setting("update", _SESSION,
            "accept drift: rewrite drifting cassettes from the replayed run, remove unused ones",
            flag=True, default=False),
    Setting("pending", _SESSION, "write a drifting test's replayed run beside its cassette as "
            "<name>.pending.json, for agentreplay review (not given: on unless the CI variable is set)",
            flag=True),
    Setting("cassette_dir", _SESSION, "cassette folder, relative to the rootdir",
            default=DEFAULT_CASSETTE_DIR, metavar="DIR"),
    Setting("report", _SESSION, "write the drift report (.md, .json or .html) into an existing folder",
            metavar="PATH"),
    Setting("model", _ANYWHERE, "model-comparison: replace the model of each live model call",
            metavar="NAME", check=lambda v, o: checks.text(v, o, "a model name (a string)")),
    Setting("allow_hosts", _ANYWHERE, "hosts replay may connect to, comma-separated (e.g. localhost)",
            metavar="HOSTS", check=checks.hosts),
    Setting("save_on_failure", _SESSION, "also write the cassette when a recording test fails",
            flag=True, default=False),
    Setting("block_network", _SESSION, "refuse outbound connections in every test of the session, not only "
            "in replaying ones (allowed hosts still pass)", flag=True, default=False),
    Setting("isolate_subprocesses", _SESSION, "Linux: run child processes started during a replay in an "
            "empty network namespace, so programs that are not Python (curl) cannot reach the network either",
            flag=True, default=False),
    Setting("isolate", _SESSION, "Linux: run a replay session in its own network namespace (loopback only, "
            "native code and every child included): off, auto (where the kernel allows; the summary says why "
            "not), required (fail the session where it cannot)",
            default=DEFAULT_ISOLATE_MODE, choices=ISOLATE_MODES, noun="network isolation level"),
    Setting("tolerated_hosts", "ini project", "hosts whose unmatched calls in replay are refused without "
            "failing the test (libraries' own telemetry and metadata fetches; listed in the summary)",
            check=checks.hosts),
    Setting("fail_on_unused", "ini project", "fail the session when cassettes no test uses remain",
            flag=True, default=True),
    Setting("mcp_effects", "ini project marker fixture", "MCP tools' effect classes over their annotations: "
            '"tool=read server/tool=write" (a table in pyproject.toml, a dict on the marker)',
            check=checks.effect_map),
    Setting("transport_headers", PROJECT, "request headers the HTTP stack or the SDK version chooses, in "
            "cassettes written: auto (left out of new cassettes, kept in one that holds them), drop, keep",
            default=DEFAULT_TRANSPORT_HEADERS, choices=TRANSPORT_HEADER_CHOICES,
            noun="transport headers setting"),
    Setting("runtime_values", "ini project marker fixture",
            "runtime values recorded and served in replay: any of clock uuid random; empty turns it off",
            default=DEFAULT_SOURCES),
    Setting("rules", "project marker fixture", "drift rules, on top of the replay mode's defaults"),
    Setting("redact_headers", PROJECT, "header names redacted besides the built-in ones"),
    Setting("redact_keys", PROJECT,
            "JSON key names (or full-match regexes) redacted besides the built-in ones"),
    Setting("redact_patterns", PROJECT, "value patterns (regexes) redacted besides the built-in ones"),
    Setting("idempotency_header", "project fixture", "the request header carrying a write's idempotency key",
            default="idempotency-key", check=lambda v, o: checks.text(v, o, "a header name")),
    Setting("receipts", "project fixture",
            "per host, where a write's receipt is: a JSON path into the response body or a header name",
            check=lambda v, o: checks.string_map(v, o, "a table of host = JSON path or header name, e.g. "
                                                 'receipts = { "api.example" = "data.id" }')),
    Setting("openai_compatible_base_urls", "project fixture", "base URLs of OpenAI-compatible servers",
            check=lambda v, o: checks.strings(v, o, urls=True)),
    Setting("inline_limit", PROJECT, "size in bytes above which a payload goes to the blob store",
            default=INLINE_PAYLOAD_LIMIT, check=checks.count),
    Setting("agent", "marker fixture", "the agent name stored in the run"),
    Setting("sandbox", "marker fixture", "sandbox mode: recorded base URL -> sandbox base URL"),
    Setting("sandbox_hosts", FIXTURE, "sandbox mode: hosts of the sandbox services"),
    Setting("faults", "marker fixture", "sandbox mode: the faults to inject"),
    Setting("tool_names", FIXTURE,
            "host or host+path prefix -> the tool name recorded for HTTP calls under it"),
    Setting("anthropic_base_urls", FIXTURE, "base URLs of Anthropic-compatible servers"),
    Setting("model_data_class", FIXTURE, "data class of model payloads", default="personal"),
    Setting("http_data_class", FIXTURE, "data class of HTTP payloads", default="internal"),
    Setting("allow_read_repeats", FIXTURE, "serve a read again once every recorded one was played",
            flag=True, default=True),
    Setting("repeat", _ANYWHERE, "model-comparison: run each test N times live; its agreement rate, "
            "with a Wilson confidence interval, decides it", default=1, metavar="N", check=checks.repeat),
    Setting("min_agreement", "ini project marker fixture", "model-comparison with repeats: the agreement "
            "rate a test must reach (its interval wholly below fails it, wholly above passes it)",
            default=0.9, check=checks.share),
    Setting("live_reads", "ini project marker fixture", "model-comparison: send a read the cassette holds no "
            "result for, so the run continues past the first divergence (writes are never sent)",
            flag=True, default=False),
    Setting("prices", PROJECT, "US dollars per million tokens by model, over the built-in price table: "
            '"gpt-4o" = {input = 2.5, output = 10.0, cached = 1.25}'),
)
# fmt: on

BY_NAME: Final = {setting.name: setting for setting in SETTINGS}


def keys(place: str) -> tuple[str, ...]:
    """The names of the settings that may be given in ``place``, in table order."""
    return tuple(setting.name for setting in SETTINGS if place in setting.places)


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., object])


def default(name: str, kind: type[T]) -> T:
    """The default the table states for ``name``, as a typed field's default: the table is the one list of
    defaults. A ``TypeError`` (at import) when it is not a ``kind``."""
    value = BY_NAME[name].default
    if not isinstance(value, kind):
        raise TypeError(f"the settings table's default of {name} is not a {kind.__name__}: {value!r}")
    return value


OPTION_NAMES: Final = keys(CLI)
INI_NAMES: Final = keys(INI)
PROJECT_KEYS: Final = keys(PROJECT)
MARKER_KEYS: Final = keys(MARKER)
FIXTURE_KEYS: Final = keys(FIXTURE)


def marker_help() -> str:
    """The ``agentreplay`` marker's line in ``pytest --markers``: every keyword it takes."""
    keywords = ", ".join(f"{name}=None" for name in MARKER_KEYS)
    return (
        f"agentreplay({keywords}): record or replay this test (the marker alone activates it); "
        "the command line wins"
    )


def fixture_help(fixture: F) -> F:
    """Give the ``agentreplay_config`` fixture its docstring (``pytest --fixtures``): every key it takes."""
    import textwrap  # free: pytest loaded it before its plugins

    keys = f"Keys: {', '.join(FIXTURE_KEYS)}."
    wins = "The marker wins over this fixture; the command line wins over both."
    fixture.__doc__ = (
        "Per-directory overrides of agent replay settings; override this fixture in a conftest.py.\n\n"
        + textwrap.fill(f"{keys} {wins}", width=106)
    )
    return fixture
