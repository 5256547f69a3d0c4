"""The child start-up hook's old address: an editable install made before the guard got its own folder
keeps a ``.pth`` naming this module until reinstalled, and its children would silently go unguarded."""

from __future__ import annotations

from ..guard import start

__all__ = ["start"]
