"""Secret redaction for everything that goes into a cassette, and the final scan that proves it worked.

- :mod:`.rules`: what counts as a secret (names, header words, value shapes);
- :mod:`.redactor`: :class:`Redactor`, JSON values and strings; :mod:`.bodies`: HTTP bodies (JSON, text,
  base64, multipart, SSE); :mod:`.encoded`: base64 and percent-encoded strings, idempotency keys;
- :mod:`.scan`: the final scan (what redaction would still change);
- :mod:`.memory`: what a redactor remembers between calls, and what of it is shared.
"""

from __future__ import annotations

from .encoded import keep_idempotency_key, redact_tool_arguments
from .memory import Sharing
from .redactor import RedactHook, Redactor, default_redactor, find_secrets, redact, redact_body
from .rules import normalize_name

__all__ = [
    "RedactHook",
    "Redactor",
    "Sharing",
    "default_redactor",
    "find_secrets",
    "keep_idempotency_key",
    "normalize_name",
    "redact",
    "redact_body",
    "redact_tool_arguments",
]
