"""One tool call's events (``tool.call``, then ``tool.result`` or a write's ``effect``), or its recorded
outcome served in replay; shared by ``@tool`` and the transports whose calls are tool calls (MCP)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Generator, Mapping
from pathlib import Path
from typing import Final, Literal, cast

from ..exceptions import AgentReplayError, CassetteSchemaError, RecordedToolError, ReplayError, ToolValueError
from .canonical import hash_value
from .capture import RunContext, ToolOutcome, served_payload, to_jsonable
from .commands import rerecord_fix
from .concurrency import concurrent_group
from .constants import Mode
from .documents import Document
from .events import EffectInfo, ToolInfo
from .tool_decode import decode, rebuild_exception, stream_parts
from .tool_encode import Encoder, exception_doc
from .tool_streams import record_async_generator, record_generator, replay_async_generator, replay_generator
from .tool_values import NotRebuilt, Stream, Unstorable, stream_doc

__all__ = ["EffectKind", "ToolCall", "error_text", "tool_arguments"]

EffectKind = Literal["read", "write"]

_NOT_GIVEN: Final = object()
HOW_TO_STORE: Final = (
    "return a JSON value (dict with str keys, list, str, int, float, bool, None) or a value stored with its "
    "type: a pydantic model or a dataclass of a module-level class, datetime/date/time/timedelta, UUID, "
    "Decimal, bytes, tuple, set/frozenset, a dict with other keys, an Enum"
)
CODEC_FIX: Final = (
    "or teach the type to the recorder: pytest_agentreplay.register_tool_codec(TheType, encode, decode), "
    "registered in the recording and in the replaying process"
)


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def tool_arguments(values: Mapping[str, object]) -> tuple[Document, Document | None]:
    """A ``@tool`` call's arguments as stored (typed values tagged; one no kind holds as ``to_jsonable``
    makes it), and their older ``to_jsonable`` form when it differs (older cassettes hold it)."""
    encoder = Encoder(strict=False, fallback=to_jsonable)
    stored: Document = {key: encoder.store(value, f"argument {key!r}") for key, value in values.items()}
    if not encoder.tagged:
        return stored, None
    return stored, {key: to_jsonable(value) for key, value in values.items()}


def _arguments_hash(ctx: RunContext, name: str, arguments: Document) -> str:
    try:
        return hash_value(arguments)
    except UnicodeEncodeError:
        from .unencodable import UNENCODABLE_FIXES, unencodable_evidence  # only on this error

        raise ToolValueError(
            f"tool {name}: its arguments hold text that is not valid UTF-8",
            evidence=unencodable_evidence(f"tool {name}", {"the arguments": arguments}),
            cassette=ctx.cassette,
            mode=ctx.mode,
            fixes=UNENCODABLE_FIXES,
        ) from None


class ToolCall:
    """The bookkeeping of one tool call: the sync and async forms of a ``@tool`` call, and the transport
    adapters whose calls are tool calls (an MCP ``tools/call``) record and serve through it."""

    def __init__(
        self,
        ctx: RunContext,
        name: str,
        schema_version: str | None,
        effect: EffectKind,
        arguments: Document,
        idempotency_key: str | None,
        extra: Document | None = None,
        *,
        may_group: bool = True,
        typed: bool = False,
        legacy_arguments: Document | None = None,
        live_midway: bool = True,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.effect = effect
        # ``typed`` (``@tool``): results, generator items and exceptions are stored with their type and
        # rebuilt when served (``tool_values``); a transport's calls (MCP) store and serve plain JSON.
        self.typed = typed
        if legacy_arguments is not None:
            arguments = _recorded_form(ctx, name, arguments, legacy_arguments, idempotency_key)
        self.arguments = arguments
        self.info = ToolInfo(name=name, schema_version=schema_version, idempotency_key=idempotency_key)
        # ``live_midway=False``: a transport whose connection was served (an MCP session opened in replay)
        # cannot start the live tail of a re-recording; a new call on it fails as in regression.
        if ctx.rerecord is not None and live_midway:
            _turn_live_unless_recorded(ctx, name, arguments, idempotency_key)
        attempt_key = idempotency_key or _arguments_hash(ctx, name, arguments)
        self.attempt = ctx.recorder.next_attempt(name, attempt_key)
        # ``may_group=False``: a library whose own background tasks always run beside the call (an MCP
        # session's reader) would make every call look concurrent; its calls keep their order.
        self.group = _group_for(ctx, name, arguments, idempotency_key) if may_group else None
        ctx.recorder.emit(
            "tool.call",
            actor="runtime",
            event_class="decision",
            tool=self.info,
            # ``extra``: what a transport adds (an MCP call's server and its tool's annotations).
            data=self._grouped(
                {"arguments": arguments, "attempt": self.attempt, "effect": effect, **(extra or {})}
            ),
        )

    def _grouped(self, data: Document) -> Document:
        """Tag calls made concurrently as one parallel group: their order is a scheduling accident, not a
        decision, so the diff compares such a group as a set."""
        if self.group is not None:
            data["group"] = self.group
        return data

    @property
    def executes(self) -> bool:
        return self.ctx.executes_tool()

    def served(self) -> object:
        """The recorded result for this call (raises the recorded error again, as the tool did)."""
        tools = self.ctx.tools
        if tools is None:
            raise ReplayError(
                f"tool {self.name!r} cannot be served: no recorded run is loaded",
                cassette=self.ctx.cassette,
                mode=self.ctx.mode,
                fixes=["record the cassette first: pytest --agentreplay-record=missing"],
            )
        outcome = tools.serve(self.name, self.arguments, self.info.idempotency_key, ctx=self.ctx)
        if self.typed:
            return self._served_typed(outcome)
        self.finished(outcome.result, outcome.error)
        if outcome.error is not None:
            raise RecordedToolError(self.name, outcome.error)
        return outcome.result

    def _served_typed(self, outcome: ToolOutcome) -> object:
        try:
            stream = stream_parts(outcome.result)
        except NotRebuilt as exc:
            raise self.not_rebuilt(exc, outcome) from None
        if stream is not None:
            served = _ServedStream(self, outcome, stream)
            if stream.kind == "async_generator":
                return replay_async_generator(served)
            return replay_generator(served)
        if outcome.error is not None:
            self.finished(None, outcome.error, exception=_exception_of(outcome))
            raise self.recorded_exception(outcome)
        try:
            value = decode(outcome.result)
        except NotRebuilt as exc:
            raise self.not_rebuilt(exc, outcome) from None
        self.finished(value, None, stored=outcome.result)
        return value

    def returned(self, result: object) -> object:
        """Record what a ``@tool`` returned (a generator item by item); what its caller gets."""
        if inspect.isgenerator(result):
            return record_generator(
                _RecordedStream(self, "generator"), cast(Generator[object, object, object], result)
            )
        if inspect.isasyncgen(result):
            return record_async_generator(
                _RecordedStream(self, "async_generator"), cast(AsyncGenerator[object, object], result)
            )
        stored = self.store(result, "result")
        self.finished(result, None, stored=stored)
        return result

    def failed(self, exc: BaseException) -> None:
        """Record that a ``@tool`` raised ``exc`` (its type and arguments too, when they rebuild it)."""
        self.finished(None, error_text(exc), exception=exception_doc(exc) if self.typed else None)

    def store(self, value: object, root: str) -> object:
        """``value``'s stored form. While a test records, one replay could not rebuild is refused (and fails
        the test even if caught); elsewhere (sandbox, ``capture_run``) it keeps the plain conversion."""
        strict = self.ctx.mode is Mode.RECORD
        encoder = Encoder(strict=strict, fallback=None if strict else to_jsonable)
        try:
            return encoder.store(value, root)
        except Unstorable as exc:
            error = ToolValueError(
                f"@tool {self.name!r} returned a value that cannot be recorded so that replay gives it back: "
                f"{exc.where} is of type {exc.type_name}",
                evidence=[exc.reason],
                cassette=self.ctx.cassette,
                mode=self.ctx.mode,
                fixes=[HOW_TO_STORE, CODEC_FIX],
            )
            self.ctx.failures.add(error)
            raise error from None

    def recorded_exception(self, outcome: ToolOutcome) -> BaseException:
        """The exception the tool raised while recording, rebuilt, else a :class:`RecordedToolError`."""
        doc = _exception_of(outcome)
        exc = rebuild_exception(doc) if doc is not None else None
        if exc is None:
            error_type = doc.get("class") if doc is not None else None
            return RecordedToolError(
                self.name,
                outcome.error or "",
                error_type=error_type.replace(":", ".") if isinstance(error_type, str) else None,
            )
        exc.add_note(
            f"replayed by pytest-agentreplay: @tool {self.name!r} raised this while recording "
            f"(event seq {outcome.recorded_seq})"
        )
        return exc

    def not_rebuilt(self, exc: NotRebuilt, outcome: ToolOutcome) -> BaseException:
        seq = outcome.recorded_seq
        cassette = self.ctx.cassette
        name = Path(cassette).name if cassette else "the cassette"
        fix = rerecord_fix(self.ctx.settings.nodeid, cassette)
        kind: type[AgentReplayError] = ToolValueError
        headline = f"the recorded result of tool {self.name!r} cannot be rebuilt: {exc.where}"
        fixes = [
            "if the class was moved, renamed or changed since the recording, " + fix,
            "a value stored by a codec needs register_tool_codec in the replaying process too",
        ]
        if exc.damaged:
            kind = CassetteSchemaError
            headline = f"cassette {name}: the recorded result of tool {self.name!r} is damaged at {exc.where}"
            fixes = [f"undo the edit or restore it: `git checkout -- {cassette}`", fix]
        error = kind(
            headline,
            evidence=[exc.reason],
            cassette=cassette,
            mode=self.ctx.mode,
            place=f"event seq {seq} (events[{seq}]), field output_ref",
            fixes=fixes,
        )
        self.ctx.failures.add(error)
        return error

    def finished(
        self,
        result: object,
        error: str | None,
        *,
        stored: object = _NOT_GIVEN,
        exception: Document | None = None,
        output_with_error: bool = False,
    ) -> None:
        """Write the call's outcome: ``tool.result``, or ``effect`` for a write (its receipt read from
        ``result``); ``stored``: its stored form; ``output_with_error``: a raising generator's items."""
        recorder = self.ctx.recorder
        data = self._grouped({"attempt": self.attempt})
        output = result if stored is _NOT_GIVEN else stored
        if exception is not None:
            data["exception"] = exception
        if self.effect == "write" and error is None:
            recorder.emit(
                "effect",
                actor="tool",
                event_class="effect",
                tool=self.info,
                output=served_payload(output),
                effect=EffectInfo(kind=self.name, receipt=_receipt_of(result), committed=True),
                data=data,
            )
        else:
            recorder.tool_result(self.info, output, error, data, keep_output=output_with_error)


class _RecordedStream:
    """A recording generator's reports (``tool_streams.Recording``) to its call: items stored, end pending."""

    def __init__(self, call: ToolCall, kind: str) -> None:
        self.call = call
        self.kind = kind
        self.items: list[object] = []
        self.open = True

    def keep(self, item: object) -> object:
        try:
            self.items.append(self.call.store(item, f"item {len(self.items)}"))
        except BaseException:
            self.open = False
            raise
        return item

    def end(self, *, complete: bool = True, returned: object = None, error: Exception | None = None) -> None:
        if not self.open:
            return
        self.open = False
        call = self.call
        stored_return = None if returned is None else call.store(returned, "return value")
        doc = stream_doc(Stream(self.kind, self.items, complete, stored_return))
        if error is None:
            call.finished(doc, None, stored=doc)
        else:
            call.finished(doc, error_text(error), exception=exception_doc(error), output_with_error=True)


class _ServedStream:
    """A replaying generator's source (``tool_streams.Replaying``): the recorded stream of a served call."""

    def __init__(self, call: ToolCall, outcome: ToolOutcome, stream: Stream) -> None:
        self.call = call
        self.outcome = outcome
        self.stream = stream
        self.done = False

    def stream_length(self) -> int:
        return len(self.stream.items)

    def stream_value(self, index: int) -> object:
        return self._decode(self.stream.items[index], f"item {index}")

    def stream_returned(self) -> object:
        return self._decode(self.stream.returned, "return value")

    def _decode(self, stored: object, what: str) -> object:
        try:
            return decode(stored, what)
        except NotRebuilt as exc:
            raise self.call.not_rebuilt(exc, self.outcome) from None

    def stream_finish(self, served: int, *, ended: bool) -> BaseException | None:
        if self.done:
            return None
        self.done = True
        stream, outcome, call = self.stream, self.outcome, self.call
        if not ended:
            # Closed by its consumer after ``served`` items, as a recording closed early is stored.
            doc = stream_doc(Stream(stream.kind, stream.items[:served], False))
            call.finished(doc, None, stored=doc)
            return None
        doc = stream_doc(stream)
        if outcome.error is not None:
            call.finished(doc, outcome.error, exception=_exception_of(outcome), output_with_error=True)
            return call.recorded_exception(outcome)
        call.finished(doc, None, stored=doc)
        if not stream.complete:
            error = ReplayError(
                f"generator tool {call.name!r} yielded {served} item(s) while recording before its consumer "
                "stopped; this replay asks for more",
                cassette=call.ctx.cassette,
                mode=call.ctx.mode,
                place=f"event seq {outcome.recorded_seq}",
                fixes=[rerecord_fix(call.ctx.settings.nodeid, call.ctx.cassette)],
            )
            call.ctx.failures.add(error)
            return error
        return None


def _exception_of(outcome: ToolOutcome) -> Document | None:
    doc = outcome.exception
    return doc if isinstance(doc, dict) else None


def _recorded(ctx: RunContext, name: str, arguments: Document, key: str | None) -> tuple[bool, object]:
    """Whether this replay's cassette holds a call equal to this one, and that call's group."""
    if ctx.tools is None or ctx.recording:
        return False, None
    return ctx.tools.recorded_group(name, arguments, ctx=ctx, idempotency_key=key)


def _recorded_form(
    ctx: RunContext, name: str, arguments: Document, legacy: Document, key: str | None
) -> Document:
    """The arguments in the form the cassette holds them: typed, or as converted before typed arguments were
    stored (a cassette recorded then) when only that form matches a recorded call."""
    if _recorded(ctx, name, arguments, key)[0] or not _recorded(ctx, name, legacy, key)[0]:
        return arguments
    return legacy


def _turn_live_unless_recorded(ctx: RunContext, name: str, arguments: Document, key: str | None) -> None:
    """Re-recording from the drift (core/rerecord.py): a call no recorded one equals turns the run live
    before its ``tool.call`` event, which then starts the recorded tail."""
    rerecord = ctx.rerecord
    assert rerecord is not None
    if not ctx.recording and ctx.tools is not None and not _recorded(ctx, name, arguments, key)[0]:
        ctx.go_live(f"tool.call {name}")
    rerecord.count(live=ctx.recording)


def _group_for(ctx: RunContext, name: str, arguments: Document, key: str | None) -> object:
    """The order-insensitive group of a tool call: the recorded call's group when replaying a call the
    cassette holds (so the grouping does not depend on which thread replays it), else decided live."""
    found, group = _recorded(ctx, name, arguments, key)
    return group if found else concurrent_group(ctx)


def _receipt_of(result: object) -> object:
    value = to_jsonable(result)
    if isinstance(value, dict) and isinstance(value.get("structuredContent"), dict):
        # An MCP tool result: the tool's own value is its structured content.
        value = value["structuredContent"]
    if isinstance(value, dict):
        for key in ("receipt", "id", "receipt_id", "ticket_id", "refund_id"):
            if key in value:
                return value[key]
    return value
