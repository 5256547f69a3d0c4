"""The built-in rules (layer ``default``) of each replay mode, and of recordings imported from vcrpy."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final, TypeGuard

from ...core.constants import (
    REPLAY_MODES,
    TRANSPORT_HEADERS,
    VOLATILE_DATA_FIELDS,
    VOLATILE_ENVELOPE,
    VOLATILE_PAYLOAD_KEYS,
)
from ...exceptions import ConfigError
from .rule import VERDICTS, Rule, Verdict
from .syntax import parse_entry

VOLATILE_HEADERS: Final = (
    "date", "request-id", "x-request-id", "set-cookie", "cookie", "cf-ray", "cf-cache-status", "age",
    "server-timing", "traceparent", "tracestate", "user-agent", "content-length", "openai-processing-ms",
    "openai-organization", "openai-project", "openai-version", "x-stainless-*", "x-ratelimit-*",
    "anthropic-ratelimit-*", "retry-after", "x-envoy-upstream-service-time", "via", "x-amzn-*",
    "alt-svc", "strict-transport-security", "etag", "last-modified", "expires",
)  # fmt: skip

# Credentials: redacted on every write, so only their presence is compared; a header the recording
# lacks (vcrpy's filter_headers removed it) is not compared at all.
SECRET_REQUEST_HEADERS: Final = (
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
    "openai-organization", "openai-project", "anthropic-organization-id",
)  # fmt: skip
# Labels (``RunMeta.labels["source"]``) of recordings made by another tool, replayed with its leniency.
IMPORTED_SOURCES: Final = frozenset({"vcr"})


def is_imported(labels: Mapping[str, object] | None) -> bool:
    """Whether a cassette's run labels say it was imported (``agentreplay import-vcr``)."""
    return bool(labels) and str((labels or {}).get("source")) in IMPORTED_SOURCES


_COMMON: Final[tuple[tuple[str, str | dict[str, object]], ...]] = (
    ("*:**", "regression"),
    ("*:@presence", "regression"),
    ("*:@order", "regression"),
    ("http:@presence", "expected"),
    ("state.update:@presence", "expected"),
    # Runtime values (clock, uuid, random, record_value) are inputs served back, not compared; how many the
    # run drew is reported, never failing: what the values change shows in the decisions that use them.
    ("runtime.values:**", "ignore"),
    ("runtime.values:@presence", "expected"),
    ("runtime.values:data.reads", "expected"),
    ("runtime.values:data.random", "expected"),
    ("runtime.values:data.sources", "expected"),
    # The volatile event fields (``core.constants``, shared with alignment, the decision trace and its
    # snapshot), then what only the comparison ignores: group labels, the response body's id and
    # fingerprint, timings at any depth.
    *((f"*:{name}", "ignore") for name in VOLATILE_ENVELOPE),
    ("*:data.group", "ignore"),
    *((f"*:data.{name}", "ignore") for name in VOLATILE_DATA_FIELDS),
    ("*:output_ref.body.json.id", "ignore"),
    ("*:output_ref.body.json.system_fingerprint", "ignore"),
    *((f"*:**.{name}", "ignore") for name in VOLATILE_PAYLOAD_KEYS),
    ("*:**.latency_ms", "ignore"),
    ("*:**.duration_ms", "ignore"),
    # An agent CLI's raw transcript (ids, uuids, timings of each message): what it decided is compared in
    # the fields and events made from it (decision, prompts, tool calls, approvals, usage).
    ("*:output_ref.stream", "ignore"),
    # When each streamed event arrived: timing, not behaviour.
    ("*:output_ref.body.sse[*].t", "ignore"),
    # The whole-body hash duplicates input_ref, which is compared field by field (and JSON-aware).
    ("model.call:data.request_hash", "ignore"),
    ("*:data.usage", "expected"),
    ("*:output_ref.body.json.usage", "expected"),
    # Request headers: what the agent chose (provider beta / feature flags such as anthropic-beta or
    # openai-beta, its own extra_headers) is reported, never failing; the environment's are ignored.
    ("*:input_ref.headers", "expected"),
    *((f"*:**.headers.{h}", "ignore") for h in VOLATILE_HEADERS),
    *((f"*:input_ref.headers.{h}", "ignore") for h in TRANSPORT_HEADERS),
    *(
        (f"*:input_ref.headers.{h}", {"verdict": "expected", "presence_only": True, "unrecorded": "ignore"})
        for h in SECRET_REQUEST_HEADERS
    ),
    # A write's idempotency key is behaviour (pitfall: tools that drop it as noise).
    ("*:input_ref.headers.idempotency-key", "regression"),
)
# Recordings imported from vcrpy / pytest-recording: vcrpy never compared request bodies or call order and
# kept whatever headers its filters left, so body changes and moved events are reported (not failing) and
# headers the recording lacks are not compared. This plugin's own recordings keep the strict comparison.
_IMPORTED: Final[tuple[tuple[str, str | dict[str, object]], ...]] = (
    ("*:input_ref.body", "expected"),
    ("*:@order", "expected"),
    ("model.call:data.decoding", "expected"),
    ("model.call:data.tools_hash", "expected"),
    ("model.call:data.model", "expected"),
    ("model.call:data.streamed", "expected"),
    ("*:input_ref.headers", {"unrecorded": "ignore"}),
    ("*:input_ref.headers.idempotency-key", {"verdict": "regression", "unrecorded": "ignore"}),
)
_MODE_DEFAULTS: Final[dict[str, tuple[tuple[str, str | dict[str, object]], ...]]] = {
    "regression": (),
    "model-comparison": (
        ("model.call:data.decision.text", {"verdict": "expected", "similarity": 0.8}),
        ("model.call:data.decision.stop_reason", "expected"),
        ("model.call:data.decision.tool_calls[*].id", "ignore"),
        ("model.call:data.model", "expected"),
        ("model.call:data.response_model", "expected"),
        # Another provider (or another deployment of it) answers at another address (the URL says which;
        # its Host header is a transport header, left out of cassettes).
        ("model.call:input_ref.url", "expected"),
        ("model.call:data.streamed", "expected"),
        ("model.call:input_ref.body.json.model", "expected"),
        ("model.call:input_ref.body.json.messages", "expected"),
        ("model.call:output_ref", "expected"),
        ("*:**.tool_call_id", "ignore"),
        ("*:**.tool_use_id", "ignore"),
        ("model.call:input_ref.body.json.messages[*].tool_calls[*].id", "ignore"),
        ("state.update:state_hash", "expected"),
    ),
    "sandbox": (
        # The conversation carries the fake services' results back to the (served) model.
        ("model.call:input_ref.body.json.messages", "expected"),
        ("tool.result:data.result", "expected"),
        ("tool.result:data.error", "expected"),
        ("tool.result:output_ref", "expected"),
        ("http:output_ref", "expected"),
        ("http:data.status", "expected"),
        ("retrieval:output_ref", "expected"),
        ("effect:effect.receipt", "expected"),
    ),
    "audit": (),
}


def default_rules(mode: str, *, imported: bool = False) -> list[Rule]:
    """The per-mode default rules (layer ``default``); ``imported`` adds the leniency of recordings
    imported from vcrpy (see :func:`is_imported`)."""
    check_mode(mode)
    return list(_parsed_defaults(mode, imported))


def default_specs(mode: str, imported: bool) -> list[tuple[str, str | dict[str, object]]]:
    """The built-in rules of ``mode`` as selector table entries, in order: the common ones, the mode's own,
    then (``imported``) the leniency of recordings imported from vcrpy."""
    return [*_COMMON, *_MODE_DEFAULTS[mode], *(_IMPORTED if imported else ())]


@functools.cache
def _parsed_defaults(mode: str, imported: bool) -> tuple[Rule, ...]:
    # Built once per process: every replayed test compares under them, and rules are frozen. One entry per
    # rule: a selector may come twice (the imported leniency overrides a common rule).
    return tuple(
        _default_rule(selector, value, index)
        for index, (selector, value) in enumerate(default_specs(mode, imported))
    )


def _default_rule(selector: str, value: str | dict[str, object], index: int) -> Rule:
    """One built-in rule. Most are a verdict for an ``EVENT:PATH`` selector, which is the rule of those
    fields: the parse checks what a user writes, and every built-in rule is held to what it gives by
    ``tests/test_diff_rules.py`` (constants: checked once there, not again in every process)."""
    event, colon, path = selector.partition(":")
    if colon and _is_verdict(value):
        return Rule(event=event, path=path, verdict=value, source="default", index=index)
    return parse_entry(selector, value, source="default", index=index)


def _is_verdict(value: object) -> TypeGuard[Verdict]:
    return value in VERDICTS


def check_mode(mode: str) -> None:
    """Raise ``ConfigError`` unless ``mode`` is a replay mode."""
    if mode not in REPLAY_MODES:
        raise ConfigError(
            f"unknown agentreplay mode {mode!r}",
            evidence=(f"valid modes: {', '.join(REPLAY_MODES)}",),
            fixes=("pass --agentreplay-mode with one of the valid modes",),
        )
