"""OpenAI's Codex SDK (``openai-codex``): the ``codex app-server`` session, captured at the SDK's client.

``CodexClient``'s JSON-RPC methods are patched; the messages become events (the table in
docs/frameworks.md). In replay (every mode but sandbox) no process starts: the recorded session is served
(:mod:`.cli_stream`) to the SDK's reader thread, and the approval handler answers live.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Final

from openai_codex.client import CodexClient
from openai_codex.errors import TransportClosedError

from ..core.capture import RunContext, current_run
from ..core.documents import Document
from ..core.patching import Patches, genuine_function
from ..core.tool_calls import ToolCall
from ..http.providers.fields import obj
from .cli_stream import SESSION_ATTRIBUTE, CliSession, effect

TRANSPORT: Final = "codex"
# Item type -> the tool call's name and the item's fields that are its arguments.
_ITEMS: Final = {
    "commandExecution": ("command", ("command", "cwd")),
    "fileChange": ("file_change", ("changes",)),
    "webSearch": ("web_search", ("query",)),
}
_READS: Final = frozenset({"web_search"})
_DECLINED: Final = frozenset({"decline", "cancel", "denied", "abort"})
_PATCHED: Final = ("start", "_write_message", "_read_message", "close")


class Session(CliSession):
    # Threads: the SDK's caller and its reader.
    def __init__(self, ctx: RunContext, client: object) -> None:
        super().__init__(
            ctx,
            client,
            TRANSPORT,
            what=f"Codex session ({TRANSPORT})",
            opens=lambda out: out.get("method") == "initialize",
            own_request=lambda out: "request_id" in out and "method" in out,
        )
        self.lock = threading.RLock()
        self.model: object = None
        self.items: dict[str, ToolCall] = {}
        self.asked: dict[str, Document] = {}

    # -- what the server sent --------------------------------------------------------------------

    def received(self, message: Document) -> None:
        with self.lock:
            super().received(message)
            method = message.get("method")
            params = obj(message.get("params"))
            if "id" in message and isinstance(method, str):
                self.asked[str(message.get("id"))] = {"method": method, "params": params}
            elif method == "thread/tokenUsage/updated":
                self._model_call(params)
            elif method == "item/started":
                self._item_started(obj(params.get("item")))
            elif method == "item/completed":
                self._item_completed(obj(params.get("item")))
            elif method == "turn/completed":
                self._turn_completed(obj(params.get("turn")))

    def _model_call(self, params: Document) -> None:
        usage = obj(params.get("tokenUsage"))
        self.model_call(provider="openai", model=self.model, usage=usage.get("last") or usage.get("total"))

    def _item_started(self, item: Document) -> None:
        kind = str(item.get("type"))
        if kind == "mcpToolCall":
            name, arguments = f"{item.get('server')}/{item.get('tool')}", obj(item.get("arguments"))
        elif kind in _ITEMS:
            name, fields = _ITEMS[kind]
            arguments = {field: item.get(field) for field in fields}
        else:
            return
        effect_kind = effect(self.ctx, name, _READS, str(item.get("tool", "")))
        self.items[str(item.get("id"))] = self.tool_call(name, effect_kind, arguments)

    def _item_completed(self, item: Document) -> None:
        call = self.items.pop(str(item.get("id")), None)
        if call is None:
            return
        status = item.get("status")
        outcome = {
            k: item[k]
            for k in ("status", "exitCode", "aggregatedOutput", "result", "error", "changes")
            if item.get(k) is not None
        }
        failed = status in ("failed", "declined") or item.get("error") is not None
        call.finished(None if failed else outcome, json.dumps(outcome) if failed else None)

    def _turn_completed(self, turn: Document) -> None:
        items = turn.get("items")
        items = items if isinstance(items, list) else []
        texts = [str(i.get("text")) for i in items if isinstance(i, dict) and i.get("type") == "agentMessage"]
        text = texts[-1] if texts else None
        self.state("turn", text, status=turn.get("status"), text=text)

    # -- what the SDK sent -----------------------------------------------------------------------

    def wrote(self, message: Document) -> None:
        with self.lock:
            method = message.get("method")
            params = obj(message.get("params"))
            own = isinstance(method, str) and "id" in message
            summary: Document
            if own:
                summary = {"method": method, "request_id": self.recorded_id(message.get("id"))}
                if method == "turn/start":
                    self.prompts.append(params.get("input"))
                elif method == "thread/start" and params.get("model") is not None:
                    self.model = params.get("model")
            elif isinstance(method, str):
                summary = {"method": method}
            else:
                summary = {"answer": message.get("id")}
                self._answered(str(message.get("id")), obj(message.get("result")))
            self.sent(summary, message.get("id") if own else None)

    def _answered(self, request_id: str, result: Document) -> None:
        asked = self.asked.pop(request_id, None)
        if asked is None or not str(asked.get("method")).endswith("/requestApproval"):
            return
        method = str(asked["method"])
        subject = "file_change" if "fileChange" in method else "command"
        decision = result.get("decision")
        declined = (isinstance(decision, str) and decision in _DECLINED) or not decision
        params = obj(asked.get("params"))
        given = {k: params[k] for k in ("command", "cwd", "reason", "changes") if params.get(k) is not None}
        self.approval(subject, not declined, "approval_handler", given, decision=decision)

    def close(self) -> None:
        with self.lock:
            super().close()

    def served_message(self) -> Document:
        served = self.served
        assert served is not None
        message = served.next_message()
        if message is None:
            raise TransportClosedError("the recorded Codex session is over")
        self.received(message)
        if "method" not in message and "id" in message:
            live = served.live_id(message.get("id"))
            if live is not None:
                return {**message, "id": live}
        return message


def install(patches: Patches) -> None:
    cls = CodexClient
    start, write, read, close = (genuine_function(getattr(cls, name)) for name in _PATCHED)

    def patched_start(self: Any) -> None:
        ctx = current_run()
        # Outside a run, started already, or the CLI runs: the process starts.
        if ctx is None or Session.of(self) is not None or Session(ctx, self).served is None:
            start(self)
            return
        # No process: the SDK's reader thread reads the served session.
        self._reader_thread = threading.Thread(target=self._reader_loop, daemon=True)
        self._reader_thread.start()

    def patched_write(self: Any, message: Document) -> None:
        session = Session.of(self)
        if session is not None:
            session.wrote(message)
        if session is None or session.served is None:
            write(self, message)

    def patched_read(self: Any) -> Document:
        session = Session.of(self)
        if session is None:
            return dict(read(self))
        if session.served is not None:
            return session.served_message()
        message = dict(read(self))
        session.received(message)
        return message

    def patched_close(self: Any) -> None:
        session = Session.of(self)
        if session is not None:
            session.close()
            delattr(self, SESSION_ATTRIBUTE)
        if session is None or session.served is None:
            close(self)

    patched = (patched_start, patched_write, patched_read, patched_close)
    for name, function in zip(_PATCHED, patched, strict=True):
        patches.set(cls, name, function)
