"""Escaping and the small HTML pieces every part of the viewer uses: escaped values, capped ``<pre>``
blocks, key/value lists and CSS-safe tokens. Everything from a cassette goes through here: payloads are
untrusted."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Any

from ...core.canonical import display_text
from ...core.events import PayloadRef

PayloadResolver = Callable[[PayloadRef], Any]

MAX_PAYLOAD_CHARS = 20_000


def esc(value: Any) -> str:
    """HTML-escape any value (strings as they are, everything else as compact JSON or repr)."""
    return html.escape(display_text(value), quote=True)


def pretty(value: Any, limit: int = MAX_PAYLOAD_CHARS) -> str:
    """A ``<pre>`` block with the value as indented JSON (escaped, capped in length)."""
    text = display_text(value, indent=2)
    note = ""
    if len(text) > limit:
        note = f'\n<span class="absent">… {len(text) - limit} more characters not shown</span>'
        text = text[:limit]
    return f"<pre>{html.escape(text)}{note}</pre>"


def kv(rows: Iterable[tuple[str, Any]]) -> str:
    """A ``<dl class="kv">`` of the rows with a value (empty values are left out; no rows, no list)."""
    cells = []
    for key, value in rows:
        if value is None or value == "" or value == [] or value == {}:
            continue
        cells.append(f"<dt>{html.escape(key)}</dt><dd class=mono>{esc(value)}</dd>")
    return f'<dl class="kv">{"".join(cells)}</dl>' if cells else ""


def css_token(text: str) -> str:
    """``text`` usable in a class name: every character but letters and digits becomes ``-``."""
    return "".join(ch if ch.isalnum() else "-" for ch in text)
