"""Secret redaction for everything that goes into a cassette, and the final scan that proves it worked:
:mod:`.rules` (what is a secret), :mod:`.redactor` (values, strings), :mod:`.bodies` and :mod:`.encoded`
(decoded views), :mod:`.event` (a run's events), :mod:`.memory`, :mod:`.known`.
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
