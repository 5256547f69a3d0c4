"""The replay modes in one place: what each mode does with each kind of call (DESIGN section 2).

| mode             | model calls               | reads, ``@tool`` reads | writes, ``@tool`` writes     |
|------------------|---------------------------|------------------------|------------------------------|
| regression       | served, nth in order      | served                 | recorded receipt, never sent |
| model-comparison | live (maybe other model)  | served                 | recorded receipt, never sent |
| sandbox          | served                    | sandbox services only  | sandbox services only        |
| audit            | nothing runs              | nothing runs           | nothing runs                 |

:func:`goes_live` is the table for HTTP calls, which :mod:`.policy` applies; :func:`finish_replay` runs the
mode's end-of-run checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.constants import Mode
from ..core.documents import Document
from ..guard import allow_list_admits, collect_child_refusals
from ..http.providers import providers_of

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..core.config import Settings
    from ..diff.pipeline import RuleLayers
    from ..http.classify import Classification
    from ..http.exchange import HttpRequest
    from .comparison import Judging


def goes_live(ctx: RunContext, request: HttpRequest, cls: Classification) -> bool:
    """Whether a replay mode sends this call instead of serving it (regression first: the hot path)."""
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


def reads_live(ctx: RunContext, cls: Classification) -> bool:
    """Whether a read the cassette holds no result for is sent (model-comparison with ``live_reads``): the
    live model left the recorded path, and the run may go on to its end. A write never is."""
    return ctx.mode is Mode.MODEL_COMPARISON and ctx.settings.live_reads and cls.kind == "read"


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


def finish_replay(ctx: RunContext, layers: Callable[[], RuleLayers], settings: Settings) -> None:
    """End-of-run work of the mode, before the history is compared: child processes' network refusals
    (they cannot raise here), sandbox idempotency checks and model-comparison's comparison and budget
    rules join ``ctx.failures`` (the test fails even if the agent passed); ``ctx.not_spent`` is set."""
    for refusal in collect_child_refusals(ctx):
        ctx.failures.add(refusal)
    if ctx.mode is Mode.SANDBOX:
        from .sandbox import effect_problems, state_for, violations_error  # only sandbox runs check effects

        try:
            state_for(ctx)  # a bad faults= setting fails even when no call was made
        except Exception:
            pass  # among the run's failures already; what was served is still counted below
        else:
            problems = effect_problems(ctx)
            if problems:
                ctx.failures.add(violations_error(ctx, problems))
    elif ctx.mode is Mode.MODEL_COMPARISON:
        from .comparison import budget_error, comparison_for  # only model-comparison runs build one
        from .repeats import aggregate

        # One run judged as a repeated test's are: every comparison gives its agreement, interval and paths.
        comparison = comparison_for(ctx, judging(ctx, layers, settings))
        ctx.comparison = aggregate([comparison], settings.min_agreement)
        problem = budget_error(ctx.comparison, ctx)
        if problem is not None:
            ctx.failures.add(problem)
    ctx.not_spent = not_spent(ctx, settings)


def judging(ctx: RunContext, layers: Callable[[], RuleLayers], settings: Settings) -> Judging:
    """The rules, judge and price table a model-comparison run is judged by."""
    from ..core.prices import PriceTable
    from ..diff.pipeline import rules_for
    from .comparison import Judging
    from .judge import Judge

    rules = rules_for(layers(), ctx.recorded.run.labels if ctx.recorded is not None else None)
    live = [e for e in ctx.recorder.events if e.type == "model.call"]
    inline = live[0].input_ref.inline if live and live[0].input_ref is not None else None
    url = inline.get("url") if isinstance(inline, dict) else None
    redactor = ctx.redactor
    judge = Judge(
        settings.cassette_dir,
        str(live[0].data.get("provider")) if live else None,
        str(url) if url else None,
        redact=redactor.redact_string if redactor is not None else (lambda text: text),
        cassette=ctx.cassette,
    )
    return Judging(rules, judge, PriceTable(settings.prices))  # type: ignore[arg-type]


def not_spent(ctx: RunContext, settings: Settings) -> Document:
    """The model calls regression and sandbox served instead of sending: how many, their tokens and cost,
    the models without a price."""
    from ..core.prices import PriceTable, tokens_of

    prices = PriceTable(settings.prices)  # type: ignore[arg-type]
    calls = tokens = 0
    cost = 0.0
    unpriced: set[str] = set()
    for event in ctx.recorder.events if ctx.mode in (Mode.REGRESSION, Mode.SANDBOX) else ():
        if event.type != "model.call":
            continue
        usage = event.data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        calls += 1
        tokens += tokens_of(usage)
        one = prices.cost(event.data.get("model"), usage)
        if one is None:
            unpriced.add(str(event.data.get("model")))
        else:
            cost += one
    return {"calls": calls, "tokens": tokens, "cost": round(cost, 6), "unpriced": sorted(unpriced)}


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
