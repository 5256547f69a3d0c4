"""Generator ``@tool`` results, recorded item by item and replayed as generators that yield the same items
and end as the recorded one did (returned, raised, or closed early by its consumer: ``complete: false``).
A value sent in replay is ignored; an exception thrown into the wrapper closes the tool's generator."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Protocol

__all__ = [
    "Recording",
    "Replaying",
    "record_async_generator",
    "record_generator",
    "replay_async_generator",
    "replay_generator",
]


class Recording(Protocol):
    """The tool call a recording generator reports to (``tool_calls.ToolCall``)."""

    def stream_item(self, item: object, index: int) -> object:
        """The stored form of the ``index``th item; raises when it cannot be stored."""
        ...

    def stream_ended(
        self,
        items: list[object],
        *,
        complete: bool,
        returned: object = None,
        error: Exception | None = None,
    ) -> None: ...


class Replaying(Protocol):
    """The served tool call a replaying generator reads from and reports to."""

    def stream_length(self) -> int: ...

    def stream_value(self, index: int) -> object:
        """The ``index``th recorded item, rebuilt."""
        ...

    def stream_finish(self, served: int, *, ended: bool) -> BaseException | None:
        """Write the ``tool.result`` (``served`` items; ``ended``: the consumer asked past the last item) and
        say what to raise then: the recorded exception, or an error when the recording was closed early."""
        ...

    def stream_returned(self) -> object: ...


def record_generator(
    call: Recording, gen: Generator[object, object, object]
) -> Generator[object, object, object]:
    items: list[object] = []
    done = False
    try:
        sent: object = None
        while True:
            try:
                item = gen.send(sent)
            except StopIteration as stop:
                done = True
                call.stream_ended(items, complete=True, returned=stop.value)
                return stop.value
            except Exception as exc:
                done = True
                call.stream_ended(items, complete=True, error=exc)
                raise
            try:
                items.append(call.stream_item(item, len(items)))
            except BaseException:
                done = True
                gen.close()
                raise
            sent = yield item
    finally:
        if not done:
            try:
                gen.close()
            finally:
                call.stream_ended(items, complete=False)


async def record_async_generator(
    call: Recording, gen: AsyncGenerator[object, object]
) -> AsyncGenerator[object, object]:
    items: list[object] = []
    done = False
    try:
        sent: object = None
        while True:
            try:
                item = await gen.asend(sent)
            except StopAsyncIteration:
                done = True
                call.stream_ended(items, complete=True)
                return
            except Exception as exc:
                done = True
                call.stream_ended(items, complete=True, error=exc)
                raise
            try:
                items.append(call.stream_item(item, len(items)))
            except BaseException:
                done = True
                await gen.aclose()
                raise
            sent = yield item
    finally:
        if not done:
            try:
                await gen.aclose()
            finally:
                call.stream_ended(items, complete=False)


def replay_generator(call: Replaying) -> Generator[object, object, object]:
    served = 0
    finished = False
    try:
        while served < call.stream_length():
            value = call.stream_value(served)
            served += 1
            yield value
        finished = True
        error = call.stream_finish(served, ended=True)
        if error is not None:
            raise error
        return call.stream_returned()
    finally:
        if not finished:
            call.stream_finish(served, ended=False)


async def replay_async_generator(call: Replaying) -> AsyncGenerator[object, object]:
    served = 0
    finished = False
    try:
        while served < call.stream_length():
            value = call.stream_value(served)
            served += 1
            yield value
        finished = True
        error = call.stream_finish(served, ended=True)
        if error is not None:
            raise error
    finally:
        if not finished:
            call.stream_finish(served, ended=False)
