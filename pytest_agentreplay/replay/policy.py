"""The replay policy: what happens to one intercepted HTTP call, decided without any HTTP library.

:func:`decide` returns one action: :class:`Serve`, :class:`Send` or :class:`Refuse` (which calls a mode
sends is the table in :mod:`.modes`). Refusals that must fail the test are already in ``ctx.failures``
(the agent may swallow the exception). Deciding opens no socket but changes run state (played exchanges,
fault counters, the recorder). The interceptors import this module; nothing here imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import NoProviderError
from ..guard import allow_list_admits
from ..http.classify import Classification, classify_exchange
from ..http.exchange import HttpRequest, HttpResponse
from ..http.recording import LiveCapture
from .http import serve, unmatched
from .modes import goes_live, model_override, reads_live

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from .faults import Fault

# Bounds the per-run classification cache: an agent calling ever new URLs must not grow it forever.
_CLASSIFY_CACHE_SIZE = 512


class _Classified(dict[tuple[str, str, str], Classification]):
    """A run's classifications by the built-in rules: (method, host, path) -> its classification."""


# Plain classes, not dataclasses: a dataclass's generated methods are compiled when its module is imported
# (about 3.5 M instructions each, at every start-up), and an action is only built and read.
class Serve:
    """Answer with ``response`` (the cassette's, or an injected status fault's); nothing goes out. Already
    recorded on the run."""

    __slots__ = ("response",)

    def __init__(self, response: HttpResponse) -> None:
        self.response = response


class Send:
    """Send the call; record what comes back through ``capture``.

    ``request``: the request as the event records it (the agent's URL, the body actually sent). ``permit``:
    the one host the fail-closed guard lets through; None: no socket may open (respx answers). ``url``:
    send to this URL instead (sandbox base-URL mapping); the event keeps the agent's URL. ``body``: send
    this body instead (model override); ``request`` already carries it. ``fault``: delivered, then the
    answer is lost: call :meth:`lost`, then raise the client's exception."""

    __slots__ = ("body", "capture", "fault", "permit", "request", "url")

    def __init__(
        self,
        request: HttpRequest,
        permit: str | None,
        capture: LiveCapture,
        url: str | None = None,
        body: bytes | None = None,
        fault: Fault | None = None,
    ) -> None:
        self.request = request
        self.permit = permit
        self.capture = capture
        self.url = url
        self.body = body
        self.fault = fault

    def lost(self, status: int, headers: Any, content: bytes) -> None:
        """Record what the service answered to a request whose answer the injected fault loses."""
        from .sandbox import delivered_response, emit_fault  # only sandbox runs inject faults

        assert self.fault is not None
        capture = self.capture
        response = delivered_response(status, headers, content)
        emit_fault(capture.ctx, capture.request, capture.cls, self.fault, response)


class Refuse:
    """Send nothing: raise ``error``, or the client's own exception for ``fault`` (before sending)."""

    __slots__ = ("error", "fault")

    def __init__(self, error: BaseException | None = None, fault: Fault | None = None) -> None:
        self.error = error
        self.fault = fault

    def exception(self, for_fault: Callable[[Fault], BaseException]) -> BaseException:
        """What to raise; ``for_fault`` builds the client's own exception for an injected fault."""
        if self.error is not None:
            return self.error
        assert self.fault is not None
        return for_fault(self.fault)


Action = Serve | Send | Refuse


def classify(ctx: RunContext, request: HttpRequest) -> Classification:
    """Built-in rules depend only on method, host and path: cache them per run (settings are per run).

    A run's ``classify_hook`` may look at anything (headers, body), so nothing is cached when it has one.
    """
    if ctx.settings.classify_hook is not None:
        return classify_exchange(request, None, ctx.settings)
    cache = ctx.rooms.of(_Classified, _Classified)
    key = (request.method, request.host, request.path)
    cached = cache.get(key)
    if cached is not None:
        return cached
    cls = classify_exchange(request, None, ctx.settings)
    if len(cache) < _CLASSIFY_CACHE_SIZE:
        cache[key] = cls
    return cls


def decide(ctx: RunContext, request: HttpRequest) -> Action:
    """The action for ``request`` in the run ``ctx`` (recording or replaying)."""
    try:
        cls = classify(ctx, request)
    except NoProviderError as exc:
        return Refuse(_no_provider(ctx, exc))
    rerecord = ctx.rerecord
    if ctx.recording:
        if rerecord is not None:
            rerecord.count(live=True)
        return Send(request, request.host, LiveCapture(ctx, request, cls))
    instead = ctx.served_instead
    if instead is not None:
        action = instead.decide(ctx, request, cls)
        if not isinstance(action, Serve | Send | Refuse):
            raise TypeError(f"{type(instead).__name__}.decide returned {action!r}, not an action")
        return action
    if not goes_live(ctx, request, cls):
        # Re-recording from the drift: a model call is served only by the recorded call it equals.
        response = serve(ctx, request, cls, exact=rerecord is not None)
        if response is None:
            if rerecord is not None:
                # The first call the cassette cannot answer as recorded: from here on the run records.
                ctx.go_live(_call_name(request, cls))
                rerecord.count(live=True)
                return Send(request, request.host, LiveCapture(ctx, request, cls))
            if reads_live(ctx, cls):  # model-comparison's live_reads: the run goes on past a divergence
                if ctx.settings.sandbox or ctx.settings.sandbox_hosts:
                    return _live(ctx, request, cls)  # to the test's sandbox service, as sandbox mode sends it
                return Send(request, request.host, LiveCapture(ctx, request, cls))
            return Refuse(unmatched(ctx, request, cls))
        if rerecord is not None:
            rerecord.count(live=False)
        return Serve(response)
    return _live(ctx, request, cls)


def _call_name(request: HttpRequest, cls: Classification) -> str:
    """How the summary names the call a re-recording turned live at: ``model.call gpt-4o-mini``."""
    if cls.kind == "model":
        body = request.json()
        model = body.get("model") if isinstance(body, dict) else None
        return f"model.call {model}" if isinstance(model, str) else f"model.call {cls.endpoint_key}"
    return f"{cls.kind} {request.method} {request.host}{request.path}"


def _no_provider(ctx: RunContext, exc: NoProviderError) -> NoProviderError:
    """The refusal of a call classified ``model`` that no provider reads: located, and kept in
    ``ctx.failures`` (an SDK wraps or retries what its transport raises; the test must fail all the same)."""
    located = NoProviderError(
        exc.headline,
        evidence=exc.evidence,
        cassette=ctx.cassette,
        mode=ctx.mode,
        place=ctx.settings.nodeid,
        fixes=exc.fixes,
    )
    ctx.failures.add(located, once=True)  # a retrying client asks again: one problem
    return located


def _live(ctx: RunContext, request: HttpRequest, cls: Classification) -> Action:
    """A call the replay mode sends on purpose: where it goes and what changes on the way."""
    if cls.kind == "model":
        body = model_override(ctx, request)
        sent = request if body is None else _with_body(request, body)
        return Send(sent, request.host, LiveCapture(ctx, sent, cls), body=body)
    if allow_list_admits(request.host, ctx.settings.allow_hosts):
        # A host the test allowed by name (its own local service) is reached as addressed.
        return Send(request, request.host, LiveCapture(ctx, request, cls))
    # Imported here: a regression replay sends nothing else and never loads the sandbox and its faults.
    from .sandbox import SandboxRoute, destination, emit_fault

    route = destination(ctx, request)
    if not isinstance(route, SandboxRoute):  # no sandbox service, or a bad sandbox setting
        return Refuse(route)
    fault = route.fault
    if fault is not None and not fault.delivered:
        if fault.kind == "status":
            response = fault.response()
            emit_fault(ctx, request, cls, fault, response)
            return Serve(response)
        emit_fault(ctx, request, cls, fault, None)
        return Refuse(fault=fault)
    return Send(request, route.permit, LiveCapture(ctx, request, cls), url=route.url, fault=fault)


def _with_body(request: HttpRequest, body: bytes) -> HttpRequest:
    headers = dict(request.headers)
    if "content-length" in headers:
        headers["content-length"] = str(len(body))
    return HttpRequest(request.method, request.url, headers, body)
