"""The refusal of a live call no recording answers, one shape for every source of recordings (this plugin's
cassettes, vcrpy's): the call, what the source says of it, who made it, the closest recorded calls, and the
fixes; kept in the run's failures unless its host is tolerated or the call is known harmless."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core.commands import new_call_fix
from ..exceptions import UnmatchedRequestError
from ..guard import allow_list_admits
from .exchange import HttpRequest

if TYPE_CHECKING:
    from ..core.capture import RunContext


def unmatched_refusal(
    ctx: RunContext,
    request: HttpRequest,
    url: str,
    what: str,
    evidence: Iterable[str],
    closest: Iterable[str],
    fixes: Iterable[str],
) -> UnmatchedRequestError:
    """``no recorded {what} matches`` the call (``url``: redacted, as error text reaches terminals, reports
    and JUnit files); ``evidence`` comes before who made the call, ``closest`` after it; ``fixes`` after the
    command that records the new call."""
    from ..core.callers import caller_of_call  # heavy (its table of known callers): only a refusal

    caller = caller_of_call(url, ctx.origin_thread)
    tolerated = allow_list_admits(request.host, ctx.settings.tolerated_hosts)
    shown = [f"live call: {request.method} {url}", *evidence, *caller.evidence(), *closest]
    if tolerated:
        shown.append(f"{request.host} is in tolerated_hosts: refused, and the test does not fail for it")
    elif caller.known is not None and caller.known.tolerated:
        tolerated = True
        shown.append("a library's own call that changes nothing: refused, and the test does not fail for it")
    remedies = [new_call_fix(ctx.settings.nodeid, ctx.cassette), *fixes]
    if caller.foreign_thread or caller.known is not None:
        # A library's own call (telemetry, a tokenizer download): its fix first, then the way to let the test
        # pass as it did.
        remedies = [
            *caller.fixes(),
            f"if the library's own calls to {request.host} may fail in tests, list the host in "
            "agentreplay_tolerated_hosts (ini) or tolerated_hosts ([tool.agentreplay]): they are refused "
            "without failing the test",
            *remedies,
        ]
    error = UnmatchedRequestError(
        f"no recorded {what} matches {request.method} {url}",
        evidence=shown,
        cassette=ctx.cassette,
        mode=ctx.mode,
        fixes=remedies,
    )
    if tolerated:
        who = caller.summary()
        ctx.replay.tolerated.append(f"{request.method} {url}" + (f" ({who})" if who else ""))
        return error
    # The agent may swallow the exception (retry loops, broad excepts): the test must still fail.
    ctx.failures.add(error)
    return error
