"""The fields the tool events need, checked when a cassette is loaded (replay and ``agentreplay verify``):
an edit that keeps the digests sealed (a re-sealed cassette) is refused with the event's seq and the field,
as a ``CassetteSchemaError``, before replay trips over it.

The cassette model leaves ``data`` free-form per event type; what the tool events carry there is read by
the tool index (``replay/tools.py``) and the diff as: ``tool.call``: ``data.arguments`` an object (matched
by name and arguments), ``data.attempt`` an integer; ``tool.result``: ``data.error`` a string,
``data.exception`` the recorded exception's ``{"class": "module:qualname", "args": [...]}``. Both name their
tool (``tool.name``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..core.documents import Document
from .validation import short

_TOOL_EVENTS: Final = ("tool.call", "tool.result")


def tool_event_problem(events: Sequence[object]) -> tuple[int, str] | None:
    """The first tool event (its index: its seq in a cassette whose seqs are dense, as the load checks)
    whose fields are not what replay reads, and the problem."""
    for index, event in enumerate(events):
        if type(event) is not dict or event.get("type") not in _TOOL_EVENTS:
            continue
        problem = _problem(event)
        if problem is not None:
            return index, problem
    return None


def _problem(event: Document) -> str | None:
    tool = event.get("tool")
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return f"tool must be an object naming the tool (tool.name), found {short(tool)}"
    data = event.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return f"data must be an object, found {short(data)}"
    attempt = data.get("attempt")
    if attempt is not None and type(attempt) is not int:
        return f"data.attempt must be an integer, found {short(attempt)}"
    if event.get("type") == "tool.call":
        if "arguments" in data and not isinstance(data["arguments"], dict):
            return (
                f"data.arguments must be an object (the arguments by name), found {short(data['arguments'])}"
            )
        return None
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        return f"data.error must be a string, found {short(error)}"
    exception = data.get("exception")
    if exception is not None and (
        not isinstance(exception, dict)
        or not isinstance(exception.get("class"), str)
        or not isinstance(exception.get("args"), list)
    ):
        return (
            f'data.exception must be {{"class": "module:qualname", "args": [...]}}, found {short(exception)}'
        )
    return None
