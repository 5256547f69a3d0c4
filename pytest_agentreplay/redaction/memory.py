"""What a :class:`~.redactor.Redactor` remembers between calls, and what may be shared from it.

A conversation resends its history with every call; redacting each name, long string and message once keeps
recording it linear. Decisions (is a name secret?) and strings are immutable. A redacted element (a message,
a body, headers), found by content or, while the object is held, by identity, is a JSON container handed
out *shared* (:class:`Shared`), since a copy per request would make memory quadratic again: it is only
placed into new containers, never changed. So sharing is chosen per redactor (:class:`Sharing`): a run's
redactor shares; the process-wide default one, whose callers know nothing of each other, does not.
Identity memory trusts that a redacted object is not changed during the run: they are the run's recorded
bodies, shared by ``http.recording.share_repeats``; hooks get copies (``cassette.write``).
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
    """The memories of one redactor, read directly on the hot path, written through ``remember_*`` which
    keep the bounds (a full memory is emptied, not evicted). ``by_content``/``by_id``: None when not shared.
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
