"""Start-up hook of child processes: guard a Python child of a replaying test like its parent.

The ``pytest_agentreplay_guard.pth`` file installed next to the package runs, at every Python start-up,
one line: when :data:`~pytest_agentreplay.http.guard.ENV_VAR` is set it calls :func:`start`, otherwise it
does nothing (a dictionary lookup). The line swallows every error: a broken installation must never break
Python start-up. This module imports nothing heavy; the guard itself imports only the standard library
and the exception tree.
"""

from __future__ import annotations

import os

ENV_VAR = "PYTEST_AGENTREPLAY_GUARD"


def start() -> None:
    """Install the network guard for the parent's replay runs named in the environment, if any."""
    value = os.environ.get(ENV_VAR)
    if not value:
        return
    from . import guard

    guard.adopt(value)
