"""The ``agentreplay`` command line: the commands' table in ``parser``, each run by a function it names.

Exit codes: 0 ok; 1 problems found (drift with regressions, verification problems, audit problems);
2 usage error or unreadable input. Errors are this package's messages (headline, evidence, location,
numbered fixes), never tracebacks.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from ..exceptions import AgentReplayError
from .common import EXIT_OK, EXIT_USAGE, err
from .parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # `agentreplay show x | head`: stop quietly, and keep Python from complaining at exit.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (AgentReplayError, OSError) as exc:
        err(f"agentreplay {args.command}: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("agentreplay: interrupted")
        return 130
