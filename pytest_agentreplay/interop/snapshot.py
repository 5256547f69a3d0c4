"""A syrupy extension that stores an agent's decision trace as one readable JSON file per test.

Use ``assert agent_replay.decisions() == decision_snapshot`` (the fixture this plugin provides), or make
it syrupy's default with
``--snapshot-default-extension=pytest_agentreplay.interop.snapshot.DecisionTraceExtension``.
``--snapshot-update`` works as usual.
"""

from __future__ import annotations

import re
from typing import Any

from syrupy.extensions.json import JSONSnapshotExtension

from ..core.constants import VOLATILE_DATA_FIELDS, VOLATILE_ENVELOPE, VOLATILE_PAYLOAD_KEYS

# Keys dropped at any depth of the trace: the volatile event fields, except ``seq``, which the trace
# (``AgentReplay.decisions``) already drops from each event and which is too common a key to drop from
# whatever else a test snapshots; plus the volatile ``data`` fields and provider payload keys.
_VOLATILE_KEYS = (
    frozenset(VOLATILE_ENVELOPE).difference({"seq"}).union(VOLATILE_DATA_FIELDS, VOLATILE_PAYLOAD_KEYS)
)
# Values that change on every run even when behaviour does not: ids minted by services and providers.
_VOLATILE_VALUES = (
    (re.compile(r"\b(chatcmpl|msg|resp|toolu|call|req|rs|fc)([-_])[A-Za-z0-9]{6,}\b"), r"\1\2<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?\b"), "<timestamp>"),
)


def normalise(value: Any) -> Any:
    """The trace with volatile keys dropped and volatile values replaced by placeholders."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in _VOLATILE_KEYS}
    if isinstance(value, list | tuple):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        for pattern, replacement in _VOLATILE_VALUES:
            value = pattern.sub(replacement, value)
    return value


class DecisionTraceExtension(JSONSnapshotExtension):
    """One ``.json`` snapshot per test holding the normalised decision trace."""

    def serialize(self, data: Any, **kwargs: Any) -> Any:
        return super().serialize(normalise(data), **kwargs)
