"""Serving recorded ``@tool`` results during replay, matched by tool name and arguments."""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING

from ..core.canonical import hash_value, in_key_order
from ..core.capture import ToolOutcome
from ..core.commands import new_call_fix
from ..core.documents import Document
from ..core.events import Event
from ..core.unencodable import arguments_hash
from ..exceptions import ToolNotRecordedError
from ..redaction import redact_tool_arguments

if TYPE_CHECKING:
    from ..cassette.read import LoadedCassette
    from ..core.capture import RunContext


# A plain class, not a dataclass: far cheaper to create at start-up.
class _Recorded:
    __slots__ = ("arguments", "group", "outcome", "served")

    # ``group``: the recorded call's order-insensitive group (``data.group``), None when it had none.
    def __init__(self, arguments: Document, outcome: ToolOutcome, group: object) -> None:
        self.arguments, self.outcome, self.group = arguments, outcome, group
        self.served = False


class ToolReplayer:
    """Index of recorded tool calls: exact (name, arguments) first, in recorded order; built once."""

    def __init__(self, cassette: LoadedCassette) -> None:
        self._cassette = cassette
        self._exact: dict[tuple[str, str], deque[_Recorded]] = defaultdict(deque)
        self._by_name: dict[str, list[_Recorded]] = defaultdict(list)
        pending: dict[str, deque[tuple[int, Event]]] = defaultdict(deque)
        events = cassette.events
        for index, event in enumerate(events):
            if event.tool is None:
                continue
            name = event.tool.name
            if event.type == "tool.call":
                pending[name].append((index, event))
            elif event.type in ("tool.result", "effect") and pending[name]:
                if event.type == "effect" and event.input_ref is not None:
                    # An HTTP write (it carries its request): served by the HTTP layer, not a @tool result.
                    continue
                start, call = pending[name].popleft()
                from ..core.tool_values import is_stream  # its codecs: only a cassette with @tool results

                arguments = call.data.get("arguments", {})
                ref = event.output_ref
                # Stored with sorted keys: served with the keys in the order the tool returned them.
                result = in_key_order(cassette.payload(ref), ref.key_order if ref is not None else None)
                outcome = ToolOutcome(
                    result=result,
                    error=event.data.get("error"),
                    recorded_seq=event.seq,
                    # A generator's consumer ran between its call and its end: what happened there is the
                    # agent's (it happens again live), not the tool body's.
                    nested=() if is_stream(result) else _nested(events[start + 1 : index]),
                    exception=event.data.get("exception"),
                )
                rec = _Recorded(arguments, outcome, call.data.get("group"))
                self._exact[(name, hash_value(arguments))].append(rec)
                self._by_name[name].append(rec)

    def recorded_group(
        self, name: str, arguments: Document, *, ctx: RunContext, idempotency_key: str | None = None
    ) -> tuple[bool, object]:
        """``(True, group)`` of the recorded call this live call will be served from, ``(False, None)``
        when it matches none.

        Whether calls may interleave is a fact of the recorded run, not of the thread the replay happens
        to run on: a run moved into a worker thread (or out of one) keeps the recorded grouping.
        """
        if ctx.redactor is not None:
            arguments = redact_tool_arguments(ctx.redactor, arguments, idempotency_key)
        queue = self._exact.get((name, arguments_hash(ctx, name, arguments)))
        return (True, queue[0].group) if queue else (False, None)

    def serve(
        self, name: str, arguments: Document, idempotency_key: str | None, *, ctx: RunContext
    ) -> ToolOutcome:
        if ctx.redactor is not None:
            # Recorded arguments were redacted on save; compare like with like.
            arguments = redact_tool_arguments(ctx.redactor, arguments, idempotency_key)
        # A queue holds the calls not served yet: serving one takes it out.
        queue = self._exact.get((name, arguments_hash(ctx, name, arguments)))
        if queue:
            rec = queue.popleft()
            rec.served = True
            for nested in rec.outcome.nested:
                ctx.recorder.emit(
                    nested.type,
                    actor=nested.actor,
                    event_class=nested.event_class,
                    data=nested.data,
                    tool=nested.tool,
                    input=nested.input_ref,
                    output=nested.output_ref,
                    effect=nested.effect,
                    state_hash=nested.state_hash,
                    policy_version=nested.policy_version,
                )
            return rec.outcome
        error = ToolNotRecordedError(
            f"tool call {name}({_short(arguments)}) has no recorded result",
            evidence=self._closest(name, arguments),
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=[
                new_call_fix(ctx.settings.nodeid, ctx.cassette),
                "if it is not, find what changed the arguments (prompt, tool schema, agent code)",
            ],
        )
        ctx.failures.add(error)
        raise error

    def _closest(self, name: str, arguments: Document) -> list[str]:
        candidates = self._by_name.get(name, [])
        if not candidates:
            known = sorted(self._by_name)
            return [f"live: {name}({_short(arguments)})", f"recorded tools: {', '.join(known) or 'none'}"]
        lines = [f"live:     {name}({_short(arguments)})"]
        for rec in candidates[:3]:
            state = "served" if rec.served else "unplayed"
            lines.append(
                f"recorded: {name}({_short(rec.arguments)})  [seq {rec.outcome.recorded_seq}, {state}]"
            )
        return lines


_NESTED_TYPES = frozenset({"http", "effect", "model.call", "retrieval"})


def _nested(between: list[Event]) -> tuple[Event, ...]:
    """The events a tool body produced between its call and its outcome (HTTP exchanges carry
    ``input_ref``). When another @tool event is interleaved (parallel or nested tools) attribution is
    ambiguous: nothing is re-emitted then, and the diff shows what is missing."""
    out = []
    for event in between:
        if event.type in ("tool.call", "tool.result"):
            return ()
        if event.type == "effect" and event.input_ref is None:
            return ()
        if event.type in _NESTED_TYPES:
            out.append(event)
    return tuple(out)


def _short(arguments: Document, limit: int = 160) -> str:
    if not isinstance(arguments, dict):  # only a hand-edited cassette (the load refuses it)
        return repr(arguments)[:limit]
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."
