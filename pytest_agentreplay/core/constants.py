"""Names and versions that are part of the on-disk and user-facing contract."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal, get_args

FORMAT_NAME: Final = "pytest-agentreplay"
# Version 1 had no integrity fields; version 2 chained every event to its predecessor (``prev_hash``), so an
# accepted change cascaded through the file; version 3 holds one digest per event (``event_digests``, over
# the event without its ``seq``) and one ``head_hash`` over the run, the count and the ordered digests;
# version 4 stores events in a lean form (``stored_form``): a request that resends an earlier one's
# conversation is a delta over it, so a conversation costs its new messages per call, not its history.
FORMAT_VERSION: Final = 4
OLDEST_SUPPORTED_VERSION: Final = 1

CASSETTE_SUFFIX: Final = ".json"
BLOB_DIR_NAME: Final = ".blobs"
DEFAULT_CASSETTE_DIR: Final = "cassettes"
# The media types of the payloads the HTTP layer records (an exchange's request and response).
HTTP_REQUEST_MEDIA_TYPE: Final = "application/vnd.agentreplay.http-request+json"
HTTP_RESPONSE_MEDIA_TYPE: Final = "application/vnd.agentreplay.http-response+json"
# Payloads whose canonical JSON is larger than this go to the blob store.
INLINE_PAYLOAD_LIMIT: Final = 2048

RECORD_MODES: Final = ("none", "missing", "drifted", "all")
# The replay session in its own network namespace (guard/session_namespace.py): never, where the kernel
# allows, or fail the session where it does not.
ISOLATE_MODES: Final = ("off", "auto", "required")
DEFAULT_ISOLATE_MODE: Final = "off"
# Set by a session that entered its namespace (to the namespace's id): its children know they are inside.
NETNS_ENV_VAR: Final = "PYTEST_AGENTREPLAY_NETNS"
# The runtime values a setting may name (``runtime_values``), here for the settings' check: core sits below
# the runtime patches.
SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES


class Mode(StrEnum):
    """What a run does with the outside world; each equals and prints as the name users write and read."""

    # Talking to the real world: a recording test, or ``capture_run`` outside pytest.
    RECORD = "record"
    CAPTURE = "capture"
    # The replay modes (DESIGN section 2; ``replay/modes.py`` holds what each does with each call).
    REGRESSION = "regression"
    MODEL_COMPARISON = "model-comparison"
    SANDBOX = "sandbox"
    AUDIT = "audit"


# Plain strings, not members: a tuple's repr (argparse's "choose from ...", error texts) shows its items'.
REPLAY_MODES: Final[tuple[str, ...]] = tuple(
    m.value for m in (Mode.AUDIT, Mode.REGRESSION, Mode.MODEL_COMPARISON, Mode.SANDBOX)
)
DEFAULT_RECORD_MODE: Final = "none"
DEFAULT_REPLAY_MODE: Final = Mode.REGRESSION.value

# The vocabularies of an event, as ``Literal`` types (what the event records validate and mypy checks)
# and as the tuples of their values (what code iterates): each list is written once, in the type.
EventType = Literal[
    "run.start",
    "run.end",
    "model.call",
    "tool.call",
    "tool.result",
    "retrieval",
    "policy.decision",
    "approval",
    "state.update",
    "effect",
    "http",
    "error",
    # What the run read from the clock, uuid, random and record_value() (runtime_values.py).
    "runtime.values",
]
Actor = Literal["model", "runtime", "tool", "human", "policy"]
EventClass = Literal["input", "decision", "effect"]
# Typed ``tuple[str, ...]`` as before the derivation: callers key tables with them and look up plain strings.
EVENT_TYPES: Final[tuple[str, ...]] = get_args(EventType)
ACTORS: Final[tuple[str, ...]] = get_args(Actor)
EVENT_CLASSES: Final[tuple[str, ...]] = get_args(EventClass)

# Request headers the HTTP stack or the SDK version chooses (compression, framing, client versions):
# they say nothing about the agent: comparison ignores them and cassettes leave them out
# (``cassette/stored_form.py``).
TRANSPORT_HEADERS: Final = (
    "accept", "accept-encoding", "user-agent", "content-length", "connection", "keep-alive", "host", "te",
    "expect", "transfer-encoding", "content-encoding", "x-stainless-*", "x-goog-api-client",
    "x-goog-request-params", "traceparent", "tracestate", "baggage", "sentry-trace", "x-request-id",
    "request-id", "x-client-request-id",
)  # fmt: skip
# ``[tool.agentreplay] transport_headers``: auto (left out of new cassettes, kept in those that hold them),
# drop, keep.
TRANSPORT_HEADER_CHOICES: Final = ("auto", "drop", "keep")
DEFAULT_TRANSPORT_HEADERS: Final = "auto"
# Event fields that change on every run and say nothing about behaviour. The diff rule defaults ignore
# them (``diff.rules.defaults``), alignment and content keys leave them out (``diff.align``), the decision
# trace drops them (``handle.AgentReplay.decisions``) and so does its snapshot (``interop.snapshot``).
VOLATILE_ENVELOPE: Final = ("ts", "seq", "run_id", "trace_id", "span_id", "prev_hash")
"""Top-level fields: when the event happened, its place in the run, the run/trace/span ids, the hash chain."""
VOLATILE_DATA_FIELDS: Final = ("response_id", "latency_ms")
"""Keys of an event's ``data``: the id the provider gave its response, how long the call took."""
VOLATILE_PAYLOAD_KEYS: Final = ("created",)
"""Keys at any depth of a payload: the time a provider says it created its response (``created``)."""

REDACTED: Final = "[REDACTED]"
# A gRPC call's URL starts with it (http/grpc_calls.py); here so classifying a request imports no gRPC.
GRPC_SCHEME: Final = "grpc://"

# How JSON text was laid out (a body's stored ``"format"``), so it is written back the same: replay serves
# the same bytes (agents often hand a tool's raw response text to the model, and different whitespace would
# then show up as prompt drift) and redaction keeps a nested JSON string's layout. ``None`` (the default,
# not stored) is compact UTF-8, what the LLM APIs send. The first layout reproducing a text is its own.
JSON_FORMATS: Final[dict[str | None, dict[str, Any]]] = {
    None: {"separators": (",", ":"), "ensure_ascii": False},
    "compact-ascii": {"separators": (",", ":"), "ensure_ascii": True},
    "spaced": {"ensure_ascii": True},
    "spaced-utf8": {"ensure_ascii": False},
    "indent2": {"indent": 2, "ensure_ascii": False},
    "indent2-ascii": {"indent": 2, "ensure_ascii": True},
}
