"""A run's life: begun with the framework adapters and runtime values, ended in the order its history needs
(the runtime values event before ``run.end``). The recorder (``core.capture``) knows neither."""

from __future__ import annotations

from ..core.capture import RunContext
from ..frameworks import activate as activate_frameworks
from ..runtime.values import RuntimeValues, finish_run, start_run


def start(ctx: RunContext) -> None:
    """Emit ``run.start``, hook in the frameworks already imported, and record or serve runtime values."""
    ctx.start()
    ctx.unhook_frameworks = activate_frameworks(ctx)  # cheap: only imported frameworks hook in
    start_run(ctx)


def enter_body(ctx: RunContext) -> None:
    """The test body starts (pytest): the runtime values take the ``random`` generator back from whatever
    reseeded it while the test was set up."""
    state = ctx.rooms.existing(RuntimeValues)
    if state is not None and state.active:
        state.body_starts()


def finish(ctx: RunContext, status: str = "ok", error: str | None = None) -> None:
    """Unhook the frameworks, add the runtime values the run read, then emit ``run.end``."""
    deactivate_frameworks, ctx.unhook_frameworks = ctx.unhook_frameworks, None
    if deactivate_frameworks is not None:
        deactivate_frameworks()
    try:
        finish_run(ctx)
        ctx.finish(status, error)
    finally:
        # The run's parts point back at it (the runtime values patcher holds the context): cut at its end,
        # the whole run, recorded cassette included, is freed when its test lets go of it instead of
        # waiting for the cyclic collector, whose passes over it the rest of the session would pay for.
        ctx.rooms.drop(RuntimeValues)
