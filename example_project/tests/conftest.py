"""Fixtures of the support-agent example.

``support`` runs a scenario through the real agent (see ``harness.py``). The local services are started
only when the run needs them live: while recording (``agent_replay.recording``) the backoffice and the
scripted model listen on their fixed loopback ports (the URLs the cassettes hold); in regression replay
nothing is started and nothing listens (replay never opens a socket); model-comparison starts the
challenger model only; sandbox runs start a fresh backoffice on a free port (``test_support_sandbox.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import SupportHarness, mode_unavailable

from pytest_agentreplay import AgentReplay


@pytest.fixture
def agentreplay_config() -> dict[str, Any]:
    """Per-directory plugin settings: name the backoffice endpoints in the recorded history."""
    return {
        "tool_names": {
            "127.0.0.1/orders": "orders.lookup",
            "127.0.0.1/tickets": "tickets.create",
            "127.0.0.1/refunds": "refunds.create",
        }
    }


@pytest.fixture
def support(agent_replay: AgentReplay) -> Iterator[SupportHarness]:
    harness = SupportHarness(agent_replay)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def require_mode(agent_replay: AgentReplay) -> Callable[[str], None]:
    """Fail early, with a diagnosis, when the installed plugin cannot run ``mode`` (never skip: a broken
    mode must not pass CI as a skipped test)."""

    def check(mode: str) -> None:
        if agent_replay.recording:
            return  # recording does not depend on the mode
        reason = mode_unavailable(mode)
        if reason is not None:
            pytest.fail(reason, pytrace=False)

    return check
