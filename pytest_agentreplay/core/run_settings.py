"""The settings one run reads (HTTP layer, replay modes, guard), one typed field each, built once per run
and never changed (``_replace`` makes another). A NamedTuple: a frozen dataclass this wide costs eight times
as much at start-up."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from . import settings_check as check
from .documents import Document
from .setting_keys import default

# The project's ``pytest_agentreplay_classify_exchange`` hook: (request payload, response payload or
# None) -> "model", "read", "write" or None (the built-in rules decide).
ClassifyHook = Callable[[Document, Document | None], str | None]

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})
_FIXTURE_PLACE: Final = "the agentreplay_config fixture"


class RunSettings(NamedTuple):
    """One run's settings; a field named after a setting means what ``setting_keys.SETTINGS`` says of it."""

    # The test's node id (None outside pytest): named in errors and in the fixes they suggest.
    nodeid: str | None = None
    allow_hosts: tuple[str, ...] = ()
    # None: all of them, (): none.
    runtime_values: tuple[str, ...] | None = None
    classify_hook: ClassifyHook | None = None
    # model-comparison: the model live calls are sent with instead of the recorded one.
    model_override: str | None = None
    # Lower case: headers are matched lower-cased.
    idempotency_header: str = default("idempotency_header", str)
    receipts: Mapping[str, str] = _EMPTY
    mcp_effects: Mapping[str, str] = _EMPTY
    tool_names: Mapping[str, str] = _EMPTY
    openai_compatible_base_urls: tuple[str, ...] = ()
    anthropic_base_urls: tuple[str, ...] = ()
    model_data_class: str = default("model_data_class", str)
    http_data_class: str = default("http_data_class", str)
    allow_read_repeats: bool = default("allow_read_repeats", bool)
    # sandbox and faults as given: checked when the run first needs them (replay/sandbox.py,
    # replay/faults.py), so a bad value fails that test, not the session.
    sandbox: object = None
    sandbox_hosts: frozenset[str] = frozenset()
    faults: object = None
    isolate_subprocesses: bool = False
    # The run only blocks the network (--agentreplay-block-network outside a replaying test): its
    # refusals say so.
    block_network_only: bool = False
    tolerated_hosts: tuple[str, ...] = ()
    live_reads: bool = False
    # The session's providers (``http.providers.ProviderSet``, a layer above: narrowed where it is read);
    # None: the built-in ones.
    providers: object = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> RunSettings:
        """The settings ``values`` name (the keys of :meth:`with_overrides`, and the typed fields by name)."""
        # Made at once, not the defaults replaced: the guard makes one at every replaying test's start.
        return cls(**_converted(values, _FIXTURE_PLACE))  # type: ignore[arg-type]

    def with_overrides(self, values: Mapping[str, object], place: str = _FIXTURE_PLACE) -> RunSettings:
        """These settings with the values a test gives (its ``agentreplay_config`` fixture, its marker's
        ``sandbox``/``faults``) on top, each converted the way the run reads it. Keys that are not run
        settings (``agent``...) are ignored: the test's own settings read them."""
        changes = _converted(values, place)
        return self._replace(**changes) if changes else self  # type: ignore[arg-type]


def _converted(values: Mapping[str, object], place: str) -> dict[str, object]:
    changes: dict[str, object] = {}
    for name, value in values.items():
        convert = _CONVERSIONS.get(name)
        if convert is not None:
            changes[name] = convert(value, check.Origin(name, place))
        elif name in _TYPED:
            changes[name] = value
    return changes


def _text(value: object, origin: check.Origin) -> str:
    """The value as text; an empty one is none given: the field's default."""
    return str(value or RunSettings._field_defaults[origin.key])


def _string_map(value: object, origin: check.Origin) -> Mapping[str, str]:
    if not value:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise check.invalid(origin, value, 'a table of strings, e.g. {"api.example": "data.id"}')
    # An empty rule is no rule: a lookup then falls back as if the host were not named.
    return MappingProxyType({str(k): str(v) for k, v in value.items() if v})


def _urls(value: object, origin: check.Origin) -> tuple[str, ...]:
    # The project file's check, so a base URL is held to http(s):// wherever it is given.
    return tuple(check.strings(value, origin, urls=True)) if value else ()


_CONVERSIONS: Final[Mapping[str, Callable[[object, check.Origin], object]]] = MappingProxyType(
    {
        "idempotency_header": lambda value, origin: _text(value, origin).lower(),
        "receipts": _string_map,
        "tool_names": _string_map,
        "mcp_effects": lambda value, origin: (
            MappingProxyType(check.effect_map(value, origin)) if value else _EMPTY
        ),
        "openai_compatible_base_urls": _urls,
        "anthropic_base_urls": _urls,
        "model_data_class": _text,
        "http_data_class": _text,
        "allow_read_repeats": lambda value, _origin: bool(value),
        "sandbox_hosts": lambda value, _origin: frozenset(
            str(host).lower() for host in (value if value and isinstance(value, Iterable) else ())
        ),
        "isolate_subprocesses": lambda value, _origin: bool(value),
        "block_network_only": lambda value, _origin: bool(value),
        "tolerated_hosts": lambda value, origin: check.hosts(value, origin) if value else (),
        "live_reads": check.boolean,
    }
)
# Fields taken as they are: given typed by the session, or (sandbox, faults) checked where the run reads them.
_TYPED: Final = frozenset(RunSettings._fields) - set(_CONVERSIONS)
