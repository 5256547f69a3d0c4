"""Generator ``@tool`` results, recorded item by item and replayed as generators that yield the same items
and end as the recorded one did (returned, raised, or closed early: ``complete: false``)."""

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
    """The tool call a recording generator reports to (``tool_calls._RecordedStream``)."""

    def keep(self, item: object) -> object:
        """Store the next item and give it back; raises when it cannot be stored."""
        ...

    def end(self, *, complete: bool = True, returned: object = None, error: Exception | None = None) -> None:
        """Report how the generator ended, once (not after an item could not be stored)."""
        ...


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
    try:
        sent: object = None
        while True:
            try:
                item = gen.send(sent)
            except StopIteration as stop:
                call.end(returned=stop.value)
                return stop.value
            except Exception as exc:
                call.end(error=exc)
                raise
            sent = yield call.keep(item)
    finally:
        try:
            gen.close()  # nothing to do once it ended
        finally:
            call.end(complete=False)


async def record_async_generator(
    call: Recording, gen: AsyncGenerator[object, object]
) -> AsyncGenerator[object, object]:
    try:
        sent: object = None
        while True:
            try:
                item = await gen.asend(sent)
            except StopAsyncIteration:
                call.end()
                return
            except Exception as exc:
                call.end(error=exc)
                raise
            sent = yield call.keep(item)
    finally:
        try:
            await gen.aclose()
        finally:
            call.end(complete=False)


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
    # The sync replay's steps: an async generator's only difference is that it returns nothing.
    steps = replay_generator(call)
    try:
        for value in steps:
            yield value
    finally:
        steps.close()
