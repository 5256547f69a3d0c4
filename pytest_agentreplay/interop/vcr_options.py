"""vcrpy's options in a ``vcr_config`` (and ``@pytest.mark.vcr`` keywords), and pytest-recording's host
patterns (no pytest or vcrpy import). Every ``vcr.VCR.use_cassette`` option is in exactly one table:
:data:`APPLIED` (handed to vcrpy or used to find the cassette), :data:`NOTHING_TO_APPLY` (recording or
decorator options a replay ignores, with the reason) or :data:`REFUSED` (a ``ConfigError`` saying what to
do instead). Any other key is ignored, as vcrpy and pytest-recording ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..exceptions import ConfigError

# Keys pytest-recording reads itself (never handed to vcrpy).
PYTEST_RECORDING_KEYS: Final = frozenset({"record_mode", "allowed_hosts", "serializer", "allow_private_ips"})

APPLIED: Final = frozenset(
    {
        "serializer",
        "persister",
        "match_on",
        "additional_matchers",
        "record_mode",
        "before_record_request",
        "before_record",
        "before_record_response",
        "decode_compressed_response",
        "filter_headers",
        "filter_query_parameters",
        "filter_post_data_parameters",
        "filter_nested_post_data_parameters",
        "filter_sensitive_data",
        "ignore_hosts",
        "ignore_localhost",
        "allow_playback_repeats",
        "after_load_interaction",
        "path_transformer",
        "cassette_library_dir",
    }
)

NOTHING_TO_APPLY: Final[Mapping[str, str]] = {
    "record_on_exception": "vcrpy reads it when it saves a cassette; a replayed cassette is never saved",
    "drop_unused_requests": "vcrpy reads it when it saves a cassette; a replayed cassette is never saved",
    "before_save_interaction": "vcrpy runs it when it saves a cassette; a replayed cassette is never saved",
    "inject_cassette": "vcrpy reads it for its decorator only; pytest-recording uses a context manager",
    "func_path_generator": "vcrpy reads it for its decorator only; pytest-recording names the cassette",
    "custom_patches": "vcrpy repoints module references to its own client classes; this plugin patches "
    "the client classes themselves, which every reference reaches",
}

REFUSED: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "skip_patchers": (
        "vcrpy sends the requests of the skipped HTTP libraries live, unrecorded; this plugin intercepts "
        "every library it knows and cannot let one of them through",
        (
            "let the hosts those requests reach through by name instead: ignore_hosts=[...] in vcr_config "
            "(vcrpy and this plugin both send them unrecorded)",
            "or run this suite under pytest-recording (without -p no:recording)",
        ),
    ),
    "path": (
        "pytest-recording names the cassette itself (a path in vcr_config raises a TypeError under "
        "pytest-recording too)",
        (
            "name the cassette with the default_cassette_name fixture or @pytest.mark.default_cassette(...)",
            "or move the folder with the vcr_cassette_dir fixture, or cassette_library_dir in vcr_config",
        ),
    ),
}

PLACE: Final = "the vcr_config fixture or @pytest.mark.vcr(...)"


def check_vcr_options(merged: Mapping[str, object]) -> None:
    refused = [key for key in merged if key in REFUSED]
    if not refused:
        return
    key = refused[0]
    why, fixes = REFUSED[key]
    raise ConfigError(
        f"vcr_config sets {key}={merged[key]!r}, which pytest-agentreplay cannot honour",
        evidence=(why, f"vcr_config keys: {', '.join(sorted(map(str, merged)))}"),
        place=PLACE,
        fixes=fixes,
    )


# -- pytest-recording's allowed hosts: regular expressions, as host names ---------------------------------

_HOST_CHARS: Final = re.compile(r"[A-Za-z0-9_\-:\[\]]+")


def _literal(pattern: str) -> str | None:
    text = pattern.replace(r"\.", ".")
    parts = text.split(".")
    return text.lower() if all(p and _HOST_CHARS.fullmatch(p) for p in parts) else None


def host_names(patterns: Iterable[object], origin: str) -> tuple[str, ...]:
    """pytest-recording's ``allowed_hosts`` (regular expressions) as host names: a pattern spelling one host
    is that host, one matching a domain's subdomains (``.*\\.example\\.com``) is ``*.example.com``; any other
    is a ``ConfigError`` (the guard admits hosts by name)."""
    out: list[str] = []
    for raw in patterns:
        pattern = str(raw).strip()
        if not pattern:
            continue
        core = pattern.removeprefix("^").removesuffix("$")
        host = _literal(core)
        if host is None and core.startswith((".*\\.", ".*.", ".+\\.", ".+.")):
            rest = _literal(core[4:] if core[2:4] == "\\." else core[3:])
            host = f"*.{rest}" if rest is not None else None
        if host is None:
            raise ConfigError(
                f"allowed host pattern {pattern!r} is not a host name",
                evidence=(
                    "pytest-recording matches allowed_hosts as regular expressions; pytest-agentreplay's "
                    "network guard admits hosts by name (and *.domain for its subdomains)",
                ),
                place=origin,
                fixes=(
                    "list the hosts by name, e.g. --allowed-hosts=localhost,127.0.0.1 or "
                    "'.*\\.internal\\.example' for the subdomains of internal.example",
                    "or give them to pytest-agentreplay directly: --agentreplay-allow-hosts (or the ini key "
                    "agentreplay_allow_hosts), which also takes loopback for every loopback address",
                ),
            )
        out.append(host)
    return tuple(dict.fromkeys(out))


def split_patterns(value: object) -> list[object]:
    if value is None:
        return []
    if isinstance(value, str):
        return list(value.split(","))
    if isinstance(value, Iterable):
        return list(value)
    return [value]
