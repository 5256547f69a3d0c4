"""Refusals: what the guard says when it refuses a connection, and where a refusal is reported.

A refusal goes to every guarding run's ``failures`` (the agent may swallow the error). A child process
appends its refusals to a file in the report directory, which the parent reads and words. A refusal for a
test that had already ended (a stray thread, a late child) waits for the session's end.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
from contextlib import suppress
from pathlib import Path
from typing import Final

from ..core.commands import quote, record_command
from ..exceptions import NetworkBlockedError
from .decision import decide
from .isolation import HOLDER
from .runs import RUNS, GuardRun, ParentRun, ended, guarding_runs, nodeid, token

REPLAY_HEADLINE: Final = "network access blocked during replay: "
BLOCK_HEADLINE: Final = "network access blocked by --agentreplay-block-network: "
_INTERCEPTED: Final = "an intercepted client (httpx, httpx2, requests/urllib3, aiohttp)"


# -- wording ---------------------------------------------------------------------------------------


def _allow_hosts_fix(host: str, *, marker: bool) -> str:
    where = (
        f'@pytest.mark.agentreplay(allow_hosts=["{host}"]), ' if marker else ""
    ) + f'--agentreplay-allow-hosts={quote(host)}, or allow_hosts = ["{host}"] in [tool.agentreplay]'
    return f'if it is a local test service, let it through: {where} ("loopback" admits every loopback name)'


def _host(destination: str) -> str:
    return destination.split(" ", 1)[0].rsplit(":", 1)[0] or "HOST"


def _blocked(run: GuardRun, headline: str, evidence: list[str], fixes: list[str]) -> NetworkBlockedError:
    # A guard-only run has no cassette nor replay mode to name: its test instead.
    if run.settings.block_network_only:
        test = nodeid(run)
        return NetworkBlockedError(
            headline, evidence=evidence, place=f"test {test}" if test else None, fixes=fixes
        )
    return NetworkBlockedError(headline, evidence=evidence, cassette=run.cassette, mode=run.mode, fixes=fixes)


def refusal(
    run: GuardRun, destination: str, channel: str, *, thread: str, child_pid: int | None = None
) -> NetworkBlockedError:
    """The error refusing a connection to ``destination`` on behalf of ``run`` (the first guarding run)."""
    evidence = [f"destination: {destination}", f"call: {channel}", f"thread: {thread}"]
    if child_pid is not None:
        evidence.append(f"process: child {child_pid} of the test's process")
    # A library's own call (a thread of its own, a known fetch): name the library and its fix.
    own_thread = None if child_pid is not None or isinstance(run, ParentRun) else run.origin_thread
    from ..core.callers import caller_of_call  # heavy (its table of known callers): only a refusal

    caller = caller_of_call(destination, own_thread)
    evidence.extend(line for line in caller.evidence() if not line.startswith("thread: "))
    test, host = nodeid(run), _host(destination)
    if run.settings.block_network_only:
        evidence.append(
            "this test does not replay (no @pytest.mark.agentreplay, no agent_replay fixture): "
            "--agentreplay-block-network refuses every connection it makes to a host not allowed"
        )
        target = f" ({test})" if test else ""
        fixes = [
            f"to record its calls once and replay them from then on, make the test{target} a replaying test: "
            "add @pytest.mark.agentreplay or request the agent_replay fixture, then record it: "
            + record_command(test, "missing"),
            _allow_hosts_fix(host, marker=False),
            "if the test must reach the network, run it without --agentreplay-block-network (the flag, or "
            "agentreplay_block_network / [tool.agentreplay] block_network, guards every test of the session)",
        ]
        return _blocked(run, BLOCK_HEADLINE + destination, evidence, [*caller.fixes(), *fixes])
    evidence += [
        "replay is fail-closed: only the cassette answers, and it records and serves only calls made "
        f"through {_INTERCEPTED} or inside a @tool function",
        "this call reached a socket (urllib.request, http.client, a raw socket or another client): "
        "re-recording it as it is would not record it",
    ]
    fixes = [
        _allow_hosts_fix(host, marker=True),
        f"to have the cassette serve it, make the call through {_INTERCEPTED} or inside a @tool function, "
        "then re-record the run against the real services: " + record_command(test, "all"),
    ]
    return _blocked(run, REPLAY_HEADLINE + destination, evidence, [*caller.fixes(), *fixes])


def child_refusal(entry: dict[str, object], run: GuardRun) -> NetworkBlockedError:
    """The parent's error for a refusal a child process reported (``entry``: its headline and evidence)."""
    headline = str(entry.get("headline", ""))
    destination = headline.removeprefix(REPLAY_HEADLINE).removeprefix(BLOCK_HEADLINE)
    reported = entry.get("evidence")
    evidence = [str(e) for e in reported] if isinstance(reported, list) else []
    pid = entry.get("pid")
    if run.settings.block_network_only:
        return _blocked(
            run,
            f"a child process (pid {pid}) was refused network access by --agentreplay-block-network: "
            + destination,
            evidence,
            [
                _allow_hosts_fix(_host(destination), marker=False),
                "if the child must reach the network, run the test without --agentreplay-block-network",
            ],
        )
    return _blocked(
        run,
        f"a child process (pid {pid}) of a replaying test was refused network access: {destination}",
        [*evidence, "a child process inherits the replay's guard; its calls are never recorded"],
        [
            _allow_hosts_fix(_host(destination), marker=True),
            f"to have the cassette serve it, make the call in the test's own process through {_INTERCEPTED}"
            " or a @tool function, then re-record the run: " + record_command(nodeid(run), "all"),
        ],
    )


# -- where refusals wait ---------------------------------------------------------------------------


class RefusalReports:
    """Refusals the session has not collected yet: those made for tests that had already ended (stray
    threads), and the directory where child processes append theirs (it lives as long as the process that
    created it). Process-wide: a stray thread refuses from no context the session could hand it, and a
    child finds the directory through the environment."""

    def __init__(self) -> None:
        # Re-entrant like the others: the at-fork hook creates the directory in whatever thread forks.
        self.lock = threading.RLock()
        self.strays: list[str] = []
        self.directory: str | None = None
        # The process that owns the in-memory runs; a forked child has another pid and reports to it.
        self.home_pid = os.getpid()

    def in_child(self) -> bool:
        return os.getpid() != self.home_pid

    def add_stray(self, message: str) -> None:
        with self.lock:
            self.strays.append(message)

    def take_strays(self) -> list[str]:
        with self.lock:
            taken, self.strays = self.strays, []
        return taken

    def hello(self, run_token: str) -> None:
        """In a child process: say that this process runs the guard for the run ``run_token``."""
        directory = self.directory
        if directory is None or not run_token:
            return
        with suppress(OSError):
            os.close(os.open(os.path.join(directory, f"{run_token}.{os.getpid()}.hello"), os.O_CREAT, 0o600))

    def take_hellos(self, run_token: str) -> set[int]:
        """The pids of the children that said :meth:`hello` for ``run_token`` (then forgotten)."""
        if self.directory is None:
            return set()
        pids: set[int] = set()
        for path in Path(self.directory).glob(f"{run_token}.*.hello"):
            with suppress(ValueError):
                pids.add(int(path.name.split(".")[1]))
            with suppress(OSError):
                path.unlink()
        return pids

    def ensure_directory(self) -> str:
        with self.lock:
            if self.directory is None or not os.path.isdir(self.directory):
                self.directory = tempfile.mkdtemp(prefix="agentreplay-guard-")
                atexit.register(_remove_report_dir, self.directory, os.getpid())
            return self.directory


REPORTS = RefusalReports()


def _remove_report_dir(path: str, owner: int) -> None:
    # atexit handlers are inherited by forked children: only the creating process removes it.
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


# -- refusing --------------------------------------------------------------------------------------


def check_address(
    family: int | None, address: object, channel: str, runs: list[GuardRun] | None = None
) -> None:
    """The gate every patched call goes through: raise :class:`~pytest_agentreplay.exceptions.
    NetworkBlockedError` unless ``address`` (of socket ``family``; None for a host by name) may be reached
    now by the guarding runs (or ``runs``), after recording the refusal wherever the test will see it."""
    runs = guarding_runs() if runs is None else runs
    if not runs:
        return
    permitted, resolved = RUNS.allowances(runs)
    verdict = decide(
        family, address, [r.settings.allow_hosts for r in runs], permitted=permitted, resolved=resolved
    )
    if verdict.allowed:
        return
    run = runs[0]
    thread = threading.current_thread()
    in_child = REPORTS.in_child() or isinstance(run, ParentRun)
    error = refusal(
        run, verdict.destination, channel, thread=thread.name, child_pid=os.getpid() if in_child else None
    )
    # The agent may swallow the error (retries, broad excepts): the test must still fail.
    for r in runs:
        r.failures.add(error)
    if REPORTS.in_child() or any(isinstance(r, ParentRun) for r in runs):
        _report_to_parent(error, runs)
    else:
        for r in runs:
            if ended(r):
                test = nodeid(r) or r.cassette or "a replaying test"
                REPORTS.add_stray(
                    f"{test}: thread {thread.name!r} it started made a network call after the test "
                    f"ended ({channel} to {verdict.destination}); it was refused"
                )
    raise error


def _report_to_parent(error: NetworkBlockedError, runs: list[GuardRun]) -> None:
    directory = REPORTS.directory
    if directory is None:
        return
    for r in runs:
        line = json.dumps(
            {
                "token": token(r),
                "test": nodeid(r),
                "pid": os.getpid(),
                "headline": error.headline,
                "evidence": list(error.evidence),
            }
        )
        path = os.path.join(directory, f"{token(r)}.{os.getpid()}.jsonl")
        with suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                # One write of one line: appends from several children never interleave.
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)


def _read_reports(pattern: str) -> list[dict[str, object]]:
    directory = REPORTS.directory
    if directory is None or not os.path.isdir(directory):
        return []
    entries: list[dict[str, object]] = []
    for path in sorted(Path(directory).glob(pattern)):
        taken = path.with_name(path.name + ".read")
        try:
            # Renamed first: a child still writing opens a fresh file, read later as a stray.
            path.rename(taken)
            text = taken.read_text("utf-8", "replace")
            taken.unlink()
        except OSError:
            continue
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def collect_child_refusals(ctx: GuardRun) -> list[NetworkBlockedError]:
    """The refusals child processes of ``ctx`` reported so far (each once); call when the run finishes."""
    run_token = ctx.guard_token
    if run_token is None:
        return []
    found = [child_refusal(entry, ctx) for entry in _read_reports(f"{run_token}.*.jsonl")]
    contained = HOLDER.take(run_token)
    if contained is not None:
        found.append(contained_refusal(ctx, *contained))
    return found


def contained_refusal(ctx: GuardRun, sends: int, commands: list[str]) -> NetworkBlockedError:
    """A child the guard does not know tried to reach the network from its empty namespace."""
    names = ", ".join(f"`{c}`" for c in dict.fromkeys(commands))
    return _blocked(
        ctx,
        f"a child process that is not Python tried to reach the network while {nodeid(ctx) or 'the test'} "
        f"replayed: {sends} send(s) found no route in the empty network namespace its children run in",
        [f"children started in that namespace: {names}"],
        [
            "serve the agent through a transport the plugin knows (the Claude Agent SDK's CLI is served "
            "from the cassette; HTTP, MCP and gRPC clients in Python are)",
            "or run the session isolated (--agentreplay-isolate=auto) so its calls meet the local services "
            "the test allows",
            "or allow the host it talks to (--agentreplay-allow-hosts / allow_hosts): the test's children "
            "then run unconfined and are named in the summary",
        ],
    )


def child_strays() -> list[str]:
    """Refusals of child processes that arrived after their test finished (each once)."""
    return [
        f"{e.get('test') or 'a replaying test'}: its child process {e.get('pid')} made a network call "
        f"after the test ended ({e.get('headline')}); it was refused"
        for e in _read_reports("*.jsonl")
    ]
