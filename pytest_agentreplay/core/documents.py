"""The one name for a parsed JSON object as the package handles it: a cassette, an event, a body."""

from __future__ import annotations

from typing import Any, TypeAlias

# A JSON object read from or written to disk. Values stay ``Any``: their shape is checked where it is
# read (the record models, the cassette validator), not by every function that passes a document on.
Document: TypeAlias = dict[str, Any]
