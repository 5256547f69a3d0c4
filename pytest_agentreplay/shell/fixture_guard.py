"""The guard over a test's whole life, fixtures included.

A replaying test is guarded from the start of its set-up to the end of its teardown, so every fixture it
uses (also session- and module-scoped ones set up or torn down for it) runs under the guard, which knows
the test's early plan until ``agent_replay`` begins the run. A test that records, or may, is never
guarded; under ``--agentreplay-block-network`` every other test is, by a guard-only run.

A refusal in set-up fails the set-up, in teardown the teardown (cause ``network-blocked``); during the
call the test's run fails it. What the Python guard could not reach (children that did not run it or
predate the test, native networking libraries) becomes notes for the session's summary.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import guard
from ..core.capture import Recorder, RunContext, utc_now
from ..core.config import Settings
from ..core.constants import REPLAY_MODES
from ..core.events import RunMeta
from ..core.placeholder_credentials import PlaceholderCredentials
from ..core.run_settings import RunSettings
from ..guard.children import live_children, reaches_no_network, unreached_children
from ..guard.no_route import no_route_error, watch
from ..guard.session_namespace import Isolation
from .plan import TestPlan

# Native libraries that open connections in C, past Python's socket module: named when a test replays
# with them loaded (the Python guard cannot see their connections; isolation can).
NATIVE_NETWORKING = {
    "grpc": "grpcio's C core",
    "uvloop": "uvloop (libuv sockets)",
    "pycurl": "pycurl (libcurl)",
    "zmq": "pyzmq (libzmq)",
    "psycopg": "psycopg (libpq)",
    "psycopg2": "psycopg2 (libpq)",
}
ISOLATE_ADVICE = (
    "the Python guard cannot reach these: run the session isolated (--agentreplay-isolate=auto, Linux: "
    "the session in its own network namespace, loopback only), or for child processes "
    "--agentreplay-isolate-subprocesses"
)
# The key prefix of a note on a child that never ran the guard (counted in one summary line).
UNREACHED_CHILD = "unreached child "


def guard_summary(notes: dict[str, str], isolation: Isolation) -> list[str]:
    """The session summary's lines on what the Python guard did not reach (``notes``: key -> text); none in
    an isolated session, which holds its children and native code."""
    isolate_setting = isolation.setting
    if isolation.isolated or not notes:
        return []
    children = [text for key, text in notes.items() if key.startswith(UNREACHED_CHILD)]
    lines = [text for key, text in notes.items() if not key.startswith(UNREACHED_CHILD)]
    if children:
        shown = "; ".join(children[:3]) + ("; ..." if len(children) > 3 else "")
        lines.append(
            f"{len(children)} child process(es) did not run the guard (not Python, python -S, or an "
            f"interpreter without pytest-agentreplay), their network access unchecked: {shown}"
        )
    if isolate_setting == "off":
        lines.append(ISOLATE_ADVICE)
    else:
        lines.append(
            f"--agentreplay-isolate={isolate_setting} is set but the session is not isolated (the summary's "
            "network guard line says why)"
        )
    return lines


class FixtureGuard:
    """The guard over one test from the start of its set-up to the end of its teardown."""

    def __init__(self, nodeid: str, ctx: RunContext, credentials: PlaceholderCredentials) -> None:
        self.nodeid = nodeid
        self.ctx = ctx
        # Before anything of the test runs: the children alive now were not started by it.
        self.children_before = live_children()
        self._uninstall = guard.install()
        self._release = guard.protect(ctx)
        self._reported = 0
        # In an isolated session: the kernel's count of sends the namespace stopped, from here on.
        self._no_route = watch()
        # Fixtures build SDK clients too: the placeholders are set before the first one sets up. The
        # session's, kept from the last replaying test (removed here for a test that gets none).
        if not ctx.settings.block_network_only and ctx.mode in PLACEHOLDER_MODES:
            credentials.provide()
        else:
            credentials.remove()

    def new_problems(self, *, phase: str) -> list[BaseException]:
        """The problems of the guard's run since the last call (``phase``: the part of the test since)."""
        ctx = self.ctx
        for error in guard.collect_child_refusals(ctx):
            ctx.failures.add(error)
        counted = None if self._no_route is None else self._no_route.take()
        if counted is not None:
            block_only = ctx.settings.block_network_only
            ctx.failures.add(
                no_route_error(
                    counted,
                    test=self.nodeid,
                    phase=phase,
                    cassette=ctx.cassette,
                    mode=None if block_only else ctx.mode,
                    block_only=block_only,
                )
            )
        new, self._reported = ctx.failures.since(self._reported), len(ctx.failures)
        return new

    def close(self, run: RunContext | None) -> list[tuple[str, str]]:
        """Stop guarding; the notes (key, text) on what the guard could not reach while the test ran."""
        test = self.nodeid
        runs: list[guard.GuardRun] = [self.ctx] if run is None else [self.ctx, run]
        notes = [
            (f"{UNREACHED_CHILD}{pid}", f"{command} (pid {pid}, {test})")
            for pid, command in unreached_children(runs)
            if not reaches_no_network(command)
        ]
        after = live_children() if self.children_before else {}
        notes += [
            (
                f"child {pid}",
                f"process {pid} ({command}) was started before {test} and ran while it replayed: what the "
                "test hands it (a pool's tasks, a helper's pipe) runs outside the test's guard",
            )
            for pid, command in self.children_before.items()
            if after.get(pid) == command and not reaches_no_network(command)
        ]
        notes += [
            (
                f"native {name}",
                f"{label} was loaded while tests replayed: its connections bypass Python's socket",
            )
            for name, label in NATIVE_NETWORKING.items()
            if name in sys.modules
        ]
        self._release()
        self._uninstall()
        return notes


# The replay modes whose model calls are served: a placeholder credential is enough for the SDKs.
PLACEHOLDER_MODES = frozenset(REPLAY_MODES) - {"model-comparison"}


def guard_run(
    nodeid: str, plan: TestPlan | None, settings: Settings, cassette: Path | None
) -> RunContext | None:
    """The run guarding a test's fixtures: a replaying test's (``plan``: its early plan), or a guard-only run
    under ``--agentreplay-block-network`` (``plan`` None). None: nothing guards the test."""
    meta = RunMeta(run_id="fixture-guard", test=nodeid, recorded_at=utc_now())
    if plan is not None:
        if plan.records is not False:
            return None
        return RunContext(
            Recorder(meta),
            mode=plan.mode,
            cassette=None if cassette is None else str(cassette),
            settings=RunSettings(nodeid, plan.test.allow_hosts),
        )
    if not settings.block_network:
        return None
    return RunContext(
        Recorder(meta),
        mode="regression",
        settings=RunSettings(nodeid, tuple(settings.allow_hosts), block_network_only=True),
    )
