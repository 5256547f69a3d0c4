"""The replay modes in one place: what each mode does with each kind of call (DESIGN section 2).

| mode             | model calls               | reads, ``@tool`` reads | writes, ``@tool`` writes     |
|------------------|---------------------------|------------------------|------------------------------|
| regression       | served, nth in order      | served                 | recorded receipt, never sent |
| model-comparison | live (maybe other model)  | served                 | recorded receipt, never sent |
| sandbox          | served                    | sandbox services only  | sandbox services only        |
| audit            | nothing runs              | nothing runs           | nothing runs                 |

The HTTP layer asks :func:`replay.http.goes_live` whether a call is sent, and for a sent call in a
replay mode, :func:`live_change` how (rewritten URL, replaced model, injected fault, which host the
fail-closed guard lets through). :func:`finish_replay` runs the end-of-run checks of the mode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..http.guard import allow_list_admits

if TYPE_CHECKING:
    from ..capture import RunContext
    from ..http.classify import Classification
    from ..http.exchange import HttpRequest
    from .faults import Fault


@dataclass(slots=True)
class LiveChange:
    """How a call a replay mode sends differs from what the agent asked for."""

    # Send to this URL instead (sandbox base-URL mapping); the event keeps the agent's URL.
    url: str | None = None
    # Send this body instead (model-comparison model override); the event records what was sent.
    body: bytes | None = None
    # The host the fail-closed guard lets through; None: the call must not open a socket (respx).
    permit: str | None = None
    fault: Fault | None = None

    def sent_request(self, req: HttpRequest) -> HttpRequest:
        """The request as recorded on the event: the agent's URL, the body actually sent."""
        if self.body is None:
            return req
        from ..http.exchange import HttpRequest

        headers = dict(req.headers)
        if "content-length" in headers:
            headers["content-length"] = str(len(self.body))
        return HttpRequest(req.method, req.url, headers, self.body)


def live_change(ctx: RunContext, req: HttpRequest, cls: Classification) -> LiveChange:
    """For a call ``goes_live`` sends in a replay mode: where it goes and what changes on the way."""
    if cls.kind == "model":
        return LiveChange(body=_model_override(ctx, req), permit=req.host)
    if allow_list_admits(req.host, ctx.settings.get("allow_hosts")):
        # A host the test allowed by name (its own local service) is reached as addressed.
        return LiveChange(permit=req.host)
    from .sandbox import destination

    url, permit, fault = destination(ctx, req)
    return LiveChange(url=url, permit=permit, fault=fault)


def _model_override(ctx: RunContext, req: HttpRequest) -> bytes | None:
    model = ctx.settings.get("model_override")
    if not model:
        return None
    body = req.json()
    if not isinstance(body, dict) or body.get("model") == model:
        return None
    body = {**body, "model": str(model)}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def with_body(headers: Any, body: bytes) -> dict[str, str]:
    out = {str(k): str(v) for k, v in dict(headers).items()}
    for name in list(out):
        if name.lower() == "content-length":
            out[name] = str(len(body))
    return out


def finish_replay(ctx: RunContext) -> None:
    """End-of-run work of the mode, before the history is compared.

    sandbox: idempotency checks (violations go to ``ctx.failures``, so they fail the test even if the
    agent itself passed); model-comparison: the recorded-versus-live comparison, kept in
    ``ctx.extensions["comparison"]`` for the report.
    """
    if ctx.mode == "sandbox":
        from .sandbox import effect_problems, state_for, violations_error

        try:
            state_for(ctx)  # a bad faults= setting fails even when no call was made
        except Exception:
            return
        problems = effect_problems(ctx)
        if problems:
            ctx.failures.append(violations_error(ctx, problems))
    elif ctx.mode == "model-comparison":
        from .comparison import comparison_for

        ctx.extensions["comparison"] = comparison_for(ctx)


def mode_rules(ctx: RunContext) -> list[dict[str, Any]]:
    """Extra diff rules the run's mode and settings call for (layer ``default``)."""
    if ctx.mode == "sandbox" and ctx.settings.get("faults"):
        from .sandbox import fault_rules

        return fault_rules()
    return []
