"""What the network guard says when it refuses a connection: which case it is, and fixes that work.

Two cases, told apart by the run that guards (:mod:`.guard` decides; this module only words it):

- a replaying test (any replay mode): the call reached a socket, so no interceptor answered it from the
  cassette. Re-recording alone cannot fix that: a call outside the intercepted clients and ``@tool``
  functions is not recorded either, and its replay is refused again. The fixes: let a local test service
  through, or move the call where the cassette can record and serve it, then re-record;
- a test that does not replay at all, guarded only because ``--agentreplay-block-network`` (ini
  ``agentreplay_block_network``, ``[tool.agentreplay] block_network``) guards every test of the session.
  It has no cassette and no replay mode, and no record command can record it: the fixes are to make it a
  replaying test, to allow the host, or to drop the flag.

A refusal in a child process is worded by the parent, which knows the run: the child's own calls are
never recorded (only the guard is installed there), so no fix offers recording them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..core.commands import quote, record_command
from ..core.run_settings import RunSettings
from ..exceptions import NetworkBlockedError

# The setting a guard-only run (``--agentreplay-block-network`` on a test that does not replay) carries.
BLOCK_ONLY: Final = "block_network_only"
REPLAY_HEADLINE: Final = "network access blocked during replay: "
BLOCK_HEADLINE: Final = "network access blocked by --agentreplay-block-network: "
_INTERCEPTED: Final = "an intercepted client (httpx, httpx2, requests/urllib3, aiohttp)"


def is_block_only(run: Any) -> bool:
    settings = getattr(run, "settings", None)
    return isinstance(settings, RunSettings) and settings.block_network_only


def _nodeid(run: Any) -> str | None:
    settings = getattr(run, "settings", None)
    nodeid = settings.nodeid if isinstance(settings, RunSettings) else None
    return nodeid or None


def _allow_hosts_fix(host: str, *, marker: bool) -> str:
    where = (
        f'@pytest.mark.agentreplay(allow_hosts=["{host}"]), ' if marker else ""
    ) + f'--agentreplay-allow-hosts={quote(host)}, or allow_hosts = ["{host}"] in [tool.agentreplay]'
    return f'if it is a local test service, let it through: {where} ("loopback" admits every loopback name)'


def _block_fixes(nodeid: str | None, host: str) -> list[str]:
    target = f" ({nodeid})" if nodeid else ""
    return [
        f"to record its calls once and replay them from then on, make the test{target} a replaying test: "
        "add @pytest.mark.agentreplay or request the agent_replay fixture, then record it: "
        + record_command(nodeid, "missing"),
        _allow_hosts_fix(host, marker=False),
        "if the test must reach the network, run it without --agentreplay-block-network (the flag, or "
        "agentreplay_block_network / [tool.agentreplay] block_network, guards every test of the session)",
    ]


def _replay_fixes(nodeid: str | None, host: str) -> list[str]:
    return [
        _allow_hosts_fix(host, marker=True),
        f"to have the cassette serve it, make the call through {_INTERCEPTED} or inside a @tool function, "
        "then re-record the run against the real services: " + record_command(nodeid, "all"),
    ]


def refusal(
    run: Any, destination: str, channel: str, *, thread: str, child_pid: int | None = None
) -> NetworkBlockedError:
    """The error refusing a connection to ``destination`` on behalf of ``run`` (the first guarding run)."""
    host = destination.split(" ", 1)[0].rsplit(":", 1)[0] or "HOST"
    evidence = [f"destination: {destination}", f"call: {channel}", f"thread: {thread}"]
    if child_pid is not None:
        evidence.append(f"process: child {child_pid} of the test's process")
    nodeid = _nodeid(run)
    if is_block_only(run):
        evidence.append(
            "this test does not replay (no @pytest.mark.agentreplay, no agent_replay fixture): "
            "--agentreplay-block-network refuses every connection it makes to a host not allowed"
        )
        return NetworkBlockedError(
            BLOCK_HEADLINE + destination,
            evidence=evidence,
            place=f"test {nodeid}" if nodeid else None,
            fixes=_block_fixes(nodeid, host),
        )
    evidence += [
        "replay is fail-closed: only the cassette answers, and it records and serves only calls made "
        f"through {_INTERCEPTED} or inside a @tool function",
        "this call reached a socket (urllib.request, http.client, a raw socket or another client): "
        "re-recording it as it is would not record it",
    ]
    return NetworkBlockedError(
        REPLAY_HEADLINE + destination,
        evidence=evidence,
        cassette=getattr(run, "cassette", None),
        mode=getattr(run, "mode", None),
        fixes=_replay_fixes(nodeid, host),
    )


def child_refusal(entry: Mapping[str, Any], run: Any) -> NetworkBlockedError:
    """The parent's error for a refusal a child process reported (``entry``: its headline and evidence)."""
    headline = str(entry.get("headline", ""))
    destination = headline.removeprefix(REPLAY_HEADLINE).removeprefix(BLOCK_HEADLINE)
    host = destination.split(" ", 1)[0].rsplit(":", 1)[0] or "HOST"
    evidence: Sequence[str] = [str(e) for e in entry.get("evidence") or ()]
    pid = entry.get("pid")
    if is_block_only(run):
        return NetworkBlockedError(
            f"a child process (pid {pid}) was refused network access by --agentreplay-block-network: "
            + destination,
            evidence=evidence,
            place=f"test {_nodeid(run)}" if _nodeid(run) else None,
            fixes=[
                _allow_hosts_fix(host, marker=False),
                "if the child must reach the network, run the test without --agentreplay-block-network",
            ],
        )
    return NetworkBlockedError(
        f"a child process (pid {pid}) of a replaying test was refused network access: {destination}",
        evidence=[*evidence, "a child process inherits the replay's guard; its calls are never recorded"],
        cassette=getattr(run, "cassette", None),
        mode=getattr(run, "mode", None),
        fixes=[
            _allow_hosts_fix(host, marker=True),
            f"to have the cassette serve it, make the call in the test's own process through {_INTERCEPTED}"
            " or a @tool function, then re-record the run: " + record_command(_nodeid(run), "all"),
        ],
    )
