"""What the views of :mod:`.bodies` and :mod:`.encoded` ask of a redactor: declared here, below
:mod:`.redactor`, so each of those modules imports one way."""

from __future__ import annotations

import re
from typing import Protocol, TypeVar

T = TypeVar("T")


class Redacting(Protocol):
    def redact(self, value: T, *, keys: bool = True) -> T: ...

    def redact_string(self, text: str, *, keys: bool = True) -> str: ...

    def is_secret_name(self, name: str, *, query: bool = False, value: object = None) -> bool: ...

    def secret_spans(self, text: str, *, keys: bool = True) -> list[tuple[int, int]]: ...

    def query_replacement(self, match: re.Match[str]) -> str: ...
