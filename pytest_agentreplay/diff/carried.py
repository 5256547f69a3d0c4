"""One request change, counted once: a conversation resends its history, so a reworded system prompt
differs in every later model call. Those copies are one change, reported once with the calls that carry it
and named for what it is (``system prompt``, ``tool result (messages[3])``), for the report and the
suggested rule to point at that one message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Final, NamedTuple

from ..core.canonical import dumps_compact
from ..http.providers.interface import InputFields
from .result import Difference
from .text import ABSENT, format_value

# (seq recorded, seq replayed, path of a conversation item or multipart part) -> its role or name in words,
# noted as the comparison walks into it (no payload is loaded again to name it).
RoleMap = dict[tuple[int | None, int | None, tuple[str, ...]], str]

# Where a model call's request shows up in its event: the request payload, and what the recorder derives
# from the request alone (the response-side fields are each call's own decision, never a resend).
REQUEST_SIDE: Final = ("input_ref", "data.decoding", "data.model", "data.tools_hash")
# The request lists whose items are the turns of a conversation, per provider wire format.
_CONVERSATIONS: Final = frozenset({"messages", "input", "contents"})
# The request keys that hold the system prompt.
_SYSTEM: Final = frozenset({"system", "instructions", "system_instruction", "systemInstruction", "preamble"})


class InputNames(NamedTuple):
    """The top-level request keys that name what a model is given, over every provider of a run."""

    conversation: frozenset[str] = _CONVERSATIONS
    system: frozenset[str] = _SYSTEM
    tools: frozenset[str] = frozenset({"tools"})

    @classmethod
    def declared(cls, fields: InputFields | None) -> InputNames:
        """The built-in names and those the run's providers declare (``Provider.INPUT_FIELDS``)."""
        if fields is None:
            return DEFAULT_NAMES
        return cls(
            _CONVERSATIONS | frozenset(fields.conversation),
            _SYSTEM | frozenset(fields.system),
            frozenset({"tools", *fields.tools}),
        )


DEFAULT_NAMES: Final = InputNames()
# What a reader calls a message of each role.
_ROLE_NAMES: Final = {
    "system": "system prompt",
    "developer": "system prompt",
    "user": "user message",
    "assistant": "assistant message",
    "model": "assistant message",
    "tool": "tool result",
    "function": "tool result",
}


def _key(diff: Difference) -> tuple[str, ...]:
    values = (format_value(diff.recorded), format_value(diff.replayed))
    return (diff.path, diff.verdict, diff.rule.source, diff.rule.selector, *values)


def collapse_carried(
    differences: Iterable[Difference], roles: RoleMap, names: InputNames = DEFAULT_NAMES
) -> tuple[Difference, ...]:
    """``differences`` with each request change the model calls resend kept once (at its first call),
    carrying the seq pairs of every call it appeared in, and each request change named (``subject``)."""
    out: list[Difference] = []
    first: dict[tuple[str, ...], int] = {}
    carriers: dict[int, list[tuple[int | None, int | None]]] = {}
    for diff in differences:
        request_side = diff.kind == "changed" and diff.path.startswith(REQUEST_SIDE)
        if not (request_side and diff.event_type == "model.call"):
            if is_multipart_part(diff.path_tokens[:4]):
                diff = replace(diff, subject=subject_of(diff, roles, names))
            out.append(diff)
            continue
        key = _key(diff)
        at = first.get(key)
        pair = (diff.seq_recorded, diff.seq_replayed)
        if at is None:
            first[key] = len(out)
            carriers[len(out)] = [pair]
            out.append(diff)
        else:
            carriers[at].append(pair)
    for index, pairs in carriers.items():
        diff = out[index]
        out[index] = replace(
            diff, subject=subject_of(diff, roles, names), carriers=tuple(pairs) if len(pairs) > 1 else ()
        )
    return tuple(out)


def role_of(item: object) -> str | None:
    """The role of one conversation item (a message, or a Responses API input item)."""
    if not isinstance(item, Mapping):
        return None
    role = item.get("role")
    if isinstance(role, str) and role:
        return role
    return "tool" if item.get("type") in ("function_call_output", "tool_result") else None


def note_role(
    roles: RoleMap, seqs: tuple[int | None, int | None], tokens: tuple[str, ...], a: object, b: object
) -> None:
    """Note what names the conversation item or multipart part at ``tokens`` (:data:`RoleMap`)."""
    name_of = part_name if is_multipart_part(tokens) else role_of
    role = name_of(b) or name_of(a)
    if role is not None:
        roles[(*seqs, tokens)] = role


def is_conversation_item(tokens: tuple[str, ...], names: InputNames = DEFAULT_NAMES) -> bool:
    """``input_ref.body.json.messages[3]`` and the like: one turn of a request's conversation."""
    return (
        len(tokens) == 5
        and tokens[:3] == ("input_ref", "body", "json")
        and tokens[3] in names.conversation
        and tokens[4].startswith("[")
    )


def is_multipart_part(tokens: tuple[str, ...]) -> bool:
    """``input_ref.body.multipart[1]``: one part of a multipart request (``http/multipart.py``)."""
    return len(tokens) == 4 and tokens[:3] == ("input_ref", "body", "multipart") and tokens[3].startswith("[")


def part_name(part: object) -> str | None:
    """``part "file" (notes.txt)``: a multipart part by its field name and file name."""
    if not isinstance(part, Mapping):
        return None
    name = part.get("name")
    filename = part.get("filename")
    words = f"part {dumps_compact(name)}" if isinstance(name, str) else "unnamed part"
    return f"{words} ({filename})" if isinstance(filename, str) else words


def subject_of(diff: Difference, roles: RoleMap, names: InputNames = DEFAULT_NAMES) -> str | None:
    """What a reader calls the changed request part: ``system prompt``, ``user message (messages[1])``,
    ``tool definition (tools[2])``, ``part "file" (notes.txt)``; None when the path names nothing more
    specific than itself."""
    tokens = diff.path_tokens
    # A whole message or part added or dropped carries its name in its value.
    whole = diff.replayed if diff.replayed is not ABSENT else diff.recorded
    if is_multipart_part(tokens[:4]):
        return roles.get((diff.seq_recorded, diff.seq_replayed, tokens[:4])) or (
            part_name(whole) if len(tokens) == 4 else None
        )
    if tokens[:3] != ("input_ref", "body", "json") or len(tokens) < 4:
        return None
    top = tokens[3]
    if top in names.system:
        return "system prompt"
    indexed = len(tokens) > 4 and tokens[4].startswith("[")
    if top in names.tools:
        return f"tool definition ({top}{tokens[4]})" if indexed else "tool definitions"
    if not is_conversation_item(tokens[:5], names):
        return None
    role = roles.get((diff.seq_recorded, diff.seq_replayed, tokens[:5])) or (
        role_of(whole) if len(tokens) == 5 else None
    )
    if role is None:
        return None
    where = f"{top}{tokens[4]}"
    name = _ROLE_NAMES.get(role, f"{role} message")
    # The system prompt is one per conversation: its name says which message it is.
    return name if name == "system prompt" else f"{name} ({where})"
