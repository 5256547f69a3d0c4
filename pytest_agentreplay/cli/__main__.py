"""``python -m pytest_agentreplay.cli``: the ``agentreplay`` command."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
