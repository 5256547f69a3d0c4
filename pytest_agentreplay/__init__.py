"""pytest-agentreplay: replay-based regression testing of LLM agents.

The explicit event API here is importable without pytest and is a no-op when no run is active. Names
are resolved lazily so that loading the pytest plugin costs nothing for sessions that never use it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import capture_run as capture_run
    from .api import record_approval as record_approval
    from .api import record_policy as record_policy
    from .api import record_retrieval as record_retrieval
    from .api import record_state as record_state
    from .api import tool as tool
    from .core.capture import current_run as current_run
    from .core.capture import state_hash as state_hash
    from .core.constants import FORMAT_VERSION as FORMAT_VERSION
    from .core.tool_values import register_tool_codec as register_tool_codec
    from .exceptions import AgentReplayError as AgentReplayError
    from .exceptions import CassetteError as CassetteError
    from .exceptions import ConfigError as ConfigError
    from .exceptions import DriftError as DriftError
    from .exceptions import NetworkBlockedError as NetworkBlockedError
    from .exceptions import NoProviderError as NoProviderError
    from .exceptions import RecordedToolError as RecordedToolError
    from .exceptions import ReplayError as ReplayError
    from .exceptions import SecretLeakError as SecretLeakError
    from .exceptions import ToolValueError as ToolValueError
    from .exceptions import UnmatchedRequestError as UnmatchedRequestError
    from .http.providers.interface import InputFields as InputFields
    from .http.providers.interface import Provider as Provider
    from .runtime.values import record_value as record_value
    from .shell.handle import AgentReplay as AgentReplay

_EXPORTS = {
    "api": "capture_run record_approval record_policy record_retrieval record_state tool",
    "core.capture": "current_run state_hash",
    "core.constants": "FORMAT_VERSION",
    "core.tool_values": "register_tool_codec",
    "exceptions": "AgentReplayError CassetteError ConfigError DriftError NetworkBlockedError NoProviderError "
    "RecordedToolError ReplayError SecretLeakError ToolValueError UnmatchedRequestError",
    "http.providers.interface": "InputFields Provider",
    "runtime.values": "record_value",
    "shell.handle": "AgentReplay",
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names.split()}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_agentreplay' has no attribute {name!r}")
    # Not cached in globals(): a re-imported submodule (pytester restores sys.modules between inner
    # sessions) must hand out its own objects, or the API and the plugin would see different run contexts.
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
