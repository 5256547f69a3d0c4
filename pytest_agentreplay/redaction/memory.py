"""What a :class:`~.redactor.Redactor` remembers between calls, and what may be shared from it.

A conversation resends its history with every call: the same names, strings and messages come back again and
again, and redacting each once is what keeps recording a long conversation linear. Three memories:

- **decisions**: whether a name or a header name is secret. ``bool`` values, immutable.
- **strings**: a long string and its redacted text. ``str`` values, immutable.
- **elements**: a list element (a message, a content part) and its redacted copy, by content (its compact
  JSON text) and, while the element object is held, by identity; an HTTP body by identity, a request's
  headers by content (marshal bytes). A redacted element is a JSON container:
  it is handed out *shared* (every request resending an equal message holds the one redacted copy), because
  copying it per request would make memory quadratic in the conversation again. :class:`Shared` says so in
  the type: the memory hands it out only to be placed into the new containers redaction builds, and
  nothing in this package changes it. Sharing is therefore a choice per redactor (:class:`Sharing`): a
  redactor serving one run, whose output goes to one cassette or one comparison, shares; the process-wide
  default redactor, whose callers (reports, scans, any caller) know nothing of each other, remembers
  decisions and strings only, so no two of its results share a container.

Identity memory holds the element object itself (its ``id`` stays unique while held) and trusts that an
object already redacted is not changed while the run lasts: the elements it sees are the run's recorded
bodies, parsed from bytes on the wire by this package and shared between requests by it
(``http.recording.share_repeats``); hooks get copies (``cassette.write``).
"""

from __future__ import annotations

import enum
from typing import Final, NewType

# Large strings (conversation messages resent with every call) are redacted once per Redactor.
STRING_MIN_CHARS: Final = 48
_MAX_CHARS: Final = 8_000_000
_MAX_IDS: Final = 200_000
_MAX_DECISIONS: Final = 65536

# A redacted JSON container held by the memory and placed, as it is, into the results of later calls.
Shared = NewType("Shared", object)


class Sharing(enum.Enum):
    """Which redacted elements a redactor remembers and hands out again."""

    NONE = "none"  # decisions and strings only: every result is built afresh
    BY_CONTENT = "content"  # an element equal to one redacted before gets that one's redacted copy
    BY_CONTENT_AND_IDENTITY = "identity"  # and the same object again is found without serialising it


class Memory:
    """The memories of one redactor; bounded (a full memory is emptied, not evicted entry by entry).

    Read directly on the hot path (a dict lookup per element); written through the ``remember_*`` methods,
    which keep the bounds. ``by_content``/``by_id`` are ``None`` when its :class:`Sharing` leaves them out.
    """

    __slots__ = ("_chars", "_element_chars", "by_content", "by_id", "headers", "names", "strings")

    def __init__(self, sharing: Sharing) -> None:
        # A name's kind (redaction.rules: NOT_SECRET, SECRET_IF_SHAPED, SECRET).
        self.names: dict[tuple[str, bool], int] = {}
        self.headers: dict[str, bool] = {}
        self.strings: dict[tuple[str, bool], str] = {}
        self._chars = 0
        self.by_content: Final[dict[tuple[bool, str], Shared] | None] = (
            None if sharing is Sharing.NONE else {}
        )
        # The source object is held beside its result: holding it keeps its id from being reused.
        self.by_id: Final[dict[tuple[int, bool], tuple[object, Shared]] | None] = (
            {} if sharing is Sharing.BY_CONTENT_AND_IDENTITY else None
        )
        self._element_chars = 0

    def remember_name(self, key: tuple[str, bool], kind: int) -> None:
        if len(self.names) < _MAX_DECISIONS:
            self.names[key] = kind

    def forget_results(self) -> None:
        """Drop every remembered result (strings, elements): what counts as secret has grown."""
        self.strings.clear()
        self._chars = 0
        if self.by_content is not None:
            self.by_content.clear()
        self._element_chars = 0
        if self.by_id is not None:
            self.by_id.clear()

    def remember_header(self, name: str, secret: bool) -> None:
        if len(self.headers) < _MAX_DECISIONS:
            self.headers[name] = secret

    def remember_string(self, key: tuple[str, bool], redacted: str) -> None:
        if self._chars + len(key[0]) > _MAX_CHARS:
            self.strings.clear()
            self._chars = 0
        self.strings[key] = redacted
        self._chars += len(key[0])

    def remember_by_id(self, value: object, keys: bool, redacted: Shared) -> None:
        if self.by_id is None:
            return
        if len(self.by_id) >= _MAX_IDS:
            self.by_id.clear()
        self.by_id[(id(value), keys)] = (value, redacted)

    def remember_by_content(self, key: tuple[bool, str], redacted: Shared) -> None:
        if self.by_content is None:
            return
        if self._element_chars + len(key[1]) > _MAX_CHARS:
            self.by_content.clear()
            self._element_chars = 0
        self.by_content[key] = redacted
        self._element_chars += len(key[1])
