"""Who made a refused call: its thread and the first frame's module outside the HTTP stack and this plugin.
Libraries call out for themselves (telemetry, a cost map fetched at import), often from a thread of their
own: naming the thread, the library and the known fix ends a search a bare URL starts."""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Final, NamedTuple

# Top-level packages (and standard modules) a call passes through on its way out: never "who made it".
_HTTP_STACK: Final = frozenset((
    "pytest_agentreplay", "httpx", "httpcore", "h11", "h2", "anyio", "sniffio", "urllib3", "requests",
    "aiohttp", "aiohappyeyeballs", "multidict", "yarl", "http", "urllib", "socket", "ssl", "selectors",
    "asyncio", "concurrent", "threading", "contextlib", "functools", "trio", "botocore", "boto3",
    "s3transfer", "respx",
))  # fmt: skip


class KnownCaller(NamedTuple):
    """A library's own call whose fix is known: recognised by the library or by the URL it fetches.
    ``tolerated``: its refusal changes nothing the agent does (telemetry the library drops on failure), so it
    is refused without failing the test, as a host in ``tolerated_hosts`` is."""

    library: str
    url_part: str
    what: str
    fix: str
    tolerated: bool = False


KNOWN: Final[tuple[KnownCaller, ...]] = (
    KnownCaller(
        library="litellm",
        # raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json (its default
        # ``LITELLM_MODEL_COST_MAP_URL``), fetched when litellm is imported and retried from a thread.
        url_part="model_prices_and_context_window",
        what="LiteLLM fetching its model-cost map (at import, and again from a background thread)",
        fix="set LITELLM_LOCAL_MODEL_COST_MAP=True in the test environment before litellm is imported (in "
        "conftest.py: os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True'), or in CI's "
        "environment): LiteLLM then reads the map it ships with and fetches nothing",
    ),
    KnownCaller(
        # Matched by its URL only: ``agents`` is also a common name for a project's own package.
        library="",
        url_part="api.openai.com/v1/traces/ingest",
        what="the OpenAI Agents SDK exporting its traces to OpenAI's backend (its batch processor, with the "
        "placeholder OPENAI_API_KEY replay sets); the SDK drops the batch when the export fails",
        fix="nothing to do: the export is refused and listed, the test does not fail for it; "
        "OPENAI_AGENTS_DISABLE_TRACING=1 stops it (and the tool calls this plugin reads from the SDK's "
        "traces)",
        tolerated=True,
    ),
)


class Caller(NamedTuple):
    """Where a refused call came from."""

    thread: str
    # The call came from a thread other than the one running the test (a library's, or a pool's).
    foreign_thread: bool
    # The module of the first frame outside the HTTP stack, and its top-level package.
    module: str | None
    known: KnownCaller | None

    @property
    def library(self) -> str | None:
        return self.module.split(".", 1)[0] if self.module else None

    def evidence(self) -> list[str]:
        lines: list[str] = []
        if self.foreign_thread:
            lines.append(f"thread: {self.thread!r} (not the thread running the test)")
        if self.module and (self.foreign_thread or self.known is not None):
            lines.append(f"made by: {self.library} (code in module {self.module})")
        if self.known is not None:
            lines.append(f"known case: {self.known.what}")
        return lines

    def fixes(self) -> list[str]:
        return [self.known.fix] if self.known is not None else []

    def summary(self) -> str:
        """``thread 'x', by litellm``: one line of the session summary."""
        parts = []
        if self.foreign_thread:
            parts.append(f"thread {self.thread!r}")
        if self.library:
            parts.append(f"by {self.library}")
        return ", ".join(parts)


def caller_of_call(url: str, test_thread: int | None) -> Caller:
    """The caller of the call being refused in this thread (``test_thread``: the test's own thread id)."""
    current = threading.current_thread()
    # The module of the first frame outward that is not part of the HTTP stack.
    frame: FrameType | None = sys._getframe(1)
    module = None
    while frame is not None and module is None:
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and name.split(".", 1)[0] not in _HTTP_STACK:
            module = name
        frame = frame.f_back
    library = module.split(".", 1)[0] if module else None
    known = next((k for k in KNOWN if (k.library and k.library == library) or k.url_part in url), None)
    foreign = test_thread is not None and current.ident != test_thread
    return Caller(thread=current.name, foreign_thread=foreign, module=module, known=known)
