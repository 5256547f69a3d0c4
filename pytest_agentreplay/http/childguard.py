"""Where the child start-up hook lived before the guard got its own folder (:mod:`pytest_agentreplay.guard`).

The ``.pth`` file is copied into site-packages when the package is installed: an editable install made
before the move keeps a ``.pth`` naming this module until it is reinstalled, and its Python children
would silently go unguarded if the name were gone. This forwards to :func:`pytest_agentreplay.guard.start`.
"""

from __future__ import annotations

from ..guard import start

__all__ = ["start"]
