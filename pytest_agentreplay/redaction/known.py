"""Secret values a redactor has met (under a secret name, header or parameter, key-shaped, or an
environment credential), replaced wherever else they appear, in every form they take in transit
(percent-encoded, base64). Values shorter than :data:`MIN_CHARS` are not remembered: replacing "1234"
everywhere would blank unrelated text.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Hashable, Mapping
from typing import Final
from urllib.parse import quote, quote_plus

from ..core.constants import REDACTED
from .rules import looks_like_credential

MIN_CHARS: Final = 6
# Authorization schemes whose parameter is the credential itself.
_SCHEMES: Final = ("bearer ", "basic ", "token ", "bot ", "apikey ", "key ")
_MAX_VALUES: Final = 4096


def _forms(value: str) -> set[str]:
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote_plus(value, safe="")}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode("ascii")
        forms.update((text, text.rstrip("=")))
    return {form for form in forms if len(form) >= MIN_CHARS and form not in REDACTED}


def header_credentials(value: object) -> object:
    """What a credential header's value holds as secrets: the whole value, and the credential after its
    scheme (``Bearer <token>``)."""
    if not isinstance(value, str):
        return value
    lowered = value.lower()
    return [value, *(value[len(s) :].strip() for s in _SCHEMES if lowered.startswith(s))]


class KnownSecrets:
    """The secret values of one run (one redactor), each with its forms; one compiled pattern of them."""

    __slots__ = ("_pattern", "_values", "count")

    def __init__(self) -> None:
        self._values: dict[str, frozenset[str]] = {}
        self._pattern: re.Pattern[str] | None = None
        # ``len(self)``, kept as values are added: read per value the redaction walks (``__len__`` is a call).
        self.count = 0

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> list[str]:
        return list(self._values)

    def add(self, value: object) -> bool:
        """Remember ``value`` (every string inside a container); whether anything new was remembered."""
        added = False
        pending = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, str):
                added = self._add_one(item) or added
            elif isinstance(item, Mapping):
                pending.extend(item.values())
            elif isinstance(item, list | tuple):
                pending.extend(item)
        if added:
            forms = sorted({f for fs in self._values.values() for f in fs}, key=lambda f: (-len(f), f))
            self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        return added

    def _add_one(self, value: str) -> bool:
        value = value.strip()
        if len(value) < MIN_CHARS or value in REDACTED or value in self._values:
            return False
        if len(self._values) >= _MAX_VALUES:
            return False
        self._values[value] = frozenset(_forms(value))
        self.count = len(self._values)
        return True

    def copy(self) -> KnownSecrets:
        """A copy to add to; the pattern is shared until then (compiling it is most of an ``add``)."""
        twin = KnownSecrets()
        twin._values, twin._pattern, twin.count = dict(self._values), self._pattern, self.count
        return twin

    def replace(self, text: str) -> str:
        """``text`` with every known secret, in any of its forms, replaced by the marker."""
        pattern = self._pattern
        if pattern is None or pattern.search(text) is None:
            return text
        return pattern.sub(REDACTED, text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        pattern = self._pattern
        return [] if pattern is None else [m.span() for m in pattern.finditer(text)]


class EnvironmentCredentials:
    """An environment's credentials (secret name, credential-shaped value) for one session: read again only
    when its names, the rules or a secret-named value changed (``PYTEST_CURRENT_TEST`` changes every test).
    Each run's redactor starts from a copy of :attr:`found`."""

    __slots__ = ("_names", "_rules", "_secrets", "found")

    def __init__(self) -> None:
        self._rules: Hashable = None
        self._names: frozenset[object] = frozenset()
        self._secrets: dict[str, str] = {}
        self.found = KnownSecrets()

    def read(
        self, environ: Mapping[str, str], rules: Hashable, is_secret: Callable[[str], bool]
    ) -> KnownSecrets:
        # os.environ's own dict (encoded names): its names compared with the last ones in C.
        raw = getattr(environ, "_data", environ)
        same = rules == self._rules and raw.keys() == self._names
        if same and all(environ[name] == value for name, value in self._secrets.items()):
            return self.found
        self._rules, self._names = rules, frozenset(raw)
        self._secrets = {name: value for name, value in environ.items() if is_secret(name)}
        self.found = KnownSecrets()
        self.found.add([value for value in self._secrets.values() if looks_like_credential(value)])
        return self.found
