"""Where a value holds text that cannot be stored: a lone UTF-16 surrogate (``"\\ud800"``).

JSON can spell one (``"\\ud800"``), so a server may accept it, but no UTF-8 file can hold it: recording names
the field it is in instead of failing inside a hash or a writer. The search runs only once an encode failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..exceptions import ToolValueError
from .canonical import hash_value, pointer_token
from .documents import Document

if TYPE_CHECKING:
    from .capture import RunContext


def surrogate_field(value: object, path: str = "") -> tuple[str, str] | None:
    """The JSON pointer of the first string (or key) not encodable as UTF-8 and its escaped character."""
    pending: list[tuple[str, object]] = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return where or "/", item[exc.start].encode("unicode_escape").decode("ascii")
        elif isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                child_path = f"{where}/{pointer_token(str(key))}"
                if isinstance(key, str):
                    pending_key = surrogate_field(key, child_path)
                    if pending_key is not None:
                        return pending_key
                children.append((child_path, child))
            pending.extend(reversed(children))
        elif isinstance(item, list | tuple):
            pending.extend(reversed([(f"{where}/{i}", child) for i, child in enumerate(item)]))
    return None


def unencodable_evidence(what: str, parts: Document) -> list[str]:
    """Evidence lines for ``what`` (an event's label), searching ``parts`` (name -> value) in order."""
    for name, value in parts.items():
        found = surrogate_field(value)
        if found is not None:
            pointer, char = found
            return [f"{what}: {name} at {pointer} holds {char}, a lone UTF-16 surrogate (not valid UTF-8)"]
    return [f"{what}: a value holds a lone UTF-16 surrogate (not valid UTF-8)"]


UNENCODABLE_FIXES = (
    "fix the text the agent sends: a lone surrogate usually comes from text sliced in the middle of an "
    "emoji or from a decode with errors='surrogateescape'; repair it with "
    "text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')",
    "or keep that value out of the run (a test input without it)",
)


def arguments_hash(ctx: RunContext, name: str, arguments: Document) -> str:
    """The hash of a live call's arguments, a ``ToolValueError`` naming the field when they hold text no UTF-8
    can (a lone surrogate): recording the call and finding it in a replay's cassette both hash them."""
    try:
        return hash_value(arguments)
    except UnicodeEncodeError:
        raise ToolValueError(
            f"tool {name}: its arguments hold text that is not valid UTF-8",
            evidence=unencodable_evidence(f"tool {name}", {"the arguments": arguments}),
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=UNENCODABLE_FIXES,
        ) from None
