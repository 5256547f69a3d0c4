"""The replay modes in one place: what each mode does with each kind of call (DESIGN section 2).

| mode             | model calls               | reads, ``@tool`` reads | writes, ``@tool`` writes     |
|------------------|---------------------------|------------------------|------------------------------|
| regression       | served, nth in order      | served                 | recorded receipt, never sent |
| model-comparison | live (maybe other model)  | served                 | recorded receipt, never sent |
| sandbox          | served                    | sandbox services only  | sandbox services only        |
| audit            | nothing runs              | nothing runs           | nothing runs                 |

:func:`goes_live` is the table for HTTP calls (sent or served); :mod:`.policy` applies it to each
intercepted call (serve, send or refuse; rewritten URL, replaced model, injected fault), with
:func:`model_override` as the model-comparison rewrite.
:func:`finish_replay` runs the end-of-run checks of the mode. Nothing here imports an interceptor.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..core.constants import Mode
from ..guard import allow_list_admits, collect_child_refusals
from ..http.providers import providers_of

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..http.classify import Classification
    from ..http.exchange import HttpRequest


def goes_live(ctx: RunContext, request: HttpRequest, cls: Classification) -> bool:
    """Whether a replay mode sends this call instead of serving it from the cassette (the table above).

    Regression is checked right after the allow list: it is the hot path.
    """
    mode = ctx.mode
    allowed = ctx.settings.allow_hosts
    if allowed and mode is not Mode.AUDIT and allow_list_admits(request.host, allowed):
        # The test named this host (a local service it runs): the call goes to it in every mode.
        return True
    if mode is Mode.REGRESSION:
        return False
    if mode is Mode.MODEL_COMPARISON:
        return cls.kind == "model"
    if mode is Mode.SANDBOX:
        return cls.kind != "model"
    return False


def model_override(ctx: RunContext, req: HttpRequest) -> bytes | None:
    """The body a model call is sent with instead (``model_override`` setting), or None: unchanged."""
    model = ctx.settings.model_override
    if not model:
        return None
    body = req.json()
    if not isinstance(body, dict) or body.get("model") == model:
        return None
    body = {**body, "model": str(model)}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def finish_replay(ctx: RunContext) -> None:
    """End-of-run work of the mode, before the history is compared.

    sandbox: idempotency checks (violations go to ``ctx.failures``, so they fail the test even if the
    agent itself passed); model-comparison: the recorded-versus-live comparison, kept in
    ``ctx.comparison`` for the report. In every mode, network refusals that child processes
    reported (they cannot raise into this process) join ``ctx.failures``.
    """
    for refusal in collect_child_refusals(ctx):
        ctx.failures.add(refusal)
    if ctx.mode is Mode.SANDBOX:
        from .sandbox import effect_problems, state_for, violations_error  # only sandbox runs check effects

        try:
            state_for(ctx)  # a bad faults= setting fails even when no call was made
        except Exception:
            return
        problems = effect_problems(ctx)
        if problems:
            ctx.failures.add(violations_error(ctx, problems))
    elif ctx.mode is Mode.MODEL_COMPARISON:
        from .comparison import comparison_for  # only model-comparison runs build one

        ctx.comparison = comparison_for(ctx)


def mode_rules(ctx: RunContext) -> list[dict[str, Any]]:
    """Extra diff rules the run's mode and settings call for (layer ``default``)."""
    rules: list[dict[str, Any]] = []
    if ctx.mode is Mode.SANDBOX and ctx.settings.faults:
        from .sandbox import fault_rules

        rules.extend(fault_rules())
    if ctx.mode in (Mode.SANDBOX, Mode.MODEL_COMPARISON):
        # As the defaults treat ``messages``: the conversation carries what the sandbox services or the live
        # model answered back to the model, in every provider's wire format.
        rules.extend(
            {"selector": f"model.call:input_ref.body.json.{name}", "verdict": "expected"}
            for name in providers_of(ctx.settings).inputs.conversation
            if name != "messages"
        )
    return rules
