"""Secret redaction for everything that goes into a cassette, and the final scan that proves it worked.

- :mod:`.rules`: what counts as a secret (names, header words, value shapes);
- :mod:`.event`: a run's events redacted at one boundary (:class:`RedactedEvent`, what it was redacted with);
- :mod:`.redactor`: :class:`Redactor`, JSON values and strings; :mod:`.bodies`: HTTP bodies (JSON, text,
  base64, multipart, SSE); :mod:`.encoded`: base64 and percent-encoded strings, idempotency keys;
- :mod:`.scan`: the final scan (what redaction would still change);
- :mod:`.memory`: what a redactor remembers between calls, and what of it is shared.
"""

from __future__ import annotations

from .encoded import redact_tool_arguments
from .event import RedactedEvent, data_keys, redact_event
from .memory import Sharing
from .redactor import Redactor, default_redactor, find_secrets, redact, redact_body

__all__ = [
    "RedactedEvent",
    "Redactor",
    "Sharing",
    "data_keys",
    "default_redactor",
    "find_secrets",
    "redact",
    "redact_body",
    "redact_event",
    "redact_tool_arguments",
]
