"""Every command a message shows a user, built in one place, so it works when pasted: node ids are
shell-quoted, a flag is suggested only in a mode that honours it, an unknown test is never ``<test>``."""

from __future__ import annotations

from collections.abc import Sequence
from shlex import quote as quote  # node ids and paths for a POSIX shell; plain ones stay unquoted

from .constants import Mode


def record_command(nodeid: str | None, record: str = "missing") -> str:
    """``pytest --agentreplay-record=missing 'tests/test_a.py::test_x[1]'`` (no id: the whole suite)."""
    return f"pytest --agentreplay-record={record}" + (" " + quote(nodeid) if nodeid else "")


def rerecord_fix(nodeid: str | None, cassette: object | None = None, *, lead: str = "re-record it") -> str:
    """The numbered fix that re-records a run, naming the test when it is known."""
    if nodeid:
        return f"{lead} against the real services: {record_command(nodeid, 'all')}"
    where = f" {cassette}" if cassette else ""
    return (
        f"re-record the test that owns the cassette{where}: run `pytest --agentreplay-record=all` followed "
        "by the node id stored in the cassette's run.test field"
    )


def new_call_fix(nodeid: str | None, cassette: object | None = None) -> str:
    """The first fix of a live call (HTTP request or tool call) the cassette has no counterpart for."""
    return "if the new call is intended, " + rerecord_fix(nodeid, cassette, lead="re-record the run")


def update_command(nodeids: Sequence[str] = (), mode: str = Mode.REGRESSION) -> str | None:
    """The command that accepts drift, or None in a mode that ignores ``--agentreplay-update``."""
    # Only a regression replay re-runs the agent against the recorded world; the other modes are experiments
    # or inspections whose result is never a new baseline, so ``--agentreplay-update`` is ignored there.
    if mode != Mode.REGRESSION:
        return None
    return "pytest --agentreplay-update" + "".join(" " + quote(n) for n in nodeids)
