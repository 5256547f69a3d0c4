"""The runtime values a setting may name (``runtime_values``). In core, not in
:mod:`pytest_agentreplay.runtime`: the settings (``config.runtime_sources``) check them, and core sits below
the runtime patches."""

from __future__ import annotations

from typing import Final

SOURCES: Final = ("clock", "uuid", "random")
DEFAULT_SOURCES: Final = SOURCES
