"""WebSocket conversations as events (docs/websockets.md), for every client library: the handshake is an
``http`` read, then one ``http`` event per message, timed-out receive and close (``data.transport:
websocket``), so each message stays between the model and tool calls it caused."""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from ..core.documents import Document
from ..core.events import PayloadRef
from . import bodies
from .exchange import HttpRequest, host_and_path
from .recording import payload_ref, tool_info

if TYPE_CHECKING:
    from ..core.capture import RunContext

MESSAGE_MEDIA_TYPE = "application/vnd.agentreplay.websocket-message+json"
TRANSPORT = "websocket"
# The client's random nonce (and so the server's answer to it) changes on every connection: kept, it
# would differ between every recording and its replay.
VOLATILE_HANDSHAKE_HEADERS = frozenset({"sec-websocket-key", "sec-websocket-accept"})

Direction = Literal["sent", "received"]
Message = str | bytes


def handshake_request(url: str, headers: Mapping[str, str]) -> HttpRequest:
    """The opening handshake as the exchange pipeline sees it (lower-case names, the nonce left out)."""
    kept = {k.lower(): v for k, v in headers.items() if k.lower() not in VOLATILE_HANDSHAKE_HEADERS}
    return HttpRequest("GET", url, kept)


def encode_message(message: Message) -> Document:
    """A message as stored: JSON text as JSON, other text as text, bytes as base64."""
    if not isinstance(message, str):
        return {"base64": base64.b64encode(message).decode("ascii")}
    content_type = "application/json" if message[:1] in ("{", "[") else "text/plain"
    body = bodies.encode_body(message.encode("utf-8"), content_type, exact=True)
    if body is None:  # the empty text message
        return {"text": ""}
    body.pop("content_type", None)
    return body


def decode_message(stored: Mapping[str, object] | None) -> Message:
    """The message a stored one is: ``str`` for a text message, ``bytes`` for a binary one."""
    if not stored:
        return ""
    raw = bodies.body_bytes(dict(stored))
    return raw if "base64" in stored else raw.decode("utf-8")


def excerpt(message: Message, limit: int = 120) -> str:
    text = message if isinstance(message, str) else f"<{len(message)} bytes> {message[:limit]!r}"
    return text if len(text) <= limit else text[:limit] + "..."


class ConversationEvents:
    """Emits the events of one WebSocket connection of a run, in the order the client sees them: recording
    and replay (what it serves) alike, so the diff compares a replayed conversation with its recording."""

    def __init__(self, ctx: RunContext, url: str, connection: int) -> None:
        self.ctx = ctx
        self.url = url
        self.connection = connection
        self.counts: dict[str, int] = {"sent": 0, "received": 0}
        self.closed = False
        self._lock = threading.Lock()
        host, path = host_and_path(url)
        self._tool = tool_info(host + path, None)

    def _emit(
        self, method: str, direction: Direction, extra: Document, ref: PayloadRef | None = None
    ) -> None:
        data: Document = {"transport": TRANSPORT, "method": method, "url": self.url}
        data.update(connection=self.connection, direction=direction, **extra)
        sent = direction == "sent"
        self.ctx.recorder.emit(
            "http",
            trusted=True,
            actor="tool",
            event_class="decision" if sent else "input",
            data=data,
            tool=self._tool,
            input=ref if sent else None,
            output=None if sent else ref,
        )

    def message(self, direction: Direction, stored: Document) -> int:
        """Emit one message (stored as :func:`encode_message` makes it); returns its index."""
        with self._lock:
            index = self.counts[direction]
            self.counts[direction] = index + 1
        ref = payload_ref(stored, self.ctx.settings.http_data_class, MESSAGE_MEDIA_TYPE)
        self._emit("SEND" if direction == "sent" else "RECEIVE", direction, {"index": index}, ref)
        return index

    def timeout(self) -> None:
        """A receive that timed out: replay raises the timeout again at this point of the conversation."""
        with self._lock:
            index = self.counts["received"]
        self._emit("RECEIVE", "received", {"index": index, "timeout": True})

    def close(self, direction: Direction, code: int | None, reason: str | None) -> bool:
        """Emit the close once (who closed first, the code and reason); False when already emitted."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
        self._emit("CLOSE", direction, {"close": {"code": code, "reason": reason or ""}})
        return True
