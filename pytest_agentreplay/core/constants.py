"""Names and versions that are part of the on-disk and user-facing contract."""

from __future__ import annotations

from typing import Final

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

RECORD_MODES: Final = ("none", "missing", "all")
REPLAY_MODES: Final = ("audit", "regression", "model-comparison", "sandbox")
DEFAULT_RECORD_MODE: Final = "none"
DEFAULT_REPLAY_MODE: Final = "regression"

EVENT_TYPES: Final = (
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
    "runtime.values",
)
ACTORS: Final = ("model", "runtime", "tool", "human", "policy")
EVENT_CLASSES: Final = ("input", "decision", "effect")

REDACTED: Final = "[REDACTED]"
GENESIS_HASH: Final = "0" * 64
