"""Local stand-ins for the support agent's outside world, served on fixed loopback ports.

- :class:`BackofficeService`: the orders, tickets and refunds JSON service (``Idempotency-Key`` honoured).
- :class:`ScriptedModelServer`: an OpenAI-compatible (Chat Completions) or Anthropic-compatible (Messages)
  model, deterministic and scripted per scenario, plain and SSE-streamed.

Fixed ports keep the URLs recorded in cassettes identical between recording (services running) and
replay (nothing listening: replay never opens a socket).
"""

from __future__ import annotations

from .backoffice import BackofficeService, Fault
from .base import PORTS, LocalService, ServiceError, url_for
from .models import ScriptedModelServer
from .scripts import CHALLENGER_SCRIPTS, SCENARIOS, Reply, Scenario, Turn

__all__ = [
    "CHALLENGER_SCRIPTS",
    "PORTS",
    "SCENARIOS",
    "BackofficeService",
    "Fault",
    "LocalService",
    "Reply",
    "Scenario",
    "ScriptedModelServer",
    "ServiceError",
    "Turn",
    "url_for",
]
