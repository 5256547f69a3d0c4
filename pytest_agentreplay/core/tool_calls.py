"""One tool call's events (``tool.call``, then ``tool.result`` or a write's ``effect``), or its recorded
outcome served in replay; shared by ``@tool`` and the transports whose calls are tool calls (MCP)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Generator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from ..exceptions import AgentReplayError, CassetteSchemaError, RecordedToolError, ReplayError, ToolValueError
from .capture import RunContext, ToolOutcome, error_text, served_payload, to_jsonable
from .commands import rerecord_fix
from .concurrency import concurrent_group
from .constants import Mode
from .documents import Document
from .events import EffectInfo, ToolInfo
from .tool_decode import decode, rebuild_exception, stream_parts
from .tool_encode import Encoder, exception_doc
from .tool_values import NotRebuilt, Stream, Unstorable, stream_doc
from .unencodable import arguments_hash

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


def tool_arguments(values: Mapping[str, object]) -> tuple[Document, Document | None]:
    """A ``@tool`` call's arguments as stored (typed values tagged; one no kind holds as ``to_jsonable``
    makes it), and their older ``to_jsonable`` form when it differs (older cassettes hold it)."""
    encoder = Encoder(strict=False)
    stored: Document = {key: encoder.store(value, f"argument {key!r}") for key, value in values.items()}
    if not encoder.tagged:
        return stored, None
    return stored, {key: to_jsonable(value) for key, value in values.items()}


class ToolCall:
    """One tool call, recorded or served: ``@tool`` (sync and async), and the transport adapters whose calls
    are tool calls (MCP requests, the agent CLIs' sessions) use it."""

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
        # ``live_midway=False``: a transport whose connection was served (an MCP session opened in replay)
        # cannot start the live tail of a re-recording; a new call on it fails as in regression.
        rerecord = ctx.rerecord if live_midway else None
        # Whether this replay's cassette holds a call equal to this one, and that call's group: looked up
        # once, and only when something below reads it.
        found, group = False, None
        needed = may_group or rerecord is not None or legacy_arguments is not None
        if needed and ctx.tools is not None and not ctx.recording:
            found, group = ctx.tools.recorded_group(name, arguments, ctx=ctx, idempotency_key=idempotency_key)
            if not found and legacy_arguments is not None:
                # A cassette recorded before typed arguments were stored holds their older form.
                found, group = ctx.tools.recorded_group(
                    name, legacy_arguments, ctx=ctx, idempotency_key=idempotency_key
                )
                arguments = legacy_arguments if found else arguments
        self.arguments = arguments
        self.info = ToolInfo(name=name, schema_version=schema_version, idempotency_key=idempotency_key)
        if rerecord is not None:
            # Re-recording from the drift (run_state.Rerecord): a call no recorded one equals turns the run
            # live before its ``tool.call`` event, which then starts the recorded tail.
            if not found and not ctx.recording and ctx.tools is not None:
                ctx.go_live(f"tool.call {name}")
            rerecord.count(live=ctx.recording)
        attempt_key = idempotency_key or arguments_hash(ctx, name, arguments)
        self.attempt = ctx.recorder.next_attempt(name, attempt_key)
        # ``may_group=False``: a library whose own background tasks always run beside the call (an MCP
        # session's reader) would make every call look concurrent; its calls keep their order.
        # A served call keeps the recorded call's group, so the grouping does not depend on which thread
        # replays it; otherwise it is decided live.
        self.group = (group if found else concurrent_group(ctx)) if may_group else None
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
            value = decode(outcome.result) if stream is None and outcome.error is None else None
        except NotRebuilt as exc:
            raise self.not_rebuilt(exc, outcome) from None
        if stream is not None:
            served = _ServedStream(self, outcome, stream)
            return served.async_generator() if stream.kind == "async_generator" else served.generator()
        if outcome.error is not None:
            self.finished(None, outcome.error, exception=_exception_of(outcome))
            raise self.recorded_exception(outcome)
        self.finished(value, None, stored=outcome.result)
        return value

    def returned(self, result: object) -> object:
        """Record what a ``@tool`` returned (a generator item by item); returns what its caller gets."""
        if inspect.isgenerator(result):
            return _RecordedStream(self, "generator").generator(result)
        if inspect.isasyncgen(result):
            return _RecordedStream(self, "async_generator").async_generator(result)
        stored = self.store(result, "result")
        self.finished(result, None, stored=stored)
        return result

    def failed(self, exc: BaseException) -> None:
        """Record that a ``@tool`` raised ``exc`` (typed: its type and arguments, when they rebuild it)."""
        self.finished(None, error_text(exc), exception=exception_doc(exc) if self.typed else None)

    def store(self, value: object, root: str) -> object:
        """``value``'s stored form. While a test records, one replay could not rebuild is refused (and fails
        the test even if caught); elsewhere (sandbox, ``capture_run``) it keeps the plain conversion."""
        try:
            return Encoder(strict=self.ctx.mode is Mode.RECORD).store(value, root)
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
        """The recorded exception rebuilt, else a :class:`RecordedToolError`."""
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
    """A generator ``@tool``'s result, recorded item by item: each item stored as it is yielded, the end
    (returned, raised, or closed early: ``complete: false``) written once."""

    def __init__(self, call: ToolCall, kind: str) -> None:
        self.call = call
        self.kind = kind
        self.items: list[object] = []
        self.open = True

    def keep(self, item: object) -> object:
        try:
            self.items.append(self.call.store(item, f"item {len(self.items)}"))
        except BaseException:
            self.open = False  # an item that cannot be stored ends the recording without its end
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

    def generator(self, gen: Generator[Any, Any, Any]) -> Generator[object, object, object]:
        try:
            sent: object = None
            while True:
                try:
                    item = gen.send(sent)
                except StopIteration as stop:
                    self.end(returned=stop.value)
                    return stop.value
                except Exception as exc:
                    self.end(error=exc)
                    raise
                sent = yield self.keep(item)
        finally:
            try:
                gen.close()  # nothing to do once it ended
            finally:
                self.end(complete=False)

    async def async_generator(self, gen: AsyncGenerator[Any, Any]) -> AsyncGenerator[object, object]:
        try:
            sent: object = None
            while True:
                try:
                    item = await gen.asend(sent)
                except StopAsyncIteration:
                    self.end()
                    return
                except Exception as exc:
                    self.end(error=exc)
                    raise
                sent = yield self.keep(item)
        finally:
            try:
                await gen.aclose()
            finally:
                self.end(complete=False)


class _ServedStream:
    """A served generator ``@tool``'s result: the recorded items, rebuilt as they are asked for, then the
    recorded end."""

    def __init__(self, call: ToolCall, outcome: ToolOutcome, stream: Stream) -> None:
        self.call = call
        self.outcome = outcome
        self.stream = stream

    def _decode(self, stored: object, what: str) -> object:
        try:
            return decode(stored, what)
        except NotRebuilt as exc:
            raise self.call.not_rebuilt(exc, self.outcome) from None

    def generator(self) -> Generator[object, object, object]:
        served = 0
        finished = False
        try:
            while served < len(self.stream.items):
                value = self._decode(self.stream.items[served], f"item {served}")
                served += 1
                yield value
            finished = True
            error = self._finish(served, ended=True)
            if error is not None:
                raise error
            return self._decode(self.stream.returned, "return value")
        finally:
            if not finished:
                self._finish(served, ended=False)

    async def async_generator(self) -> AsyncGenerator[object, object]:
        # The sync replay's steps: an async generator's only difference is that it returns nothing.
        steps = self.generator()
        try:
            for value in steps:
                yield value
        finally:
            steps.close()

    def _finish(self, served: int, *, ended: bool) -> BaseException | None:
        """Write the ``tool.result`` (``served`` items; ``ended``: the consumer asked past the last item) and
        say what to raise then: the recorded exception, or an error when the recording was closed early."""
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
