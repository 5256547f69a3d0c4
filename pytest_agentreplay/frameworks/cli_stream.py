"""Agents that drive a CLI over stdin/stdout in JSON lines: the protocol-neutral half of capturing them.

While recording, every message of the CLI is kept with how many messages the Python side had sent before
it (``after``), in the ``stream`` payload of the events the protocol module (:mod:`.claude_code`,
:mod:`.codex`) emits: their concatenation is the transcript. In replay no process starts:
:class:`ServedStream` hands the SDK each recorded message once the Python side has sent as many messages
as it had in the recording (the user's callbacks answer live).
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import Final, Self

import anyio

from ..core.canonical import hash_value
from ..core.capture import RunContext, payload
from ..core.commands import rerecord_fix
from ..core.documents import Document
from ..core.events import PayloadRef
from ..core.tool_calls import EffectKind, ToolCall
from ..exceptions import ReplayError

# How long a served message waits for the Python side's message the recording saw before it: an agent
# whose callbacks now send fewer messages would otherwise hang the test.
WAIT_SECONDS: Final = 30.0
STREAM_KEY: Final = "stream"
# The attribute of the SDK's object (transport, client) that holds its session in a run.
SESSION_ATTRIBUTE: Final = "_agentreplay_session"


def effect(ctx: RunContext, name: str, reads: Collection[str], *keys: str) -> EffectKind:
    """A CLI tool's effect: ``mcp_effects`` by ``keys`` or ``name``, else a read when ``name`` reads."""
    overrides = ctx.settings.mcp_effects
    for key in (*keys, name):
        if overrides.get(key) in ("read", "write"):
            return "read" if overrides[key] == "read" else "write"
    return "read" if name in reads else "write"


class RecordedSessions(dict[str, Iterator[list[Document]]]):
    """A run's room: per transport, the recorded CLI sessions not served yet."""

    def next(self, ctx: RunContext, transport: str, opens: Callable[[Document], bool]) -> list[Document]:
        if transport not in self:
            self[transport] = iter(_recorded_sessions(ctx, transport, opens))
        return next(self[transport], [])


def _recorded_sessions(
    ctx: RunContext, transport: str, opens: Callable[[Document], bool]
) -> list[list[Document]]:
    """The ``stream`` entries of ``transport``'s recorded events, cut into sessions where ``opens`` accepts
    an outgoing summary (a test may start several CLI sessions)."""
    recorded = ctx.recorded
    sessions: list[list[Document]] = []
    if recorded is None:
        return sessions
    for event in recorded.events:
        if event.data.get("transport") != transport or event.output_ref is None:
            continue
        value = recorded.payload(event.output_ref)
        stream = value.get(STREAM_KEY) if isinstance(value, dict) else None
        for entry in stream if isinstance(stream, list) else ():
            if not isinstance(entry, dict):
                continue
            out = entry.get("out")
            if not sessions or (isinstance(out, dict) and opens(out)):
                sessions.append([])
            sessions[-1].append(entry)
    return sessions


class CliSession:
    """One CLI session in one run: its transcript, the events its protocol (a subclass) builds from it, and
    in replay the recorded session served in place of the process (``served``; None: the CLI runs). It is
    attached to ``owner``, the SDK's object whose patched methods find it (:meth:`of`)."""

    def __init__(
        self,
        ctx: RunContext,
        owner: object,
        transport: str,
        *,
        what: str,
        opens: Callable[[Document], bool],
        own_request: Callable[[Document], bool],
    ) -> None:
        self.ctx = ctx
        self.transport = transport
        # The transcript since an event last took it; the Python side's messages as summaries (what they
        # carry is in the events built from them: a prompt, a permission verdict).
        self.pending: list[Document] = []
        self.written = 0
        self.prompts: list[object] = []
        self.closed = False
        # None when the run executes tools (sandbox): the CLI runs for real.
        self.served: ServedStream | None = None
        if not ctx.executes_tool():
            entries = ctx.rooms.of(RecordedSessions, RecordedSessions).next(ctx, transport, opens)
            self.served = ServedStream(ctx, entries, what=what, own_request=own_request)
        setattr(owner, SESSION_ATTRIBUTE, self)

    @classmethod
    def of(cls, owner: object) -> Self | None:
        found = getattr(owner, SESSION_ATTRIBUTE, None)
        return found if isinstance(found, cls) else None

    @classmethod
    def live(cls, owner: object) -> bool:
        """Whether ``owner`` talks to a real CLI process (outside a run, or in one that executes tools)."""
        session = cls.of(owner)
        return session is None or session.served is None

    def received(self, message: Document) -> None:
        self.pending.append({"after": self.written, "in": message})

    def sent(self, summary: Document, own_id: object = None) -> None:
        """The Python side sent a message (``own_id``: its id when it is one of its own requests)."""
        if self.served is not None:
            self.served.wrote(own_id)
        self.written += 1
        self.pending.append({"out": summary})

    def recorded_id(self, live_id: object) -> object:
        """The id one of the Python side's own requests had in the recording (the SDK draws new ones)."""
        return live_id if self.served is None else self.served.next_recorded_id()

    def tool_call(self, name: str, kind: EffectKind, arguments: Document, **extra: object) -> ToolCall:
        data = {"transport": self.transport, **extra}
        return ToolCall(self.ctx, name, None, kind, arguments, None, extra=data, may_group=False)

    def approval(self, subject: object, granted: bool, by: str, asked: object, **extra: object) -> None:
        """An ``approval`` the user's callback (``by``) answered live; ``asked``: what it was to allow."""
        status = "granted" if granted else "denied"
        data = {"subject": subject, "status": status, "by": by, "transport": self.transport, "input": asked}
        self.ctx.recorder.emit("approval", actor="policy", event_class="decision", data=data | extra)

    def model_call(self, **data: object) -> None:
        """A ``model.call`` of the CLI's model; its input the prompts the Python side sent since the last."""
        prompts, self.prompts = self.prompts, []
        self.ctx.recorder.emit(
            "model.call",
            actor="model",
            event_class="decision",
            data={"endpoint": self.transport, "transport": self.transport, **data},
            input=payload({"prompts": prompts}) if prompts else None,
            output=self._stream(),
        )

    def state(self, node: str, state: object, **data: object) -> None:
        """A ``state.update`` of node ``<transport> <node>``, its hash that of ``state``."""
        label = f"{self.transport} {node}"
        self.ctx.recorder.emit(
            "state.update",
            actor="runtime",
            event_class="decision",
            state_hash=hash_value(state),
            data={"node": label, "label": label, "transport": self.transport, **data},
            output=self._stream(),
        )

    def _stream(self) -> PayloadRef:
        taken, self.pending = self.pending, []
        return payload({STREAM_KEY: taken})

    def flush(self) -> None:
        """Emit what the protocol gathered and has not emitted yet (a turn under way)."""

    def close(self) -> None:
        """The messages no event took (in replay with those not served) go into a closing
        ``state.update``. Once: the SDK may close twice."""
        if self.closed:
            return
        self.closed = True
        if self.served is not None:
            self.served.close()
            for message in self.served.rest():
                self.received(message)
        self.flush()
        if self.pending:
            self.state("end", None)


class ServedStream:
    """One recorded CLI session served in place of the process: ``wrote`` counts the Python side's messages
    (mapping the ids of its own requests onto the recorded ones); ``messages`` (async SDKs) or
    ``next_message`` (threaded ones) hand over each recorded message once the Python side caught up."""

    def __init__(
        self, ctx: RunContext, entries: list[Document], *, what: str, own_request: Callable[[Document], bool]
    ) -> None:
        self.ctx = ctx
        self.what = what
        self.entries = entries
        self.sent = 0
        self.closed = False
        # Async SDKs wait on an anyio event (made in their loop), threaded ones on the condition.
        self.changed: anyio.Event | None = None
        self.condition = threading.Condition()
        self.recorded_ids = [
            str(e["out"].get("request_id"))
            for e in entries
            if isinstance(e.get("out"), dict) and own_request(e["out"])
        ]
        # recorded id -> live id, of the own requests sent so far.
        self.live_ids: dict[str, str] = {}
        self.requests = 0
        # The next entry to serve.
        self.position = 0

    def next_recorded_id(self) -> str | None:
        return self.recorded_ids[self.requests] if self.requests < len(self.recorded_ids) else None

    def wrote(self, live_request_id: object = None) -> None:
        with self.condition:
            if live_request_id is not None and self.requests < len(self.recorded_ids):
                self.live_ids[self.recorded_ids[self.requests]] = str(live_request_id)
                self.requests += 1
            self.sent += 1
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def live_id(self, recorded_id: object) -> str | None:
        return self.live_ids.get(str(recorded_id))

    def _wake(self) -> None:
        with self.condition:
            self.condition.notify_all()
        changed, self.changed = self.changed, None
        if changed is not None:
            changed.set()

    def rest(self) -> list[Document]:
        """The CLI's recorded messages not served when the session closed: noted, never handed over."""
        rest = self.entries[self.position :]
        self.position = len(self.entries)
        return [e["in"] for e in rest if isinstance(e.get("in"), dict)]

    def _next(self) -> tuple[Document, int] | None:
        """The next recorded message of the CLI and how many messages it waits for (None: none left)."""
        while self.position < len(self.entries):
            entry = self.entries[self.position]
            self.position += 1
            message = entry.get("in")
            if isinstance(message, dict):
                after = entry.get("after")
                return message, after if isinstance(after, int) else 0
        return None

    async def messages(self) -> AsyncIterator[Document]:
        while (found := self._next()) is not None:
            message, needed = found
            with anyio.move_on_after(WAIT_SECONDS):
                while self.sent < needed and not self.closed:
                    if self.changed is None:
                        self.changed = anyio.Event()
                    await self.changed.wait()
            if not self._due(message, needed):
                return
            yield message

    def next_message(self) -> Document | None:
        """Blocking form of :meth:`messages`: the next message, or None when the session is over."""
        found = self._next()
        if found is None:
            with self.condition:
                self.condition.wait_for(lambda: self.closed, WAIT_SECONDS)
            return None
        message, needed = found
        with self.condition:
            self.condition.wait_for(lambda: self.sent >= needed or self.closed, WAIT_SECONDS)
        return message if self._due(message, needed) else None

    def _due(self, message: Document, needed: int) -> bool:
        """After the wait: whether ``message`` is handed over (a stall fails the run)."""
        if self.closed:
            return False
        if self.sent >= needed:
            return True
        ctx = self.ctx
        excerpt = json.dumps(message)[:160]
        ctx.failures.add(
            ReplayError(
                f"{self.what}: the recorded session waits for the agent's message #{needed}, the agent sent "
                f"{self.sent} in {WAIT_SECONDS:.0f} s; the CLI's next recorded message is not served",
                evidence=[f"next recorded message: {excerpt}"],
                cassette=ctx.cassette,
                mode=ctx.mode,
                fixes=[
                    rerecord_fix(
                        ctx.settings.nodeid,
                        ctx.cassette,
                        lead="if the agent now talks to the CLI differently (fewer prompts or answers), "
                        "re-record it",
                    )
                ],
            )
        )
        return False
