"""Shared set-up of the test suite.

pytester's in-process sessions drop every module an inner session imported first. A lazily imported
module of this package (an HTTP interceptor, the guard, the runtime-values patcher) first loaded inside
an inner session would come back as a second copy in the next test, beside patches the first copy still
owns, and tests would pass or fail by file order. Importing them here, once, in the outer process keeps
one copy. Nothing is patched here.
"""

from __future__ import annotations

import contextlib
import importlib

import pytest

pytest_plugins = ["clock_guard"]

for _name in (
    "pytest_agentreplay.runtime.values",
    "pytest_agentreplay.runtime.patches",
    "pytest_agentreplay.runtime.data",
    "pytest_agentreplay.guard",
    "pytest_agentreplay.intercept.httpx",
    "pytest_agentreplay.intercept.urllib3",
    "pytest_agentreplay.intercept.aiohttp",
    "pytest_agentreplay.intercept.grpc",
    "pytest_agentreplay.replay.policy",
    # The forkserver is one process per interpreter, started by whichever test first asks for it. If
    # multiprocessing's modules were first imported inside an inner session, pytester would drop them
    # afterwards while popen_forkserver (imported again later) kept naming a dropped ``spawn`` module the
    # guard no longer patches, and forkserver children would go unguarded depending on test order.
    "multiprocessing.spawn",
    "multiprocessing.forkserver",
    "multiprocessing.popen_forkserver",
    "multiprocessing.popen_spawn_posix",
    "multiprocessing.popen_fork",
):
    importlib.import_module(_name)

# The client libraries the interceptors patch, for the same reason: aiohttp first imported by an inner
# session's install came back as a second copy whose ClientSession the patch never saw, and the next
# test's aiohttp reads got empty bodies (the content-codings test after any in-process inner session).
# grpc's channel module is imported by the first channel made, not by ``import grpc``.
for _name in (
    "aiohttp",
    "aiohttp.client_reqrep",
    "aiohttp.streams",
    "multidict",
    "yarl",
    "grpc",
    "grpc._channel",
):
    with contextlib.suppress(ImportError):  # an optional client: the tests that need it skip
        importlib.import_module(_name)


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions see a developer's machine whatever runs the suite: a drifting test writes its pending
    file unless a test sets ``CI`` itself (the default depends on it)."""
    monkeypatch.delenv("CI", raising=False)
