"""A session's providers: the ``pytest_agentreplay_providers`` hook's, those of the entry point group
``pytest_agentreplay.providers``, then the built-in ones (the first that recognises a request reads it).
Built once per session, when a test first needs them, and kept in each run's settings.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from typing import Final

from ...exceptions import ConfigError
from . import BUILTIN, ProviderSet
from .interface import ENTRY_POINT_GROUP, Provider, as_input_fields

_REQUIRED: Final = ("match", "request_fields", "response_fields")


def check_provider(candidate: object, origin: str) -> Provider:
    """``candidate`` as a provider (a class is instantiated with no arguments), or a ``ConfigError`` naming
    ``origin`` (where it came from) and what it lacks."""
    value = candidate
    if isinstance(candidate, type):
        try:
            value = candidate()
        except Exception as exc:
            raise _bad(origin, candidate, [f"instantiating it raised {type(exc).__name__}: {exc}"]) from exc
    problems: list[str] = []
    name = getattr(value, "NAME", None)
    if not isinstance(name, str) or not name.strip():
        problems.append(f"NAME is {name!r}, not a non-empty string (the provider named on its events)")
    problems.extend(
        f"{member} is missing or not callable"
        for member in _REQUIRED
        if not callable(getattr(value, member, None))
    )
    declared = getattr(value, "INPUT_FIELDS", None)
    if declared is not None and as_input_fields(declared) is None:
        problems.append(f"INPUT_FIELDS is {declared!r}, not a pytest_agentreplay.InputFields")
    model_from_request = getattr(value, "model_from_request", None)
    if model_from_request is not None and not callable(model_from_request):
        problems.append("model_from_request is not callable")
    if problems:
        raise _bad(origin, candidate, problems)
    assert isinstance(value, Provider)
    return value


def _bad(origin: str, candidate: object, problems: list[str]) -> ConfigError:
    return ConfigError(
        f"{origin} gave {candidate!r}, which is not a pytest-agentreplay provider",
        evidence=problems,
        fixes=[
            "give an object with NAME, match(request, settings), request_fields(endpoint, body) and "
            "response_fields(endpoint, body) (see pytest_agentreplay.Provider), or a class of them",
        ],
    )


def entry_point_providers() -> list[Provider]:
    """The providers installed distributions register (group ``pytest_agentreplay.providers``); a
    ``ConfigError`` names the distribution whose entry point does not load or is not a provider."""
    out: list[Provider] = []
    found = metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry in sorted(found, key=lambda e: (_distribution(e), e.name)):
        origin = f"entry point {entry.name!r} ({entry.value}) of the distribution {_distribution(entry)}"
        try:
            loaded = entry.load()
        except Exception as exc:
            raise ConfigError(
                f"the {origin} could not be loaded",
                evidence=[f"{type(exc).__name__}: {exc}"],
                fixes=[
                    f"fix or upgrade {_distribution(entry)}, or uninstall it",
                    f"its entry point is in the group {ENTRY_POINT_GROUP!r}",
                ],
            ) from exc
        out.append(check_provider(loaded, origin))
    return out


def _distribution(entry: metadata.EntryPoint) -> str:
    dist = entry.dist
    if dist is None:
        return "(unknown distribution)"
    return f"{dist.metadata['Name'] or dist.name} {dist.version}"


def session_providers(
    from_hooks: Iterable[Iterable[object] | None], installed: Iterable[Provider]
) -> ProviderSet:
    """The providers of a session: ``from_hooks`` (each ``pytest_agentreplay_providers`` result), then
    ``installed`` (entry points), then the built-in ones. Two providers of one name from the hooks or entry
    points are a ``ConfigError``; one named like a built-in replaces it."""
    own: list[Provider] = []
    for result in from_hooks:
        if result is None:
            continue
        if isinstance(result, str | bytes) or not isinstance(result, Iterable):
            raise ConfigError(
                f"pytest_agentreplay_providers returned {result!r}, not a list of providers",
                fixes=["return a list: [MyProvider()] (or None to add none)"],
            )
        own.extend(check_provider(item, "pytest_agentreplay_providers") for item in result)
    added = [*own, *installed]
    seen: dict[str, Provider] = {}
    for provider in added:
        before = seen.setdefault(provider.NAME, provider)
        if before is not provider:
            raise ConfigError(
                f"two providers are named {provider.NAME!r}",
                evidence=[f"first: {before!r}", f"then: {provider!r}"],
                fixes=["give each provider its own NAME (it is the provider named on its model.call events)"],
            )
    return ProviderSet([*added, *BUILTIN])
