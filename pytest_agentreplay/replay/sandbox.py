"""Sandbox mode: tool HTTP calls go only to services the test supplies (docs/modes.md, Sandbox), with
optional fault injection; anything else is refused with :class:`SandboxError`. :func:`destination` answers
:mod:`.policy`; at the end of the run :func:`effect_problems` checks that retries of a write reuse their
idempotency key and that no effect is committed twice.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.canonical import dumps_compact
from ..core.documents import Document
from ..exceptions import AgentReplayError, ConfigError, SandboxCheckError
from ..http import bodies
from ..http.exchange import HttpRequest, HttpResponse, lower_headers, normalise_url, stored_response_headers
from ..http.recording import emit_exchange
from .faults import Fault, FaultPlan, parse_faults

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..core.events import Event
    from ..http.classify import Classification


class SandboxError(SandboxCheckError):
    """A sandbox-mode call had no sandbox service to go to, or the run broke an idempotency rule."""


@dataclass
class SandboxState:
    """The per-run sandbox configuration, parsed once."""

    mapping: list[tuple[str, str]]
    hosts: frozenset[str]
    faults: FaultPlan

    def map_url(self, url: str) -> str | None:
        norm = normalise_url(url)
        for prefix, target in self.mapping:
            if norm == prefix or (norm.startswith(prefix) and norm[len(prefix)] in "/?"):
                return target + norm[len(prefix) :]
        return None


def _prefix(url: str) -> str:
    return normalise_url(str(url)).rstrip("/")


def state_for(ctx: RunContext) -> SandboxState:
    """The run's sandbox state, parsed on first use; parsing errors (bad faults) are usage errors and fail
    the test."""
    return ctx.rooms.of(SandboxState, lambda: _parsed(ctx))


def _parsed(ctx: RunContext) -> SandboxState:
    settings = ctx.settings
    raw_map = settings.sandbox or {}
    try:
        if not isinstance(raw_map, Mapping):
            raise ConfigError(
                "sandbox= must map recorded base URLs to sandbox base URLs",
                evidence=[f"given: {raw_map!r}"],
                mode=ctx.mode,
                fixes=['e.g. sandbox={"https://orders.example": "http://127.0.0.1:8081"}'],
            )
        plan = FaultPlan(parse_faults(settings.faults))
    except Exception as exc:
        ctx.failures.add(exc)
        raise
    mapping = sorted(((_prefix(k), _prefix(v)) for k, v in raw_map.items()), key=lambda kv: -len(kv[0]))
    return SandboxState(mapping, settings.sandbox_hosts, plan)


def respx_handles(req: HttpRequest) -> bool:
    """Whether an active respx router has a route for this request (respx itself is not imported)."""
    mocks = sys.modules.get("respx.mocks")
    if mocks is None:
        return False
    try:
        import httpx  # optional: respx patches httpx only, so it is loaded when respx is

        request = httpx.Request(req.method, req.url, headers=req.headers, content=req.body)
        for mocker in mocks.Mocker.registry.values():
            for router in list(mocker.routers):
                for route in list(router.routes):
                    # The pattern only: Route.match would run the route's side effects.
                    if route.is_pass_through or route.pattern is None:
                        continue
                    if route.pattern.match(request):
                        return True
    except Exception:  # a respx internals change must not turn into a crash: refuse instead
        return False
    return False


@dataclass(frozen=True, slots=True)
class SandboxRoute:
    """Where a sandbox tool call goes."""

    # Send to this URL instead (a base-URL mapping), or None: as addressed.
    url: str | None
    # The host the fail-closed guard lets through; None: no socket may open (a respx route answers).
    permit: str | None
    fault: Fault | None


def destination(ctx: RunContext, req: HttpRequest) -> SandboxRoute | AgentReplayError:
    """The route of a sandbox tool call, or the error refusing it (already in ``ctx.failures``)."""
    try:
        state = state_for(ctx)
    except AgentReplayError as exc:  # a bad sandbox setting: state_for recorded it
        return exc
    # A respx route the test wrote for this very request wins over a base-URL mapping of its host.
    if respx_handles(req):
        return SandboxRoute(None, None, state.faults.next_fault(req))
    mapped = state.map_url(req.url)
    fault = state.faults.next_fault(req, mapped or req.url)
    if mapped is not None:
        return SandboxRoute(mapped, HttpRequest("GET", mapped, {}).host, fault)
    if req.host in state.hosts:
        return SandboxRoute(None, req.host, fault)
    configured = [f"{p} -> {t}" for p, t in state.mapping] + [f"host {h}" for h in sorted(state.hosts)]
    error = SandboxError(
        f"sandbox: tool call to {req.method} {req.url} has no sandbox service; it was not sent",
        evidence=[
            f"host: {req.host} (a recorded host: sandbox mode never sends to it)",
            "sandbox services: " + (", ".join(configured) or "none configured"),
            "active respx routes: none matches" if "respx.mocks" in sys.modules else "respx: not active",
        ],
        cassette=ctx.cassette,
        mode=ctx.mode,
        fixes=[
            f'map it to a local service: @pytest.mark.agentreplay(sandbox={{"{_origin(req.url)}": '
            '"http://127.0.0.1:PORT"}) or the same key in agentreplay_config',
            "or add a respx route for it (httpx clients only)",
        ],
    )
    ctx.failures.add(error)
    return error


def _origin(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return scheme + sep + rest.split("/", 1)[0] if sep else url


def delivered_response(status: int, headers: Any, content: bytes) -> HttpResponse:
    """A response the sandbox service sent but the client never saw (timeout/reset after delivery)."""
    lowered = lower_headers(headers)
    body = bodies.encode_body(content, lowered.get("content-type"))
    return HttpResponse(status, stored_response_headers(lowered, True), body)


def emit_fault(
    ctx: RunContext, req: HttpRequest, cls: Classification, fault: Fault, response: HttpResponse | None
) -> None:
    """Record the faulted attempt: the injected status, what the service answered to a lost response, or
    status 0 for no answer at all (never committed)."""
    response = HttpResponse(0, {}, None) if response is None else response
    emit_exchange(ctx, req, response, cls, 0.0, extra={"fault": fault.to_data()})


# -- end-of-run checks -------------------------------------------------------------------------------


@dataclass
class _Attempt:
    seq: int
    route: str
    key: str | None
    body: str
    client_ok: bool  # the agent saw a 2xx answer
    committed: bool  # the service committed it (2xx), whether or not the agent saw the answer
    how: str


def _http_attempts(events: list[Event]) -> list[_Attempt]:
    out: list[_Attempt] = []
    for event in events:
        if event.type != "effect" or "method" not in event.data:
            continue
        data = event.data
        status = int(data.get("status") or 0)
        fault = data.get("fault")
        request = (event.input_ref.inline if event.input_ref is not None else None) or {}
        body = bodies.normalise_for_match(request.get("body") if isinstance(request, dict) else None)
        route = f"{data.get('method')} {str(data.get('url', '')).partition('?')[0]}"
        ok = 200 <= status < 300
        if fault:
            how = f"injected {fault.get('kind')}" + (f" {fault['status']}" if fault.get("status") else "")
        else:
            how = f"status {status}"
        out.append(
            _Attempt(
                event.seq,
                route,
                event.tool.idempotency_key if event.tool else None,
                body,
                client_ok=ok and not fault,
                committed=ok and (not fault or bool(fault.get("delivered"))),
                how=how,
            )
        )
    return out


def _tool_attempts(events: list[Event]) -> list[_Attempt]:
    """Write ``@tool`` calls paired with their outcome (effect, or tool.result with an error)."""
    out: list[_Attempt] = []
    pending: dict[str, Event] = {}
    for event in events:
        if event.tool is None:
            continue
        name = event.tool.name
        if event.type == "tool.call":
            if event.data.get("effect") == "write":
                pending[name] = event
            continue
        call = pending.pop(name, None)
        if call is None or event.type not in ("effect", "tool.result"):
            continue
        ok = event.type == "effect"
        out.append(
            _Attempt(
                call.seq,
                f"tool {name}",
                call.tool.idempotency_key if call.tool else None,
                dumps_compact(call.data.get("arguments", {})),
                client_ok=ok,
                committed=ok,
                how="committed" if ok else f"failed: {event.data.get('error', '?')}",
            )
        )
    return out


def _check(attempts: list[_Attempt]) -> list[str]:
    problems: list[str] = []
    last: dict[str, _Attempt] = {}
    ok_keys: dict[tuple[str, str], _Attempt] = {}
    committed_bodies: dict[tuple[str, str], _Attempt] = {}
    for att in attempts:
        before = last.get(att.route)
        if before is not None and not before.client_ok:
            # This write follows a failed one on the same route: it is its retry.
            if before.key is not None and att.key != before.key:
                what = (
                    "without its idempotency key"
                    if att.key is None
                    else f"with a new idempotency key {att.key!r}"
                )
                problems.append(
                    f"retry of {att.route} (seq {att.seq}) was sent {what}; the failed attempt "
                    f"(seq {before.seq}, {before.how}) used {before.key!r}"
                )
            elif before.key is None and att.key is None:
                problems.append(
                    f"write {att.route} was retried (seq {att.seq}) without an idempotency key after "
                    f"seq {before.seq} ({before.how})"
                )
        last[att.route] = att
        if att.key is not None and att.client_ok:
            first = ok_keys.setdefault((att.route, att.key), att)
            if first is not att:
                problems.append(
                    f"effect committed twice: {att.route} with idempotency key {att.key!r} succeeded at "
                    f"seq {first.seq} and again at seq {att.seq}"
                )
        if att.key is None and att.committed:
            first = committed_bodies.setdefault((att.route, att.body), att)
            if first is not att:
                problems.append(
                    f"effect committed twice: {att.route} without an idempotency key, identical body, "
                    f"committed at seq {first.seq} ({first.how}) and at seq {att.seq} ({att.how})"
                )
    return problems


def effect_problems(ctx: RunContext) -> list[str]:
    """Idempotency violations in the run's history (HTTP writes and write ``@tool`` calls)."""
    events = list(ctx.recorder.events)
    problems = _check(_http_attempts(events)) + _check(_tool_attempts(events))
    return list(dict.fromkeys(problems))


def violations_error(ctx: RunContext, problems: list[str]) -> SandboxError:
    state = ctx.rooms.existing(SandboxState)
    injected = [f.describe() for f in state.faults.injected] if state is not None else []
    return SandboxError(
        f"sandbox: the agent broke idempotency: {len(problems)} violation(s)",
        evidence=[*problems, *(["faults injected: " + "; ".join(injected)] if injected else [])],
        cassette=ctx.cassette,
        mode=ctx.mode,
        fixes=[
            "send one idempotency key per logical write and reuse it on every retry of that write",
            "after a timeout or a reset, retry with the same key instead of a fresh request",
        ],
    )


def fault_rules() -> list[Document]:
    """Diff rules for a sandbox run with injected faults: retries and failed attempts are the point of
    the run (reported, not regressions); idempotency is judged by :func:`effect_problems` instead."""
    return [
        {"selector": sel, "verdict": "expected"}
        for sel in (
            "effect:@presence",
            "tool.call:@presence",
            "tool.result:@presence",
            "http:@presence",
            "effect:data.status",
            "effect:data.fault",
            "http:data.fault",
            "effect:effect.committed",
            "effect:output_ref",
            "*:data.incomplete",
            "tool.call:data.attempt",
            "tool.result:data.attempt",
            "effect:data.attempt",
            "*:@order",
        )
    ]
